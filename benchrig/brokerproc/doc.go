// Package brokerproc runs an IronBus broker as a child process for a
// benchmark and measures it from outside: `ironbus serve` on a temporary
// data directory, bound to a free loopback port, with its peak anonymous
// RSS sampled while it serves, the bytes it wrote to storage, and the
// fdatasyncs it reports when it drains.
//
// The broker is the binary users run, started the way they start it, so
// its figures include everything a deployment pays (the process, its
// runtime, the disk as the broker uses it). The package owns the process
// only: the load is benchrig/load's, which takes any broker address, so
// other targets of a run (a live broker, a floor server) sit beside this
// package, not in it.
//
// Invariants: Start returns only once the broker serves, or with the
// process gone and its directories removed; Stop drains the broker with
// SIGTERM and waits for its last log line, so Usage carries its fdatasync
// count; Remove deletes every temporary directory Start made and kills a
// broker that was never stopped. Figures the system does not expose (no
// /proc) read as 0.
package brokerproc
