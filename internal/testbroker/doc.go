// Package testbroker starts brokers for tests, the two ways users run
// one: in this process through package server (Start), and as the real
// ironbus binary in its own process (Binary, Process), which a test can
// signal, kill -9 and restart on the same data directory.
//
// Start takes a server.Config (Config gives the test default: a fresh
// temporary data directory, a free loopback port, no health endpoints,
// the network backend IRONBUS_TEST_LOOP names) and registers the stop on
// the test, so a test needs no cleanup of its own. The broker's log is
// kept and printed when the test fails.
//
// BuildBinary builds cmd/ironbus once per test process (a TestMain calls
// it), or takes the binary IRONBUS_TEST_BINARY names, run through the
// emulator IRONBUS_TEST_EXEC names when the tests run for another
// architecture. Binary.Serve starts `ironbus serve` or `ironbus dev` and
// returns once the process logged the address it serves on.
//
// Tests that start no broker through this package, and why:
//   - package server's own tests (this package imports server);
//   - package session's tests, which drive the wire handler over an engine
//     they open themselves: they inject file-system faults into the engine
//     and inspect its logs, which a server does not expose, and they
//     cannot import server (it imports session);
//   - package loop's conformance tests, which serve handlers of their own;
//   - broker/health's tests, which attach the health endpoints to an
//     engine on a fault-injecting file system and produce through the
//     engine's Go API, no wire needed;
//   - package client's unit tests, which use a fake broker to script
//     faults frame by frame (its examples start a real one through
//     server, without a *testing.T);
//   - benchrig/brokerproc, which measures a broker process from outside.
//
// Invariants:
//   - A started broker or process is stopped (a process killed) when its
//     test ends, whatever the test did.
//   - Start and Binary.Serve return only once the broker accepts
//     connections, or fail the test.
//   - Process.Logs holds every line the process wrote to stderr once Wait
//     has returned.
package testbroker
