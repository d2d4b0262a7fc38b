// Package producer owns the producer table: which idempotent producers
// exist (names, ids, epochs) and, per partition log, where each one's
// sequence stands, so the broker can tell a resend from a new record.
//
// Two structures, two kinds of authority:
//
//   - Registry (one per data directory, producers.log): names map to ids
//     for life; every Init raises the name's epoch and is on disk before it
//     returns, so a fenced incarnation stays fenced across a crash.
//   - Table (one per partition log): per producer id, the next sequence
//     expected and a ring of the last batches' (first sequence, count,
//     first offset), so a resend inside the ring is answered with its
//     original offset. The table is derived: a snapshot says which log
//     offset it covers, and recovery replays the log from there to the
//     durable end. Its state is a function of durable bytes only.
//
// Invariants: memory is bounded by configuration, never by the number of
// producers ever seen (I8); a producer whose state was dropped gets a typed
// error (ErrExpired), never a silent fresh accept; a sequence gap is
// refused, never stored.
package producer
