// Package segment is IronBus's durable log engine. It owns segment files,
// the appender and the committer, the reader with its sparse offset and
// time index, recovery with its loss report and quarantine, and the
// retention primitive. All file I/O goes through package segment/vfs; the
// byte codecs live in package segment/format (storage framing) and package
// record (the record frame and body, shared with the client).
//
// # Data path
//
//	Log.Append ──▶ staging batch (producer frames the body and its CRC32C;
//	                 the broker adds offset, timestamp, header CRC)
//	appender goroutine (one per log): takes the whole staging batch,
//	    writes it with ONE write into the preallocated active segment,
//	    closed by a commit frame
//	committer (one goroutine per data directory): each cycle, one
//	    fdatasync per dirty log covers everything written before it;
//	    the appender writes the next batch meanwhile (pipelining)
//	committed mark advances ─▶ Tickets complete ─▶ readers may see it
//
// A batch is written as one piece closed by one commit frame unless the
// active segment fills: the roll then cuts it, except that it never cuts
// an atomic batch (Log.AppendAtomic, atomic.go) but comes before it. So an
// atomic batch always lies in one segment under one commit frame, and the
// committed mark, set only at the end of a piece, never stands inside it.
//
// A lone batch skips both goroutines: TryCommitBatch on an idle log
// writes and fdatasyncs it on the caller's goroutine, holding the log's
// write token (the appender's state belongs to whoever holds it), and the
// ticket is done when the call returns.
//
// Under a commit linger (Options.CommitLinger, linger.go) the committer
// may hold a busy log's fdatasync for up to the linger, until as many
// records wait as its last sync covered, so one page rewrite covers the
// records of several producers; an idle log is synced at once, inline as
// above.
//
// A Ticket completes only after the fdatasync that covers its records
// (DurabilitySync, the default). A failed fdatasync or write freezes the
// log read-only for good; it is never retried. ENOSPC fails the append with
// a typed error and leaves the log writable.
//
// # On-disk format (version 1)
//
// Little-endian, fixed-width integers. A data directory (locked with flock
// on the directory itself: exclusive for the broker, shared for tools):
//
//	<data>/FORMAT                 {"format":"ironbus-data","version":1}
//	<data>/recovery-report.json   what the last recovery found, per log
//	<data>/quarantine/<stream>/<partition>/...   copies of damaged bytes
//	<data>/streams/<stream>/<partition>/<20-digit base offset>.seg
//	<data>/streams/<stream>/<partition>/clean-stop.prepare   clean-stop marker
//
// A segment file starts with a 4096-byte header block (64 bytes used, the
// rest zero, so frames start block-aligned):
//
//	0       8      10      12      16              24      28      32
//	+-------+-------+-------+-------+---------------+-------+-------+
//	| magic "IRONBSEG"      |version| flags |hdr len|stream hash    |
//	+-------+-------+-------+-------+---------------+-------+-------+
//	 partition u32 @24 · reserved @28 · base offset u64 @32 ·
//	 created unix ns @40 (data only) · token u64 @48 (random) ·
//	 reserved @56 · CRC32C of [0,60) @60
//
// Frames follow, each starting with the same 8-byte prefix: two magic
// bytes naming the kind, a version byte, a flags byte, and the frame
// length (u32). Two zero bytes mean "unwritten": segments are preallocated
// with zeros, so the end of the data reads as the end.
//
// Record frame ("IR"), 36-byte header, then the body:
//
//	0   2   3   4       8               16              24      28      32      36
//	+---+---+---+-------+---------------+---------------+-------+-------+-------+
//	|"IR"|ver|flg|length |offset u64     |timestamp ns   |body   |body   |header |
//	|   |   |   |u32    |               |(broker wall)  |length |CRC32C |CRC32C |
//	+---+---+---+-------+---------------+---------------+-------+-------+-------+
//	body (body length bytes, stored exactly as the producer framed it)
//	[xxh3-64 of the body: 8 bytes, only when the body is 64 KiB or more]
//	length again (u32): trailing sentinel
//
// The header CRC covers bytes [0,32), so a torn length is caught before
// the body is read; the body CRC is the producer's, checked end to end; a
// body longer than the configured maximum (16 MiB) is refused before
// anything is allocated for it.
//
// Record body (version 1), framed by the producer:
//
//	0      1      2       4       6       8          12          16          20
//	+------+------+-------+-------+-------+-----------+-----------+-----------+
//	|ver   |codec |flags  |key len|subject|headers len|payload len|raw payload|
//	|      |      |       |u16    |len u16|u32        |u32 stored |len u32    |
//	+------+------+-------+-------+-------+-----------+-----------+-----------+
//	[producer id u64, sequence u64 when flags bit 0]
//	key · subject · headers ([u16 name len][name][u32 value len][value]…) · payload
//
// With Options.Encryption the body is stored as an envelope (frame
// version 2, flags bit 1; record.AppendEncryptedFrame): key id, salt,
// AES-256-GCM of the producer's CRC and body, tag. Body length and body
// CRC describe the envelope, so every rule below applies unchanged;
// readers open it on the way out (encryption.go).
//
// Commit frame ("IC", 80 bytes) closes each batch written with one write:
//
//	token u64 @8 (the segment's) · first offset @16 · last offset @24 ·
//	record count u32 @32 · batch length u32 @36 (bytes of the batch's
//	record frames) · batch CRC32C @40 · reserved @44 · durable-next u64
//	@48 (every offset below it was durable when this batch was written: a
//	hint for loss reports) · replication term @56 · replication index @64
//	(the Raft entry's, in a replicated log; zero otherwise) · reserved @72 ·
//	CRC32C of [0,76) @76
//
// Skip frame ("IS", 48-byte header) is written by recovery over damaged
// bytes after copying them to quarantine; its length covers the damage:
//
//	token @8 · first lost offset @16 · lost count @24 · reason code u32 @32
//	· reserved @36 · CRC32C of [0,44) @44
//
// Control frame ("IK", 32-byte header, then the payload) is a replicated
// log's entry that owns no offsets; it stands alone in its batch, closed by
// a commit frame of record count zero (both its offsets the next record's):
//
//	token @8 · entry type u8 @16 · reserved @17 · payload length u32 @20 ·
//	payload CRC32C @24 · CRC32C of [0,28) @28 · payload
//
// Footer frame ("IF", 80 bytes) seals a segment; the file ends right after
// it:
//
//	token @8 · base offset @16 · next offset @24 (one past the last offset
//	covered) · record count @32 · data end (this frame's position) @40 ·
//	min timestamp @48 · max timestamp @56 · reserved @64 · CRC32C of
//	[0,76) @76
//
// # Invariants
//
//   - I1 durable prefix: recovery keeps a batch only when its commit frame
//     verifies (token, offsets, count, batch CRC); it never resynchronises
//     on anything weaker than an intact commit frame carrying the
//     segment's random token.
//   - I2 ack ⇒ durable: Tickets complete after the covering fdatasync; a
//     segment is sealed only after its records are synced, so a durable
//     footer always vouches for durable records; recovery syncs what it
//     recovered before serving it.
//   - I3 bounded, reported loss: damage costs the batch it hits (a segment
//     at worst, for an unreadable header); loss above max(1 % of the log,
//     one segment) per recovery freezes the log read-only, disk untouched.
//   - I4 offsets are monotonic and never reused once written behind a
//     commit frame; I5 one appender goroutine writes each log; I6 wall time
//     is data only.
//   - I7 until a segment is sealed, the appender writes nothing past its
//     last commit frame but zeros (direct I/O's padding, the zeros ahead
//     of small writes in zeroahead.go), so the bytes a recovery scans past
//     the tail read as an unwritten extent does.
//
// # Clean restarts
//
// A clean close leaves clean-stop.prepare beside a log's segments: the
// active segment's end, statistics, index and subject summary, with a
// CRC32C (cleanstop.go, docs/FORMAT.md). A writable open installs it
// instead of scanning the segment when it matches.
//
//   - C1 the marker is written only when the written end is the durable
//     end (everything synced and committed, nothing staged or in flight,
//     not frozen, no skip frame in the active segment), and is itself
//     synced and renamed into place, the directory synced.
//   - C2 a writable open removes the marker, and syncs the directory,
//     before recovery or the appender writes anything (a log that opens
//     frozen keeps it, untouched): a marker present at open proves
//     nothing was written after it.
//   - C3 it is trusted only when it matches the last, unsealed segment
//     (identity, token, file size), a commit frame of that segment with the
//     marker's last offset ends at its data end and zeros follow; a newer
//     version is ErrTooNew and never trusted. Its names end in ".prepare",
//     which binaries predating it delete at open before they append.
//   - C4 what a marker vouches for is checked as a sealed segment is: in
//     full, on the segment's first read (damage reported as a runtime
//     loss event, quarantined and covered with a skip frame under the
//     write token); a segment with holes gets no marker, so the next open
//     scans it.
//
// # Filtered reading and the subject summary
//
// Reader.SetFilter(Matcher) makes a reader return only records whose
// subject (read from the record body without a copy) matches; each stretch
// of other records comes back as one gap with reason GapFiltered, never
// merged with a gap of another reason, and a stretch reaching the
// committed end as a gap up to it, so a position always advances and
// every offset is accounted for once. Beside the sparse index, every
// segment keeps a subject summary: a dictionary of its first 127 distinct
// subjects (at most 4 KiB of them) and, per index block (64 KiB), a
// 128-bit mask of the ids of the subjects in the block plus an "unknown
// subject" bit. A filtered reader asks its Matcher once per dictionary
// subject and skips, unread, every block whose mask has no matching id,
// no unknown bit and no hole. The summary is built where the index is
// (appender, recovery scan, first read, idle rebuild), dropped with it,
// and written only into the clean-stop marker of the active segment.
//
//   - S1 a segment has one mask per index entry.
//   - S2 a mask may claim subjects its block does not hold, never the
//     reverse: every record's subject id, or the unknown bit, is set.
//   - S3 subject ids only grow while the index is built, so a reader's
//     answers per id stay right for as long as it holds the segment.
//
// A subject in every block but rare in each (1 record in 100, interleaved)
// defeats the masks; per block the summary also lists the positions of the
// subjects met at most 8 times there (spots: at most 16 per block, 64 KiB
// per segment, all or nothing per subject). In a whole block where every
// matching subject is listed, the reader reads only the listed records and
// reports the rest as filtered.
//
//   - P1 a block past the last one finished (the active segment's last)
//     lists no spots; P2 a block listing a spot of a subject lists every
//     record of it there; P3 spots are fed only for written or
//     commit-frame-accepted records, in index order.
//
// # Replicated logs
//
// A RaftLog (raftlog.go) makes a log its replica's Raft log: one Raft entry
// is one batch, a data entry the leader's record frames at the leader's
// offsets, any other entry a control frame, each closed by a commit frame
// with the entry's term and index. The replica alone writes it: producers'
// appends and offset retention are refused, from the open of a log whose
// directory holds the replica's state on. It cuts a conflicting suffix
// crash-safely, resets
// to a snapshot's offset, and drops whole segments by index for retention.
// Its invariants (R1-R5) are in raftlog.go; its state file in
// docs/FORMAT.md.
//
// The format is specified in docs/FORMAT.md and recovery in
// docs/RECOVERY.md; the constants in packages format and record are the
// format.
package segment
