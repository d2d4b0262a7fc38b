package segment

import (
	"context"
	"fmt"

	"github.com/ironbus/ironbus/segment/format"
)

// Atomic batches. The records of an atomic batch become visible together
// or not at all, across a crash too, and no new structure on disk is
// needed for it: a commit frame already vouches for every record of its
// piece at once, so it is enough that the appender never cuts an atomic
// batch into two pieces.
//
//   - Staging: the batch is copied into the staging batch under one lock,
//     so its frames are contiguous there and its offsets consecutive;
//     other callers' records may come before and after it.
//   - Writing: a piece ends at a roll, and a roll comes before an atomic
//     batch that does not fit the active segment's room, never inside it
//     (writeBatch). So the whole batch lands in one segment under one
//     commit frame. The limit, MaxAtomicBytes, makes sure an empty
//     segment of the configured size always holds it, and that it goes
//     into the staging buffer without reallocating it.
//   - Visibility: the committed mark is only ever set to the end of a
//     written piece (publishWritten, a seal), so it never stands inside
//     an atomic batch; readers stop at the mark.
//   - Recovery: the scanner trusts no record before the commit frame
//     closing its piece verifies, and truncates a torn tail at the last
//     intact commit frame, so a batch is kept whole or dropped whole. A
//     failed write (ENOSPC) fails a piece from its first record on.
//
// A batch of one record is atomic by construction (a frame is never cut)
// and is staged as any other.

// atomicSpan is an atomic batch of several records inside a staging
// batch: its record frames are buf[start:end), the first with offset
// first.
type atomicSpan struct {
	start, end int
	first      uint64
}

// MaxAtomicBytes is the most record-frame bytes an atomic batch may hold
// under opts (record.FrameSize of each body; record.EncryptedFrameSize
// under encryption): the staging bytes, or what an empty segment holds
// beside its commit frame and footer when that is less. With the
// defaults it is 4 MiB; with the smallest segment (64 KiB), 61,280 bytes.
func MaxAtomicBytes(opts Options) int {
	staging := int64(opts.StagingBytes)
	if staging <= 0 {
		staging = DefaultStagingBytes
	}
	size := opts.SegmentSize
	if size <= 0 {
		size = DefaultSegmentSize
	}
	room := size - format.SegmentDataStart - format.CommitFrameSize - format.FooterFrameSize
	return int(max(0, min(staging, room)))
}

// checkAtomic refuses an atomic batch the log cannot write as one piece.
func (l *Log) checkAtomic(records, frameBytes int) error {
	if limit := MaxAtomicBytes(*l.opts); frameBytes > limit {
		return fmt.Errorf("%w: %d records in %d frame bytes (at most %d)", ErrBatchTooLarge, records, frameBytes, limit)
	}
	return nil
}

// AppendAtomic is AppendBatch for an atomic batch: every record of it
// becomes visible to readers (is committed) together with the others, or
// none does, and after a crash the log holds all of them or none. Its
// frames may total at most MaxAtomicBytes (ErrBatchTooLarge). It waits
// while the staging buffer has no room for the whole batch.
func (l *Log) AppendAtomic(ctx context.Context, bodies [][]byte, crcs []uint32) (Ticket, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, fmt.Errorf("segment: AppendAtomic needs one CRC per body and at least one body")
	}
	return l.append(ctx, bodies, crcs, true, true)
}

// TryAppendAtomic is AppendAtomic that returns ErrFull instead of
// blocking; RoomFor says when the batch's frame bytes fit.
func (l *Log) TryAppendAtomic(bodies [][]byte, crcs []uint32) (Ticket, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, fmt.Errorf("segment: TryAppendAtomic needs one CRC per body and at least one body")
	}
	return l.append(context.Background(), bodies, crcs, false, true)
}

// TryCommitAtomic is TryCommitBatch for an atomic batch: written and
// synced on the caller's goroutine when the log is idle, staged as by
// TryAppendAtomic otherwise.
func (l *Log) TryCommitAtomic(bodies [][]byte, crcs []uint32) (Ticket, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, fmt.Errorf("segment: TryCommitAtomic needs one CRC per body and at least one body")
	}
	return l.tryCommit(bodies, crcs, true)
}

// atomicNeed is the room in the active segment the piece of b starting
// at byte at needs: all of the atomic batch that starts there, else its
// first frame (frame bytes).
func (b *batch) atomicNeed(at, frame int) int {
	for _, span := range b.atomic {
		if span.start == at {
			return span.end - span.start
		}
		if span.start > at {
			break
		}
	}
	return frame
}

// keepWhole shortens the piece of b that starts at byte at (offset
// offset) and would take n bytes (count records) when it would end inside
// an atomic batch: the piece then ends right before the batch, which the
// next piece starts. An atomic batch that starts the piece always fits it
// whole (atomicNeed made the room), so the piece never ends up empty.
func (b *batch) keepWhole(at int, offset uint64, n int, count uint64) (int, uint64) {
	cut := at + n
	for _, span := range b.atomic {
		if span.start >= cut {
			break
		}
		if span.start > at && span.end > cut {
			return span.start - at, span.first - offset
		}
	}
	return n, count
}
