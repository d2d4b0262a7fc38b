package segment

import (
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Zeros written ahead of a log's small writes.
//
// A segment is preallocated with fallocate, which leaves its blocks
// "unwritten" on ext4 (and XFS): the first write into a block makes the
// next fdatasync convert that extent, a journal commit on top of the data
// flush. A log that syncs a few kilobytes at a time crosses into a new
// block at nearly every sync and pays that commit each time: a 3.5 KB
// write + fdatasync took 207 µs against 132 µs with the blocks already
// written, on the reference machine (docs/BENCHMARKS.md). So when the
// appender has written a piece no larger than a block, it keeps
// zeroAheadWindow of zeros written past it: the blocks ahead are converted
// together by the sync that first covers them, once per window instead of
// once per block.
//
// What it costs: each block ahead is written once more, as zeros, but a
// conversion it avoids is itself a journal write; measured at the device
// (/sys/block/*/stat), writes per payload byte stayed level for syncs of up
// to 3.5 KB (3.2 against 3.3). Larger pieces convert their blocks in one
// commit anyway and are left alone. The zeros are written a block per
// call: written as one large write, they would make the page cache use
// large folios there, and every later small write would then dirty, and
// every sync write back, a whole folio (five times the device writes,
// measured). Direct I/O converts on the same terms and writes its zeros
// as one large write from the log's bounce buffer: it has no page cache,
// so no folio to fear. The zeros lie past every record and commit frame
// (invariant I7), where recovery reads zeros from an unwritten extent
// anyway, so a crash at any point leaves the same log. Segments that were
// zero-filled (Preallocation zero, or fallocate unsupported) get none.
const (
	zeroAheadWindow   = 64 << 10
	zeroAheadMaxPiece = vfs.DirectAlignment
)

// zeroBlock is never written to: its page stays the kernel's shared zero page.
var zeroBlock [vfs.DirectAlignment]byte

// zeroAhead writes zeros after end, the end of a piece of pieceBytes just
// written, when that piece was small and fewer than half a window of zeros
// lie ahead of it. REQUIRES: the write token.
//
// writeZeros (roll.go), which zero-fills whole segments, is not used: it
// allocates a megabyte per call and writes it in one piece, which is the
// large folio this avoids in buffered mode.
func (a *appender) zeroAhead(end int64, pieceBytes int) {
	if a.log.opts.Preallocation != PreallocateAllocate || a.log.zeroFilled.Load() ||
		pieceBytes > zeroAheadMaxPiece || end+zeroAheadWindow/2 <= a.zeroedTo {
		return
	}
	const block = int64(len(zeroBlock))
	from := (max(a.zeroedTo, end) + block - 1) &^ (block - 1)
	to := min(from+zeroAheadWindow, (a.size-format.FooterFrameSize)&^(block-1))
	// Buffered: a block per call. Direct: as few writes as the log's
	// bounce buffer (free between writes) holds, each one a device write
	// the appender waits for.
	zeros := zeroBlock[:]
	if a.mode == IODirect {
		zeros = a.direct[:min(int64(len(a.direct))&^(block-1), max(to-from, 0))]
		clear(zeros)
	}
	if to <= from || len(zeros) == 0 {
		return
	}
	for at := from; at < to; at += int64(len(zeros)) {
		if _, err := a.write.WriteAt(zeros[:min(int64(len(zeros)), to-at)], at); err != nil {
			// Only an optimization: the records before it are written,
			// and a failing device shows in the next fdatasync. Stop
			// trying in this segment.
			a.zeroedTo = a.size
			return
		}
	}
	a.zeroedTo = to
}
