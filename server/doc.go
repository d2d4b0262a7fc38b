// Package server is the one way to run an IronBus broker: `ironbus serve`,
// `ironbus dev`, the bench rig and the tests all start one through it, so
// each runs the same checks and the same wiring.
//
// A Config holds every setting. DefaultConfig gives the defaults;
// Validate checks each numeric setting against its documented bounds
// (a *BoundsError naming the key, the value and the range), each word
// setting against its choices, the consents (relaxed durability, memory
// storage) and the bind rule. Budget computes the RAM budget of a Config
// without opening anything.
//
// New runs the boot checks and acquires everything: the configuration,
// a data directory that is a directory, secret files (TLS key, auth
// config) that group and others cannot read, the RAM budget against
// RAMCeiling (which also becomes the Go runtime's memory limit), the
// health endpoints, TLS, auth and the audit log, the data directory (its
// lock, then recovery) and every listener. Start serves; Stop drains
// (stop accepting, finish what was read, acknowledge only what is synced,
// sync every log) and releases. Reload applies the reloadable settings
// (Reloadable) to a running server; ReloadSecrets re-reads the TLS and
// auth files, which are also watched for changes.
//
//	cfg := server.DefaultConfig()
//	cfg.DataDir, cfg.Addr = "/var/lib/ironbus", "127.0.0.1:0"
//	srv, err := server.New(cfg)
//	if err != nil { ... }
//	if err := srv.Start(ctx); err != nil { ... }
//	defer srv.Stop(ctx)
//	dial(srv.Addr())
//
// Invariants:
//   - A Config that passes Validate never makes the engine, the storage or
//     the network fail to open on its values: each lower bound is at least
//     what they accept.
//   - Every refusal of New, Validate and Budget wraps one sentinel of this
//     package (errors.Is): a caller tells bad settings, a busy data
//     directory, an unreadable one and a port in use apart without parsing
//     messages. An error that wraps none is a failure of the engine itself,
//     a bug (the CLI's exit 70). Messages name settings by their flag spelling
//     (--segment-bytes; the TOML key is segment_bytes, the field
//     SegmentBytes) and say what to do.
//   - The bind rule holds for every listener: a non-loopback address needs
//     TLS and authentication, or authentication and the explicit plaintext
//     consent; the health endpoints bind loopback only, or any address with
//     a bearer token file (HealthTokenFile).
//   - The package never exits the process and never installs signal
//     handlers: the caller maps signals to Stop, Reload and ReloadSecrets.
//   - Each door is a listener (an internal interface): the client wire is
//     the first; the MQTT door, the cluster peer link and the console
//     register beside it, bound in New, served by Start, drained by Stop.
//   - The mapping from a Config to the engine's configuration is one
//     function (mapConfig, engine.go), for the engine and the wire
//     sessions alike.
package server
