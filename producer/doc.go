// Package producer owns the producer table: which idempotent producers
// exist (names, ids, epochs) and, per partition log, where each one's
// sequence stands, so the broker can tell a resend from a new record.
//
// Two structures, two kinds of authority:
//
//   - Registry (one per data directory, producers.log): names map to ids
//     for life; every Init raises the name's epoch and is on disk before it
//     returns, so a fenced incarnation stays fenced across a crash. The file
//     is an append-only list of CRC'd entries, read up to the first one that
//     fails (a torn tail is an Init that never returned) and rewritten
//     crash-safely when superseded entries outnumber live ones. Every Init
//     also has a generation: its rank among all Inits of the directory.
//   - Table (one per partition log): per producer id, the next sequence
//     expected and a ring of the last batches' (first sequence, count,
//     first offset), so a resend inside the ring is answered with its
//     original offset, and an older one as a duplicate at an unknown
//     offset. The table is derived: a snapshot (Encode, DecodeTable) says
//     which log offset it covers, and recovery replays the log's records
//     from there to the durable end through Record. Its state is a
//     function of durable bytes only.
//
// A producer without state in a table is new when its latest Init is
// newer than the table's last drop of state (its generation is above the
// table's drop mark), and expired otherwise: ErrExpired until it calls
// Init again. The mark rises on every eviction, idle expiry and known gap
// in what the table saw, so a forgotten producer is never taken for a
// new one.
//
// Invariants: memory is bounded by configuration, never by the number of
// producers ever seen (I8): RegistryOptions.MaxNames names, and per table
// TableOptions.MaxProducers states of RingBatches batches each; a
// producer whose state was dropped gets a typed error (ErrExpired), never
// a silent fresh accept; a sequence gap is refused, never stored; idle
// expiry runs on broker time (an injected monotonic clock), never the
// wall clock (I6). All file I/O goes through segment/vfs.
package producer
