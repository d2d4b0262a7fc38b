// Package crashtest holds the pieces of the crash and power-cut harnesses
// that more than one test package runs: the wire workload a broker is
// killed under and the checks made after each restart, the file system
// that loses power at its k-th write, the check of a recovery report, and
// the environment variables that size and replay a run.
//
// The workload (Ledger, Produce, Consume) drives any broker address, so
// the same load runs against the real binary killed with SIGKILL
// (cmd/ironbus), against that binary on a FUSE disk that drops unsynced
// writes (cmd/ironbus), and against an in-process engine on a crashable
// MemFS (session). Two pipelined producers publish, a work group
// acknowledges in batches, and the Ledger records every acknowledgement;
// after a restart, Check reads the whole log back and CheckGroup bounds
// the group's redelivery.
//
// PowerCut is the "cut at every write" sweep of the unit tests that run on
// a MemFS (consumer, datadir): the k-th mutating operation takes a crash
// image and fails, and so does everything after it.
//
// Harnesses tied to one package's internals stay in that package:
// segment's crash rig (it counts tickets of the log itself), the upgrade
// step hooks of internal/upgrade, and the lazyfs mount of cmd/ironbus.
//
// Invariants:
//   - A Ledger holds only acknowledgements the broker made before the
//     cut or kill it is checked against: acks that come back while the
//     ledger is cut (Ledger.Cut) are not recorded.
//   - Every failure names the round and, through Seed, how to replay it
//     (IRONBUS_SEED).
//   - The package imports no package of the broker itself (only client,
//     segment and vfs), so the tests of session and consumer can use it.
package crashtest
