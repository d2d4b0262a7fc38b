// Package dedup owns a stream partition's message-id window: the ids of
// records published with a message id (the ib-msg-id header) within the
// last window of broker time, each with the offset of its first copy, so a
// second publish of the same id returns that offset and stores nothing.
//
// Semantics:
//   - An id is remembered for at least Window of broker time from its
//     first acceptance (to the millisecond, rounded up); a hit does not
//     extend it. Broker time (package brokertime) never jumps: a
//     wall-clock step expires nothing early.
//   - At most MaxIDs ids are remembered: past it the oldest sealed
//     generation is forgotten whole, and its ids still inside their
//     window are counted (Stats.EvictedEarly), as are the ids of a
//     generation file found damaged.
//   - An id is matched by its 64-bit xxh3 hash: two ids collide with
//     probability about n²/2⁶⁵ for n remembered ids.
//
// Memory is bounded (I8, MemoryBytes): the active generation is an
// open-addressing table of at most GenerationIDs ids (16 bytes each, load
// at most 3/4) in RAM; when it is full, or a quarter window old, it is
// sealed to disk by a background writer (one at a time) and a fresh table
// takes over. Each sealed generation keeps only its Bloom filter (10 bits
// per id) and one hash and CRC per 256 ids in RAM; a lookup whose filter
// says "maybe" reads one 4 KiB block of the file.
//
// Files, in the directory Open is given (the broker's is
// streams/<stream>/<partition>/dedup beside the partition's segments, so
// a purge, which deletes segments, keeps it): gen-<seq>.run, one per
// sealed generation (format in run.go), written whole and crash-safely
// (temporary file, sync, rename, sync the directory), and deleted once
// every id in it has expired or the count cap forgets it; covers, written
// at Close, how far the log is covered when no generation says so
// (recover.go).
//
// Crash safety: the window is derived from the log. A generation holds
// only ids of durable records (Options.Durable), and says up to which
// offset it covers the log; after a crash the ids of the records from
// CoversUpTo to the log's durable end are replayed (Replay) into the
// active generation. A torn temporary file is deleted; a generation that
// fails its checks is dropped and counted; when recovery cut the log
// shorter than the files cover, they are rewritten at its end before the
// window serves, so no id ever maps to an offset that names another
// record, in that run or a later one. A seal that left out ids whose
// records were not durable in time keeps the covers file below them.
// Times read back from disk above the present (a lost clock file) are
// clamped to it.
package dedup
