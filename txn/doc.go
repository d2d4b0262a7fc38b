// Package txn owns transactions across streams and partitions: the
// coordinator log of a data directory (<data-dir>/txn, one segment log),
// the bounded index of open transactions, their timeouts, the commit
// protocol and its recovery. The design is half messages: the records of
// an open transaction live only in the coordinator log, where no consumer
// reads; a commit copies them into their target partitions. Data logs
// never hold markers, aborted records or records of open transactions.
//
// The coordinator log holds, as record bodies of its own format
// (record.go): BEGIN (the owner's identity and timeout; a transaction's
// id is its BEGIN's offset plus one), RECORD (one producer record with
// its target and index), INTENT (the commit's floors: each target's end
// when it was written; and its group commits), COMMITTED (the ranges the
// records went to) and ABORTED.
//
// A commit, in order: every RECORD durable; the group commits checked;
// INTENT durable; each target's copies appended and durable, each copy
// re-framed with the ReferenceHeader "<id>:<index>"; the group positions
// moved and durable; COMMITTED durable; the answer. Recovery (Open)
// replays the log and ends every transaction: one with a durable INTENT
// and no COMMITTED is rolled forward (each target is scanned from its
// floor for copies carrying the transaction's reference, and only the
// missing ones are appended; the group commits are applied again, which
// moves nothing already moved); one without INTENT is aborted.
//
// Invariants:
//   - A record of a transaction reaches a target only after the
//     transaction's INTENT is durable, and a target holds at most one copy
//     of it: every write to a target after a possible earlier one is
//     preceded by a scan for its reference.
//   - After Open, every transaction in the log is committed (all of its
//     records in their targets once, its group commits applied) or aborted
//     (none of them anywhere).
//   - An acknowledged record (its Append ticket complete) is durable in
//     the coordinator log; an answered commit is durable everywhere.
//   - A repeated end of a committed transaction returns the recorded
//     ranges and writes nothing.
//   - Memory is bounded by configuration (I8): at most MaxOpen open
//     transactions, each an index entry (the payload stays on disk,
//     MaxRecords and MaxBytes bound it there), and MaxEnded outcomes.
//   - Timeouts run on the injected monotonic clock, never the wall clock.
//   - The log keeps every segment holding a record at or above the oldest
//     open transaction's BEGIN (Reclaim deletes only below it).
//   - Decoders run on hostile input: a bad record is an error wrapping
//     ErrMalformed, never a panic.
package txn
