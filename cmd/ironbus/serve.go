package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/internal/profiling"
	"github.com/ironbus/ironbus/server"
)

// defaultAddr is where the broker listens and clients connect unless told
// otherwise: loopback, so a fresh install exposes nothing.
const defaultAddr = server.DefaultAddr

// drainTimeout bounds a graceful stop; a second signal cuts it short.
const drainTimeout = 30 * time.Second

// serveOptions are serve's settings (a server.Config its flags fill) and
// the actions of one run that are not settings.
type serveOptions struct {
	cfg         server.Config
	config      configOptions
	printBudget bool
	edge        bool
	profileOut  string
}

func newServeCmd(opts *globalOptions) *cobra.Command {
	cmd, _ := newServeCommand(opts)
	return cmd
}

// serveLong is serve's --help text.
const serveLong = `Run the IronBus broker.

serve opens (or creates) the data directory, recovers every log in it, and
accepts client connections. A producer's record is acknowledged only after the
fdatasync that makes it durable (--durability sync, the default).

The broker listens on loopback unless told otherwise, with no TLS and no
authentication. A non-loopback --addr needs TLS (--tls-cert, --tls-key) and
authentication (--auth-config), or --auth-config with --insecure-plaintext-wire
on a network you trust (warned about loudly at every start). --tls-client-ca
requires client certificates (mTLS). TLS and auth files reload when they change
and on SIGHUP, without dropping connections. See docs/SECURITY.md.

SIGTERM or SIGINT drain gracefully: stop accepting, answer every request already
read (acknowledging only what was synced), sync every log, exit 0. A second
signal exits at once; recovery at the next start truncates anything torn.

The data directory is locked: a second broker on it fails and names the holder.

Memory: every buffer the broker may hold is bounded by a knob, and the sum of
their worst cases is the RAM budget. --ram-ceiling refuses to start when the
budget does not fit, printing it line by line with the knob to turn, and sets
the Go runtime's memory limit. --print-budget shows the budget and exits.
Segment files read through mmap are page cache the kernel reclaims, and are
not part of the budget.

Configuration: every flag is also a key of the --config TOML file
(--segment-bytes is segment_bytes) and an environment variable
(IRONBUS_SEGMENT_BYTES). Precedence: flag > environment > file > profile >
default. Every number has bounds (docs/CONFIG.md): a value outside them
exits 1 naming it, its range and where it came from. --profile edge-tiny
(small devices, 64MiB ceiling), balanced (the defaults) or throughput sets
every knob you do not set otherwise; --edge is the old name of edge-tiny.
Unknown file keys are refused. SIGHUP re-reads the TLS and auth files and
the config file, and applies what can change while running (--log-level,
retention), logging every other change as needing a restart. "ironbus
config print" shows each value and where it came from; docs/CONFIG.md has
the details.

--storage memory keeps everything in RAM and nothing survives the process; it
needs --accept-memory-storage-loss and --memory-storage-cap.

Retention (docs/RETENTION.md): --retention-bytes, --retention-age and
--retention-records bound every stream, deleting whole sealed segments only.
Under --retention-policy consumer-safe (the default) a bound never deletes what
a consumer group has not committed; drop-oldest does, and the group gets a gap
advisory. --group-expiry lets an idle group stop holding retention back.
--disk-budget caps the whole data directory, keeping --disk-headroom free for
checkpoints and recovery; at the budget, --disk-full-policy drop-new refuses
new records with a retryable no-space error while reads and acks go on.
Record ages never trust the wall clock alone: a clock stepping years forward
or back deletes nothing early.`

const serveExample = `  ironbus serve --data-dir /var/lib/ironbus
  ironbus serve --data-dir ./data --addr 127.0.0.1:7000 --segment-bytes 8MiB
  ironbus serve --data-dir ./data --io-mode auto --max-connections 32
  ironbus serve --data-dir ./data --loop epoll
  ironbus serve --data-dir /data --profile edge-tiny
  ironbus serve --config /etc/ironbus/ironbus.toml
  IRONBUS_LOG_LEVEL=debug ironbus serve --data-dir ./data
  ironbus serve --storage memory --accept-memory-storage-loss --memory-storage-cap 64MiB --segment-bytes 8MiB
  ironbus serve --data-dir ./data --max-connections 1000 --print-budget
  ironbus serve --data-dir /data --retention-age 72h --retention-bytes 2GiB --group-expiry 168h
  ironbus serve --data-dir /data --disk-budget 8GiB --disk-full-policy drop-oldest
  ironbus serve --data-dir /data --addr 0.0.0.0:7777 --tls-cert server.crt --tls-key server.key --auth-config auth.toml`

// newServeCommand builds serve with the options its flags fill; a reload
// builds a fresh one to parse the new configuration into.
func newServeCommand(opts *globalOptions) (*cobra.Command, *serveOptions) {
	serve := &serveOptions{cfg: server.DefaultConfig()}
	cfg := &serve.cfg
	cmd := &cobra.Command{
		Use:     "serve --data-dir DIR [--addr HOST:PORT] [--config FILE] [--profile NAME]",
		Short:   "Run the broker on a data directory",
		Long:    serveLong,
		Example: serveExample,
		Args:    cobra.NoArgs,
	}
	flags := cmd.Flags()
	addDataDirFlag(cmd, &cfg.DataDir)
	flags.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on (host:port; port 0 picks a free one)")
	flags.StringVar(&cfg.Durability, "durability", cfg.Durability, "when a produce is acknowledged: sync (after fdatasync), interval or none (need --accept-relaxed-durability)")
	flags.BoolVar(&cfg.AcceptRelaxedDurability, "accept-relaxed-durability", false, "consent to --durability interval|none: a power cut loses acknowledged records")
	flags.DurationVar(&cfg.CommitLinger, "commit-linger", cfg.CommitLinger,
		"flash-wear mode: a busy stream's fdatasync may wait this long (up to 100ms) to cover more records; acks still follow it (0: never waits)")
	flags.StringVar(&cfg.IOMode, "io-mode", cfg.IOMode, "how segments are written: buffered, direct (O_DIRECT) or auto (probe and pick)")
	flags.Var(sizeValue{&cfg.SegmentBytes}, "segment-bytes", "segment size, with a unit (64MiB; 8MiB suits small devices)")
	flags.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "connections served at once")
	flags.Var(millisValue{&cfg.ConsumeLongPoll}, "consume-longpoll-ms", "longest an idle fetch parks waiting for new durable records (ms)")
	flags.DurationVar(&cfg.VisibilityTimeout, "visibility-timeout", cfg.VisibilityTimeout, "default lease of a delivery to a work or key-shared group")
	flags.IntVar(&cfg.MaxDeliver, "max-deliver", cfg.MaxDeliver, "deliveries of a record before it moves to the dead-letter queue")
	flags.DurationVar(&cfg.DLQRetention, "dlq-retention", cfg.DLQRetention,
		"drop dead letters older than this (whole segments; 0 keeps them forever)")
	flags.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", cfg.CheckpointInterval,
		"how often consumer group cursors are persisted; after a crash, what was acknowledged since the last one is delivered again")
	flags.IntVar(&cfg.NoAckShedBudget, "no-ack-shed-budget", cfg.NoAckShedBudget,
		"fire-and-forget (pub --no-ack) records per second the broker may drop, counted in ironbus_no_ack_dropped_total, rather than slow their producers when full (0: never)")
	flags.IntVar(&cfg.DedupMaxIDs, "dedup-max-ids", cfg.DedupMaxIDs,
		"message ids each partition remembers within its dedup window; beyond it the oldest are forgotten early (counted in ironbus_dedup_evicted_early_total)")
	flags.IntVar(&cfg.MaxOpenTxns, "max-open-txns", cfg.MaxOpenTxns,
		"transactions open at once across every connection; a BeginTx over it is answered busy (retryable)")
	flags.BoolVar(&cfg.AutoCreateStreams, "auto-create-streams", cfg.AutoCreateStreams,
		"create a stream on its first publish (consume and admin verbs never create one); false refuses publishes to unknown streams")
	flags.StringVar(&cfg.Loop, "loop", cfg.Loop, "network backend: auto (fastest this system runs), uring, epoll or std; a named one that cannot run is an error")
	flags.BoolVar(&cfg.InsecurePlaintextWire, "insecure-plaintext-wire", false, "allow a non-loopback --addr without TLS (still needs --auth-config; warned at every start)")
	flags.StringVar(&serve.profileOut, "profile-out", "", "write cpu.pprof (while serving) and heap.pprof (at stop) into this directory")
	flags.BoolVar(&opts.json, "json", false, "log one JSON object per line; with --print-budget, print the budget as JSON (schema ironbus.cli.budget.v1)")
	addMemoryFlags(cmd, serve)
	addConfigFlags(cmd, &serve.config, &cfg.LogLevel)
	addStorageFlags(cmd, cfg)
	addRetentionFlags(cmd, cfg)
	addHealthFlags(cmd, cfg)
	addSecurityFlags(cmd, cfg)
	addClusterFlags(cmd, cfg)
	cmd.RunE = classified(func() error {
		resolved, err := resolveConfig(cmd.Flags(), &serve.config, os.LookupEnv)
		if err != nil {
			return err
		}
		serve.config.resolved = resolved
		return resolved.withSources(runServe(opts, serve))
	})
	return cmd, serve
}

func runServe(opts *globalOptions, serve *serveOptions) error {
	cfg := serve.serverConfig(opts)
	if cfg.Storage != server.StorageMemory {
		if err := requireDataDir(cfg.DataDir); err != nil {
			return err
		}
	}
	if serve.printBudget {
		budget, err := cfg.Budget()
		if err != nil {
			return serverError(err)
		}
		return printBudget(opts, budget)
	}
	return runBroker(opts, serve, cfg, func(addr string) {})
}

// serverConfig is the configuration serve runs: the settings, plus where
// the log goes and what the lock names.
func (serve *serveOptions) serverConfig(opts *globalOptions) server.Config {
	cfg := serve.cfg
	cfg.LogOutput, cfg.LogJSON = opts.stderr, opts.json
	cfg.Version, cfg.Owner = mainModuleVersion(), "ironbus serve"
	return cfg
}

// runBroker runs a server until a signal, then drains it. ready is called
// with the bound address once the broker accepts connections.
func runBroker(opts *globalOptions, serve *serveOptions, cfg server.Config, ready func(addr string)) error {
	srv, err := server.New(cfg)
	if err != nil {
		return serverError(err)
	}
	logger := srv.Logger()
	logConfig(logger, serve)
	stopProfiles, err := startProfiles(serve.profileOut, logger)
	if err != nil {
		_ = srv.Stop(context.Background())
		return err
	}
	defer stopProfiles()
	// Signals are caught before Start logs "serving": a supervisor that
	// signals as soon as it reads that line must not kill the process.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	defer watchReloads(serve, srv)()
	if err := srv.Start(context.Background()); err != nil {
		_ = srv.Stop(context.Background())
		return serverError(err)
	}
	ready(srv.Addr())
	select {
	case sig := <-signals:
		logger.Info("draining", "signal", sig.String())
	case err := <-srv.Failed():
		_ = srv.Stop(context.Background())
		return exitErrorf(exitInternal, "%w", err)
	}
	go func() {
		sig := <-signals
		logger.Warn("second signal: exiting now; recovery will truncate anything torn", "signal", sig.String())
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		return exitErrorf(exitInternal, "%w", err)
	}
	return nil
}

// serverError gives a refusal of package server its exit code.
func serverError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, server.ErrNotADirectory):
		return exitErrorf(exitNotFound, "%w", err)
	case errors.Is(err, server.ErrLocked):
		return exitErrorf(exitLocked, "%w", err)
	case errors.Is(err, server.ErrUnreadable):
		return exitErrorf(exitUnreadable, "%w", err)
	}
	for _, usage := range []error{server.ErrOutOfBounds, server.ErrInvalidSetting, server.ErrUnprotectedAddress,
		server.ErrExposedSecret, server.ErrSecurityFile, server.ErrEncryptionKey, server.ErrOverBudget, server.ErrListen} {
		if errors.Is(err, usage) {
			return exitErrorf(exitUsage, "%w", err)
		}
	}
	return exitErrorf(exitInternal, "%w", err)
}

// startProfiles starts a CPU profile into dir (when set) and returns what
// stops it and writes the heap profile beside it.
func startProfiles(dir string, logger *slog.Logger) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	run, err := profiling.Start(dir)
	switch {
	case errors.Is(err, profiling.ErrBusy):
		return nil, exitErrorf(exitInternal, "--profile-out: %w", err)
	case err != nil:
		return nil, exitErrorf(exitUsage, "--profile-out: %w", err)
	}
	return func() {
		if err := run.Stop(); err != nil {
			logger.Warn("heap profile not written", "error", err.Error())
		}
	}, nil
}

// millisValue is a pflag.Value holding a duration written as whole
// milliseconds (--consume-longpoll-ms 30000).
type millisValue struct{ target *time.Duration }

func (v millisValue) String() string {
	if v.target == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.target/time.Millisecond), 10)
}

func (v millisValue) Set(text string) error {
	ms, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return fmt.Errorf("%q: want a whole number of milliseconds (for example 30000)", text)
	}
	*v.target = time.Duration(ms) * time.Millisecond
	return nil
}

func (millisValue) Type() string { return "int" }
