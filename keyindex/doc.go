// Package keyindex owns a partition log's subject index: for every subject
// the log has stored, the offset of its last record. The broker asks it
// for "expect last subject offset N" appends (Last, under the partition's
// append lock, against every record assigned so far, synced or not) and
// tells it about every record with a subject (Put). It is derived state:
// the log is the authority, and the index is rebuilt from it.
//
// # Shape
//
// Subjects are keyed by a 128-bit xxh3 fingerprint under a random seed
// kept in the file: the low half picks the home page, the high half is
// compared on a hit. The index stores no subject bytes and reads no record
// back to verify a hit: two subjects of one log share a fingerprint with
// probability about n²/2¹²⁹ (below 10⁻²⁵ for ten million subjects), far
// below the rate of undetected storage errors, and a verifying read would
// cost a pread per check on the append path and be impossible once
// retention has removed the record. The random seed keeps a publisher
// from choosing subjects that collide.
//
// Updates go to an in-memory overlay of two generations: the active one
// takes Puts; when it fills (Options.Overlay entries) or a flush comes, it
// is frozen and a fresh one takes over. A frozen generation is written to
// the table only once every offset in it is durable (Durable, fed from
// the log's committed mark), so the table never names a record that a
// torn tail can take away. Lookups read the active generation, the frozen
// one, then the table.
//
// The table (keyidx.tbl; format.go) is an open-addressing hash table of
// 4 KiB pages of 127 slots, each page kept in two copies with a
// generation and a CRC32C, read with pread through the page cache (never
// held in the heap), behind a header kept in two copies that records
// covers_up_to. It grows online by doubling, up to Options.MaxCapacity:
// a new file is built beside it, synced and renamed over it.
//
// When both generations are full (the frozen one still waiting for
// durability or for its write), Put leaves the update out rather than
// block or grow: the subject's bit is set in a fixed bitmap, Last answers
// ErrFull (retryable) for subjects with that bit, and the next flush reads
// the left-out range back from the log (Options.ReadLog) and clears it.
// At MaxCapacity new subjects are not indexed and Last answers ErrFull for
// every subject the table does not hold: never a wrong "none".
//
// # Memory (I8)
//
// Per index, at most (MemoryBound)
//
//	2 × Overlay × 110 B   two generations in Go maps (measured: 53 B an
//	                      entry live, up to twice that just after a map
//	                      doubles)
//	+ Overlay × 32 B      the flusher's merge buffer
//	+ DroppedBits / 8     the bitmap of left-out subjects
//	+ 40 KiB              page buffers: lookups, the writer, and a growth
//	                      (a page pair and four pages of entries)
//
// With the defaults (Overlay 4096, DroppedBits 65 536) that is under
// 1.1 MiB, typically about 600 KiB when full. The maps and the buffer
// grow only as subjects arrive, so an idle log costs a few hundred bytes;
// nothing grows with the number of subjects, records or backlog. The
// table itself lives in the page cache, which the kernel may reclaim:
// 8 KiB + 8 KiB per page, a page per 95 subjects (about 5.4 MiB for the
// default 65 536, 86 MiB at a maximum of 1 048 576).
//
// # Invariants
//
//   - K1 the table and its header never hold an offset at or past the
//     durable end the index was told of, so after any crash every offset
//     they name is in the log (or was, before retention).
//   - K2 covers_up_to = C promises every record below C is reflected in
//     the table; the header is written (and synced) only after the pages
//     it vouches for are synced.
//   - K3 a page write goes to the copy that is not current; a torn write
//     leaves the current copy, a CRC tells them apart.
//   - K4 merging keeps the larger offset, so replaying any record twice,
//     or a page newer than its header, changes nothing: recovery = the
//     table + replay of [covers_up_to, durable end) = the durable log's
//     answer.
//   - K5 Last never answers "none" or an older offset for a subject whose
//     update it left out or could not place: it answers ErrFull.
//
// A missing, damaged or too-new file, one covering past the log's end (a
// log truncated by recovery or restored from a backup), or a full one
// whose maximum was raised, is replaced by an empty table and rebuilt
// from the log's retained records; a rebuild cannot know subjects whose
// every record retention had already removed.
//
// The two page copies guard against torn writes, not against media decay:
// a copy that fails its CRC is taken for a torn write and the other copy
// used. If the newest copy of a page decays after its header was written,
// that page answers its previous generation's offsets (older, never a
// record the log did not hold). Deleting the keyindex directory makes the
// next open rebuild it from the log.
package keyindex
