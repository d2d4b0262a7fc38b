// Package consumer owns consumer groups: which records of a log each group
// has been given, which are leased to whom, which are done, and where the
// ones that can never be processed go. docs/CONSUMERS.md is the contract:
// the model, the dead-letter move protocol with its crash argument, the
// checkpoint layout and the defaults.
//
// A group has a type fixed at creation (persisted; reopening as another
// type is ErrTypeMismatch) and starts at the earliest retained record,
// the latest, an offset or a timestamp:
//
//   - work: competing consumers. Each record is leased to one of them for
//     a visibility timeout (Extend renews it up to a hard cap per attempt)
//     under a lease token, 64 bits from the group's ChaCha8 stream keyed
//     from crypto/rand, so an operation quoting a stale, lapsed or
//     guessed token is fenced (StatusStale,
//     StatusExpired). Redeliveries go out before new records; Nack waits
//     an explicit delay or the backoff schedule; Term settles without the
//     dead-letter queue; Release (a closed connection) lapses the owner's
//     leases at once.
//   - key-shared: a work group in which each key is owned by one live
//     member (rendezvous hashing) and handed out one record at a time, in
//     offset order, also across members leaving and joining.
//   - broadcast: one reader at a time advancing a cursor with
//     CumulativeAck; no leases.
//   - streaming: the consumer manages its offsets (Read), the group only
//     stores the committed position (Commit).
//
// A group may have a subject filter (Options.Filter), fixed at creation
// and kept in the checkpoint: its reader skips records whose subject does
// not match, and their offsets are settled like a retention gap and
// reported as a Gap with reason GapFiltered, coalesced.
//
// A record delivered MaxDeliver times, one larger than MaxRecordBytes or
// one a consumer rejects moves to the dead-letter queue (DeadLetters,
// supplied by the caller), crash-safely and exactly once. Records removed
// before the group reached them are reported once, as one Gap.
//
// Invariants:
//   - File I/O only through package segment (checkpoints, readers, the
//     dead-letter log).
//   - Lease timers and delays use the injected monotonic clock, never wall
//     time (I6); record timestamps are data, used only by StartTime.
//   - The committed cursor moves only over a contiguous prefix of done
//     offsets; a checkpoint holds the cursor, the done ranges above it
//     and every unsettled record's delivery count, so a crash redelivers
//     at most what was acked since the last checkpoint and never resets a
//     poison record's count.
//   - Memory per group is bounded by configuration (I8): MaxInFlight
//     leases, MaxUnsettled records outstanding, and done ranges (never a
//     per-offset set), whose number is at most the unsettled records + 1.
//   - A fetch never wedges: credits return on ack, nack, term, reject and
//     lease expiry; NextDue tells a waiting caller when time alone makes
//     something deliverable; a fetch with credit returns at least one
//     deliverable record whatever its size.
package consumer
