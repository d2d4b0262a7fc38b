package segment

import (
	"fmt"
	"math"
	"time"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// appender is the single writer of a log. Its fields belong to whoever
// holds the log's write token (Log.writeMu): the appender goroutine while
// it drains or seals, or a caller of TryCommitBatch writing a lone batch
// inline (and open, before the appender goroutine starts).
//
// Each batch taken from the staging buffer is written with one write into
// the preallocated active segment, closed by a commit frame. The committer
// syncs while the appender already writes the next batch (pipelining).
type appender struct {
	log    *Log
	mode   IOMode // IOBuffered or IODirect, resolved
	active *segment
	write  vfs.File // write handle of the active segment
	pos    int64    // where the next frame goes
	size   int64    // preallocated size of the active segment
	next   uint64   // offset the next written record carries

	// Footer statistics of the active segment.
	count       uint64
	first       uint64
	minTS       int64
	maxTS       int64
	lastIndexed int64

	// zeroedTo is the end of the zeros written ahead of pos in the active
	// segment (zeroahead.go).
	zeroedTo int64

	tail    []byte // direct mode: bytes of the partial block before pos
	direct  []byte // direct mode: the log's aligned bounce buffer (staging.go)
	commit  [format.CommitFrameSize]byte
	entries []indexEntry
	// The subject summary of the active segment: the dictionary, and the
	// bitmaps of the records of the piece being written (summary.go).
	dict dictBuilder
	bits blockBits
	// spots of the active segment's finished blocks, and the records of
	// the piece being written, fed to it once written (spots.go P3).
	spots        spotBuilder
	pendingSpots []pendingSpot

	prepared  chan preparedFile
	ready     *preparedFile
	preparing bool
}

// preparedFile is a preallocated segment file waiting to become active.
type preparedFile struct {
	tmp  string
	file vfs.File
	size int64
	err  error
}

func (a *appender) resetActiveStats() {
	a.count, a.first = 0, a.next
	a.minTS, a.maxTS = math.MaxInt64, math.MinInt64
	a.lastIndexed = -indexInterval
	a.tail = a.tail[:0]
	a.zeroedTo = 0
	a.dict.reset()
	a.bits.clear()
	a.spots.reset()
	a.pendingSpots = a.pendingSpots[:0]
}

// newStagingLocked returns an empty staging batch on the log's free
// staging buffer. In direct mode the records start at the length the
// partial block will have once the batch being swapped out (writing) is
// written: the next write can then copy that block in front of the records
// and go out from the buffer as it is, instead of copying the whole batch
// into the bounce buffer. REQUIRES: l.mu held.
func (a *appender) newStagingLocked(writing *batch) *batch {
	at := 0
	if a.mode == IODirect && a.active != nil {
		at = int((a.pos + int64(len(writing.buf)) + format.CommitFrameSize) % vfs.DirectAlignment)
	}
	return a.log.newStagingLocked(at)
}

// recycle hands the staging buffer of a written batch back to the log for
// the next staging batch. A batch that grew past its buffer (one record
// larger than the staging size) leaves the larger heap buffer to the
// collector: the log keeps only its own buffers.
func (a *appender) recycle(b *batch) {
	l := a.log
	l.mu.Lock()
	l.giveBackLocked(b)
	l.mu.Unlock()
}

// run is the appender goroutine.
func (a *appender) run(stop <-chan struct{}) {
	l := a.log
	defer close(l.finished)
	defer func() {
		l.writeMu.Lock()
		a.discardPrepared()
		l.writeMu.Unlock()
	}()
	for {
		select {
		case <-l.wake:
			for a.drainOnce() {
			}
		case done := <-l.seals:
			for a.drainOnce() {
			}
			l.writeMu.Lock()
			err := a.sealActive()
			l.writeMu.Unlock()
			done <- err
		case <-stop:
			for a.drainOnce() {
			}
			return
		}
	}
}

// drainOnce takes the staging batch and writes it; false when there was
// nothing to take.
func (a *appender) drainOnce() bool {
	l := a.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	b := l.takeStagingLocked()
	l.mu.Unlock()
	if b == nil {
		return false
	}
	a.writeTaken(b)
	return true
}

// takeStagingLocked moves the staging batch to the in-flight list for the
// writer and starts a new one; nil when there is nothing to write.
// REQUIRES: l.mu and the write token held.
func (l *Log) takeStagingLocked() *batch {
	b := l.mu.staging
	l.mu.wakePending = false
	if b.count == 0 || l.mu.failure != nil {
		return nil
	}
	l.mu.staging = l.app.newStagingLocked(b)
	l.mu.inflight = append(l.mu.inflight, b)
	l.signalSpaceLocked()
	return b
}

// writeTaken writes a batch takeStagingLocked took and gives its staging
// buffer back. REQUIRES: the write token held.
func (a *appender) writeTaken(b *batch) {
	l := a.log
	started := time.Now()
	records, bytes := a.writeBatch(b)
	l.opts.Observer.ObserveAppend(time.Since(started), int(records), bytes)
	a.recycle(b)
}

// writeBatch writes b as one piece, or several when it crosses a roll,
// and returns the records and record bytes it wrote (fewer than b holds
// when a write failed). A roll never cuts an atomic batch: it comes
// before one that does not fit the active segment (atomic.go).
func (a *appender) writeBatch(b *batch) (records uint64, bytes int) {
	data, offset := b.buf, b.first
	for len(data) > 0 {
		need := int(frameLength(data))
		if b.atomic != nil {
			need = b.atomicNeed(len(b.buf)-len(data), need)
		}
		if a.active == nil || a.room() < need {
			if err := a.roll(need); err != nil {
				a.fail(b, offset, err)
				return offset - b.first, len(b.buf) - len(data)
			}
		}
		n, count := len(data), b.end()-offset
		if a.room() < len(data) {
			n, count = fitFrames(data, a.room())
			if b.atomic != nil {
				n, count = b.keepWhole(len(b.buf)-len(data), offset, n, count)
			}
		}
		if err := a.writePiece(b, data[:n], offset, count); err != nil {
			a.fail(b, offset, err)
			return offset - b.first, len(b.buf) - len(data)
		}
		offset += count
		data = data[n:]
	}
	return offset - b.first, len(b.buf)
}

// room is how many record bytes still fit in the active segment, keeping
// space for a commit frame and the footer.
func (a *appender) room() int {
	if a.active == nil {
		return 0
	}
	return int(a.size - a.pos - format.CommitFrameSize - format.FooterFrameSize)
}

func frameLength(data []byte) uint32 { return le32(data[4:8]) }

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func le64(b []byte) uint64 { return uint64(le32(b[0:4])) | uint64(le32(b[4:8]))<<32 }

// fitFrames returns the length and count of the whole frames at the start
// of data that fit in room bytes.
func fitFrames(data []byte, room int) (int, uint64) {
	n, count := 0, uint64(0)
	for n < len(data) {
		size := int(frameLength(data[n:]))
		if n+size > room {
			break
		}
		n += size
		count++
	}
	return n, count
}

// fail ends the write of b at offset: no space fails the rest and stays
// writable; any other error freezes the log.
func (a *appender) fail(b *batch, offset uint64, err error) {
	if vfs.IsNoSpace(err) {
		a.log.opts.Logger.Warn("append refused: no space", "log", a.log.id.String(), "error", err.Error())
		a.log.failFrom(b, offset, fmt.Errorf("%w: %w", ErrNoSpace, err))
		a.next = offset
		return
	}
	a.log.freeze(err)
}

// writePiece writes records [first, first+count) of b plus their commit
// frame with one write, then publishes them as written.
func (a *appender) writePiece(b *batch, piece []byte, first, count uint64) error {
	whole := len(piece) == len(b.buf)
	l := a.log
	commit := format.Commit{Token: a.active.header.Token, FirstOffset: first, LastOffset: first + count - 1,
		Count: uint32(count), BatchLength: uint32(len(piece)), BatchCRC: format.CRC(piece),
		DurableNext: l.committed.Load().next}
	minTS, maxTS := a.indexPiece(piece)
	var err error
	switch {
	case a.mode == IODirect && whole && a.fitsInPlace(b):
		err = a.writeDirectInPlace(b, commit)
	case a.mode == IODirect:
		err = a.writeDirect(piece, format.CommitFrameSize, func(dst []byte) []byte { return format.AppendCommit(dst, commit) })
	default:
		err = a.writeBuffered(piece, commit, whole)
	}
	if err != nil {
		a.entries = a.entries[:0]
		a.bits.clear()
		a.pendingSpots = a.pendingSpots[:0]
		return fmt.Errorf("writing %s at %d: %w", a.active.path, a.pos, err)
	}
	end := a.pos + int64(len(piece)) + format.CommitFrameSize
	a.recordWritten(first, count, minTS, maxTS, len(piece), end)
	l.publishWritten(mark{next: a.next, seg: a.active, pos: end})
	return nil
}

// recordWritten updates the appender and the active segment after a piece
// of pieceBytes holding records [first, first+count) and its commit frame
// were written, ending at end. The piece's index entries, subject bits
// and spots are the ones indexPiece gathered.
func (a *appender) recordWritten(first, count uint64, minTS, maxTS int64, pieceBytes int, end int64) {
	a.zeroAhead(end, pieceBytes)
	if a.count == 0 {
		a.first = first
	}
	a.count += count
	a.minTS, a.maxTS = min(a.minTS, minTS), max(a.maxTS, maxTS)
	a.spots.addPending(a.pendingSpots)
	a.pendingSpots = a.pendingSpots[:0]
	a.active.recordAppend(a.entries, &a.bits, a.dict.dict, a.spots.blockSpots, first+count, count, minTS, maxTS, end)
	a.entries = a.entries[:0]
	a.bits.clear()
	a.pos, a.next = end, first+count
	// Counted before they are published as written: a sync, and so the
	// completion of their ticket, can follow at once on another
	// goroutine, and whoever waited on it must find them in Counters.
	a.log.appendedRecords.Add(count)
	a.log.appendedBytes.Add(uint64(pieceBytes))
}

// indexPiece adds sparse index entries and subject bitmaps for the records
// of piece and returns their timestamp range.
func (a *appender) indexPiece(piece []byte) (int64, int64) {
	minTS, maxTS := int64(math.MaxInt64), int64(math.MinInt64)
	for at := 0; at < len(piece); {
		header := piece[at:]
		ts := int64(le64(header[16:24]))
		newEntry := a.pos+int64(at)-a.lastIndexed >= indexInterval
		if newEntry {
			a.entries = append(a.entries, indexEntry{Offset: le64(header[8:16]),
				Position: a.pos + int64(at), PriorMaxTimestamp: a.maxTS})
			a.lastIndexed = a.pos + int64(at)
		}
		id := a.dict.id(recordSubjectBody(header))
		a.bits.add(idMask(id), newEntry)
		a.pendingSpots = append(a.pendingSpots, pendingSpot{pos: a.pos + int64(at), id: id, newEntry: newEntry})
		minTS, maxTS = min(minTS, ts), max(maxTS, ts)
		// The prior maximum of later entries includes this record.
		a.maxTS = max(a.maxTS, ts)
		at += int(frameLength(header))
	}
	return minTS, maxTS
}

// writeBuffered writes piece and its commit frame with one write when the
// staging buffer has room behind the records (it always has, unless a
// record larger than the buffer reallocated it, or the batch is split by
// a roll); otherwise with two, rather than copying the piece into another
// buffer. A crash between the two leaves records without a commit frame:
// a torn tail, which recovery truncates, and nothing was acknowledged.
func (a *appender) writeBuffered(piece []byte, commit format.Commit, whole bool) error {
	if whole && cap(piece)-len(piece) >= format.CommitFrameSize {
		_, err := a.write.WriteAt(format.AppendCommit(piece, commit), a.pos)
		return err
	}
	if _, err := a.write.WriteAt(piece, a.pos); err != nil {
		return err
	}
	frame := format.AppendCommit(a.commit[:0], commit)
	_, err := a.write.WriteAt(frame, a.pos+int64(len(piece)))
	return err
}

// fitsInPlace reports whether b can be written from its own slab: it was
// never reallocated, the partial block is as long as newStaging predicted
// (no roll came between), and the slab has room for the commit frame and
// the padding.
func (a *appender) fitsInPlace(b *batch) bool {
	if b.slab == nil || len(b.buf) == 0 || &b.buf[0] != &b.slab[b.slabAt] || b.slabAt != len(a.tail) {
		return false
	}
	return b.slabAt+len(b.buf)+format.CommitFrameSize+vfs.DirectAlignment <= len(b.slab)
}

// writeDirectInPlace is writeDirect without the copy: the partial block is
// copied in front of the records, the commit frame and the padding after
// them, and the slab goes out from its aligned start.
func (a *appender) writeDirectInPlace(b *batch, commit format.Commit) error {
	const align = vfs.DirectAlignment
	copy(b.slab[:b.slabAt], a.tail)
	end := b.slabAt + len(b.buf)
	format.AppendCommit(b.slab[:end:end+format.CommitFrameSize], commit)
	total := end + format.CommitFrameSize
	padded := (total + align - 1) &^ (align - 1)
	clear(b.slab[total:padded])
	if _, err := a.write.WriteAt(b.slab[:padded], a.pos&^(align-1)); err != nil {
		return err
	}
	keep := total % align
	a.tail = append(a.tail[:0], b.slab[total-keep:total]...)
	return nil
}

// writeDirect writes piece plus the frameLen-byte frame appendFrame adds, for
// O_DIRECT: the write starts at the block holding pos (rewriting the bytes
// already there, identical), and is padded with zeros to a whole block.
// Rewriting a block that holds synced bytes with the same bytes is safe on
// devices that do not tear a sector (the powersafe-overwrite assumption).
func (a *appender) writeDirect(piece []byte, frameLen int, appendFrame func([]byte) []byte) error {
	const align = vfs.DirectAlignment
	blockStart := a.pos &^ (align - 1)
	prefix := len(a.tail)
	total := prefix + len(piece) + frameLen
	padded := (total + align - 1) &^ (align - 1)
	buf := a.direct
	if cap(buf) < padded {
		// Only a record larger than the staging size gets here; the
		// broker admitted its bytes through the large-record pool, and
		// the collector takes this buffer back after the write.
		buf = vfs.AlignedBuffer(padded)
	}
	buf = buf[:prefix]
	copy(buf, a.tail)
	buf = append(buf, piece...)
	buf = appendFrame(buf)
	buf = buf[:padded]
	clear(buf[total:])
	if _, err := a.write.WriteAt(buf, blockStart); err != nil {
		return err
	}
	keep := total % align
	a.tail = append(a.tail[:0], buf[total-keep:total]...)
	return nil
}
