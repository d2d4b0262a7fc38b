// Package histcheck checks histories of produce and read operations
// against replicated partition logs: the checkers the replication
// simulator runs after every seed and the real-process nemesis tests run
// after every cycle. It knows nothing of how the log is replicated; its
// input is plain: operations with their invocation and return times, each
// produce carrying a value no other produce carries, and one final read of
// every partition's log.
//
// A produce ends OK at an offset (acknowledged), Fail (definitely not
// written), or Info (indeterminate: it may or may not be in the log); one
// that never returned counts as Info. A read asks one offset and sees a
// value or the end of the log.
//
// CheckLog is the order-and-loss checker, linear in the history (plus a
// sort): every OK produce appears exactly once in the final log at its
// acknowledged offset; the final log's offsets are dense from its first
// retained offset and increasing; nothing appears that was never produced
// in that partition; no value appears twice; a failed produce never
// appears; reads agree with the final log; and real time orders offsets
// (an offset known to be filled when an operation began is below any
// offset that operation is acknowledged at, or finds empty).
//
// CheckLinearizable searches for a linearization with porcupine. The
// model is one partition log whose state is its next offset; partitions
// are independent keys. Values are unique, so each produce owns one
// offset: its acknowledged one, or for an indeterminate produce the offset
// its value was observed at (one never observed is dropped, which cannot
// change the verdict: it may always take effect after everything else).
// The final read joins the history as reads at its end, so a lost ack, a
// gap or a duplicate is a non-linearizable history too.
//
// Invariants:
//   - Neither checker trusts what it checks: malformed input (two produces
//     of one value, a return before its invocation, a partition without a
//     final read) is ErrBadHistory, never a pass.
//   - Every violation names the operations that show it.
package histcheck
