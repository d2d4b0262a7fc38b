package segment

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// ErrBadEntry: an entry to append is malformed: a record frame fails its
// checks, or its count disagrees with its frames.
var ErrBadEntry = errors.New("segment: malformed entry")

// Append writes entries after the last one (R2): a data entry's frames as
// they are, closed by a commit frame with its term and index; any other
// entry as a control frame. Nothing is synced. A failed write freezes the
// log, except for a full device (ErrNoSpace), which leaves it as it was.
func (r *RaftLog) Append(entries []RaftEntry) error {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	defer r.noteActive()
	for i := range entries {
		if err := r.appendOne(&entries[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *RaftLog) appendOne(e *RaftEntry) error {
	l, a := r.log, &r.log.app
	if err := l.Halted(); err != nil {
		return err
	}
	if e.Index != r.last+1 {
		return fmt.Errorf("%w: entry %d after entry %d", ErrEntryMismatch, e.Index, r.last)
	}
	need, count, err := r.measure(e)
	if err != nil {
		return err
	}
	if err := r.makeRoom(need); err != nil {
		return err
	}
	seg, first, start := a.active, a.next, a.pos
	piece := e.Data
	if e.Control {
		r.buf = format.AppendControl(r.buf[:0], format.Control{Token: seg.header.Token, Type: e.Type, Payload: e.Data})
		piece = r.buf
	}
	commit := format.Commit{Token: seg.header.Token, FirstOffset: first, LastOffset: first, Count: uint32(count),
		BatchLength: uint32(len(piece)), BatchCRC: format.CRC(piece), DurableNext: l.committed.Load().next,
		Term: e.Term, Index: e.Index}
	minTS, maxTS := int64(math.MaxInt64), int64(math.MinInt64)
	if count > 0 {
		commit.LastOffset = first + count - 1
		minTS, maxTS = a.indexPiece(piece)
	}
	err = r.writeEntry(piece, commit)
	if err != nil {
		a.entries = a.entries[:0]
		a.bits.clear()
		a.pendingSpots = a.pendingSpots[:0]
		return r.failWrite(fmt.Errorf("writing %s at %d: %w", seg.path, a.pos, err))
	}
	end := a.pos + int64(len(piece)) + format.CommitFrameSize
	a.recordWritten(first, count, minTS, maxTS, len(piece), end)
	l.mu.Lock()
	l.mu.written = mark{next: a.next, seg: seg, pos: end}
	l.mu.nextOffset = a.next
	l.mu.Unlock()
	r.spans[len(r.spans)-1].add(e.Index, e.Term, start)
	r.last = e.Index
	r.noteWritten(mark{next: a.next, seg: seg, pos: end})
	if cap(r.buf) > maxKeptBuffer {
		r.buf = nil // a large entry's buffer is not kept (R5)
	}
	return nil
}

// maxKeptBuffer bounds the buffers a RaftLog keeps between calls (R5).
const maxKeptBuffer = 64 << 10

// writeEntry writes an entry's frames and its commit frame at the
// appender's position: with one write when they fit the kept buffer (or
// through the direct I/O bounce buffer), else with two rather than copy a
// large entry. A crash between the two leaves frames without a commit
// frame: a torn tail, which recovery drops. REQUIRES: the write token.
func (r *RaftLog) writeEntry(piece []byte, commit format.Commit) error {
	a := &r.log.app
	switch {
	case a.mode == IODirect:
		return a.writeDirect(piece, format.CommitFrameSize, func(dst []byte) []byte { return format.AppendCommit(dst, commit) })
	case len(piece)+format.CommitFrameSize <= maxKeptBuffer:
		if len(r.buf) == 0 || &piece[0] != &r.buf[0] {
			r.buf = append(r.buf[:0], piece...)
		}
		r.buf = format.AppendCommit(r.buf, commit)
		_, err := a.write.WriteAt(r.buf, a.pos)
		return err
	}
	if _, err := a.write.WriteAt(piece, a.pos); err != nil {
		return err
	}
	_, err := a.write.WriteAt(format.AppendCommit(a.commit[:0], commit), a.pos+int64(len(piece)))
	return err
}

// measure checks an entry and returns the bytes its frames take and the
// offsets they own.
func (r *RaftLog) measure(e *RaftEntry) (int, uint64, error) {
	l := r.log
	if e.Control {
		if len(e.Data) > int(l.opts.MaxRecordBytes) {
			return 0, 0, fmt.Errorf("%w: control payload of %d bytes (maximum %d)", ErrRecordTooLarge, len(e.Data), l.opts.MaxRecordBytes)
		}
		return format.ControlFrameSize(len(e.Data)), 0, nil
	}
	if next := l.app.next; e.FirstOffset != next {
		return 0, 0, fmt.Errorf("%w: entry %d starts at offset %d, the log's next offset is %d", ErrEntryMismatch, e.Index, e.FirstOffset, next)
	}
	expect := e.FirstOffset
	for data := e.Data; len(data) > 0; {
		h, err := record.ParseFrameHeader(data, l.opts.MaxRecordBytes)
		if err == nil && int(h.FrameLength) > len(data) {
			err = fmt.Errorf("frame of %d bytes, %d left", h.FrameLength, len(data))
		}
		if err == nil {
			_, err = record.VerifyFrame(data[:h.FrameLength], h)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%w: entry %d, offset %d: %w", ErrBadEntry, e.Index, expect, err)
		}
		if h.Offset != expect {
			return 0, 0, fmt.Errorf("%w: entry %d carries offset %d where %d belongs", ErrEntryMismatch, e.Index, h.Offset, expect)
		}
		expect++
		data = data[h.FrameLength:]
	}
	if count := expect - e.FirstOffset; count == 0 || count != uint64(e.Count) {
		return 0, 0, fmt.Errorf("%w: entry %d says %d records, holds %d", ErrBadEntry, e.Index, e.Count, count)
	}
	return len(e.Data), uint64(e.Count), nil
}

// makeRoom makes the active segment fit need more bytes of frames: a roll,
// or growth when the active segment owns no offsets (R4).
func (r *RaftLog) makeRoom(need int) error {
	a := &r.log.app
	if a.active != nil && a.room() >= need {
		return nil
	}
	if a.active != nil && a.next == a.active.base && a.pos > format.SegmentDataStart {
		size := max(a.segmentSizeFor(int(a.pos-format.SegmentDataStart)+need), a.size+a.log.opts.SegmentSize)
		if err := a.grow(size); err != nil {
			return r.failWrite(fmt.Errorf("growing %s: %w", a.active.path, err))
		}
		return nil
	}
	previous := a.active
	if err := a.roll(need); err != nil {
		return r.failWrite(err)
	}
	if a.active != previous {
		if n := len(r.spans); n > 0 && r.spans[n-1].seg == previous {
			r.keepPoints(r.spans[n-1])
		}
		r.spans = append(r.spans, &entrySpan{seg: a.active, first: r.last + 1, last: r.last, termsKnown: true})
	}
	return nil
}

// failWrite turns a failed write into the append's error: a full device
// leaves the log as it was, anything else freezes it.
func (r *RaftLog) failWrite(err error) error {
	if vfs.IsNoSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	r.log.freeze(err)
	return r.log.Err()
}

// Sync makes every entry written so far durable (one fdatasync of the
// active segment: a sealed segment was synced when it was sealed) and
// publishes them as committed for readers. A failure freezes the log.
func (r *RaftLog) Sync() error {
	l, a := r.log, &r.log.app
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Halted(); err != nil {
		return err
	}
	l.mu.Lock()
	written := l.mu.written
	l.mu.Unlock()
	if a.write != nil && written.seg == a.active {
		if err := a.write.SyncData(); err != nil {
			l.freeze(fmt.Errorf("fdatasync of %s failed, acknowledged nothing after it: %w", a.active.path, err))
			return l.Err()
		}
	}
	if r.gated {
		r.noteSynced()
		return nil
	}
	l.publishSynced(written)
	return nil
}

// publishSynced publishes m, which a sync covers, as the committed mark
// when it lies after it: a control entry moves the position, not the
// offset.
func (l *Log) publishSynced(m mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.failure != nil || m.seg == nil || !markAfter(&m, l.committed.Load()) {
		return
	}
	l.committed.Store(&m)
	l.syncedNext.Store(m.next)
	l.signalDataLocked()
}

// markAfter reports whether m lies after other in the log. Segments
// follow each other in base order (R4).
func markAfter(m, other *mark) bool {
	switch {
	case m.next != other.next:
		return m.next > other.next
	case m.seg == nil:
		return false
	case other.seg == nil:
		return true
	case m.seg != other.seg:
		return m.seg.base > other.seg.base
	}
	return m.pos > other.pos
}

// rollBack moves the log's written end, next offset and, when it lay
// after it, committed mark back to m, the end of what a truncation keeps.
// REQUIRES: the write token held.
func (l *Log) rollBack(m mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.written = m
	l.mu.nextOffset = m.next
	l.mu.sealing = nil // offsets from m.next on are sealed again: under a new salt
	if committed := l.committed.Load(); m.seg == nil || markAfter(committed, &m) {
		l.committed.Store(&m)
		l.syncedNext.Store(m.next)
	}
}

// TruncateFrom drops every entry from index on (R3); index must be a
// stored entry's. The offsets the dropped entries held are the log's next
// ones again. The cut is durable when TruncateFrom returns; the caller
// never cuts an entry that is committed.
func (r *RaftLog) TruncateFrom(index uint64) error {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	defer r.noteActive()
	if err := l.Halted(); err != nil {
		return err
	}
	if index > r.last {
		return nil
	}
	if index < r.FirstIndex() {
		return fmt.Errorf("%w: truncation at %d, below the first entry %d", ErrNoEntry, index, r.FirstIndex())
	}
	span := r.spanOf(index)
	if span == nil {
		return fmt.Errorf("%w: entry %d is missing", ErrDamagedEntry, index)
	}
	pos, offset, err := r.entryAt(span, index)
	if err != nil {
		return err
	}
	if !span.termsKnown {
		// entryAt walked the span unless it kept its positions, which
		// only a walk or the writes make: its terms are known.
		return fmt.Errorf("%w: the terms of %s are unknown", ErrDamagedEntry, span.seg.name)
	}
	if r.cached == span {
		r.cached = nil // it becomes the active segment's
	}
	for len(r.spans) > 0 && r.spans[len(r.spans)-1] != span {
		if err := r.dropSegment(r.spans[len(r.spans)-1].seg); err != nil {
			return r.freeze(err)
		}
		r.spans = r.spans[:len(r.spans)-1]
	}
	if err := r.cutSegment(span.seg, pos, offset); err != nil {
		return r.freeze(err)
	}
	span.cut(index)
	r.last = index - 1
	r.forgetAfter(mark{next: offset, seg: span.seg, pos: pos})
	return nil
}

func (r *RaftLog) freeze(err error) error {
	r.log.freeze(err)
	return r.log.Err()
}

// dropSegment removes seg from the log and its file from the directory,
// synced. REQUIRES: the write token held.
func (r *RaftLog) dropSegment(seg *segment) error {
	l, a := r.log, &r.log.app
	if a.active == seg {
		a.closeFiles()
		a.active = nil
	}
	if r.cached != nil && r.cached.seg == seg {
		r.cached = nil
	}
	l.setMu.Lock()
	l.segments.Store(l.segments.Load().without(seg))
	l.setMu.Unlock()
	l.open.forget(seg)
	if err := l.fs.Remove(seg.path); err != nil {
		return fmt.Errorf("removing %s: %w", seg.path, err)
	}
	if err := l.fs.SyncDir(l.path); err != nil {
		return fmt.Errorf("syncing %s: %w", l.path, err)
	}
	seg.release()
	return nil
}

// cutSegment cuts seg, the last segment, at pos, where the batch holding
// offset starts, and makes it the active segment again: file cut and
// synced, room preallocated, its index and the appender rebuilt from a
// scan of what is kept. REQUIRES: the write token held.
func (r *RaftLog) cutSegment(seg *segment, pos int64, offset uint64) error {
	l, a := r.log, &r.log.app
	// Readers stop before the cut first: nothing they may read is cut.
	l.rollBack(mark{next: offset, seg: seg, pos: pos})
	write := a.write
	if a.active != seg {
		file, err := l.fs.OpenFile(seg.path, vfs.ReadWrite)
		if err != nil {
			return fmt.Errorf("opening %s to cut it: %w", seg.path, err)
		}
		l.open.forget(seg)
		seg.unseal(file)
		if write, err = a.activeWriteHandle(seg, file); err != nil {
			return err
		}
	}
	// The segment's own handle goes through the page cache: the cut, the
	// preallocation and the read need no alignment, in direct mode too.
	seg.mu.Lock()
	file, err := seg.readHandleLocked()
	seg.mu.Unlock()
	if err != nil {
		return err
	}
	before, err := file.Size()
	if err != nil {
		return err
	}
	if err := file.Truncate(pos); err != nil {
		return fmt.Errorf("cutting %s at %d: %w", seg.path, pos, err)
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("syncing %s after cutting it: %w", seg.path, err)
	}
	// Preallocated again to at least its size before: a mapping of the
	// file made before the cut stays inside it (only its bytes after the
	// cut, which no reader may look at, read as zeros).
	size := max(a.segmentSizeFor(int(pos-format.SegmentDataStart)), (before+vfs.DirectAlignment-1)&^(vfs.DirectAlignment-1))
	if err := l.preallocate(file, pos, size-pos); err != nil {
		return fmt.Errorf("preallocating %s: %w", seg.path, err)
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", seg.path, err)
	}
	image := make([]byte, pos)
	if n, err := file.ReadAt(image, 0); n < len(image) && err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading %s: %w", seg.path, err)
	}
	scan := scanSegment(image, seg.header.Token, seg.base, l.opts.MaxRecordBytes, scanLimits{End: pos, TornAllowed: true})
	if scan.End != pos || scan.NextOffset != offset || len(scan.Damage) > 0 || scan.Torn != nil || scan.TooNew != nil {
		return fmt.Errorf("%w: %s does not scan clean up to the cut at %d (offset %d)", ErrDamagedEntry, seg.path, pos, offset)
	}
	seg.installScan(&scan, scan.Holes)
	seg.trustPending.Store(false)
	a.adoptActive(seg, &scan, size)
	a.write = write
	if a.mode == IODirect {
		return a.loadTail(file)
	}
	return nil
}

// activeWriteHandle returns the handle the appender writes seg through:
// file itself, or in direct mode a direct handle.
func (a *appender) activeWriteHandle(seg *segment, file vfs.File) (vfs.File, error) {
	if a.mode != IODirect {
		return file, nil
	}
	write, err := a.log.fs.OpenFile(seg.path, vfs.ReadWrite|vfs.Direct)
	if err != nil {
		return nil, fmt.Errorf("opening %s for direct I/O: %w", seg.path, err)
	}
	return write, nil
}

// unseal turns a sealed segment back into an unsealed one written through
// file, which becomes its handle; the old handle and mapping stay open
// for whoever uses them until the last reference goes.
func (s *segment) unseal(file vfs.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.mapping != nil {
		s.mu.outgrown = append(s.mu.outgrown, s.mu.mapping)
		s.mu.mapping, s.mu.live = nil, false
	}
	s.mu.noLive = false
	if s.mu.file != nil {
		s.mu.retired = append(s.mu.retired, s.mu.file)
	}
	s.mu.file = file
	s.mu.footer = format.Footer{}
	s.sealed.Store(false)
}

// Reset drops every segment and starts the log empty at offset next, its
// next entry after index after: a snapshot install. Removals go newest
// first, each synced, so a crash leaves a prefix of the log.
func (r *RaftLog) Reset(next, after uint64) error {
	l, a := r.log, &r.log.app
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	defer r.noteActive()
	if err := l.Halted(); err != nil {
		return err
	}
	for {
		segs := l.segments.Load().segments
		if len(segs) == 0 {
			break
		}
		if err := r.dropSegment(segs[len(segs)-1]); err != nil {
			return r.freeze(err)
		}
	}
	r.spans, r.cached = nil, nil
	a.next = next
	a.resetActiveStats()
	l.rollBack(mark{next: next})
	r.last = after
	r.forgetAfter(mark{next: next})
	return nil
}

// RaftPoint is a point a Raft log starts after: an entry's index and
// term, and the offset the data after it starts at.
type RaftPoint struct {
	Index, Term, NextOffset uint64
}

// Compactable returns where the log would start after CompactTo(index):
// after the last entry of the leading segments whose entries are all at or
// below index (never the last segment). false when none qualifies.
func (r *RaftLog) Compactable(index uint64) (RaftPoint, bool) {
	var point RaftPoint
	found := false
	for i, span := range r.spans {
		if i == len(r.spans)-1 || !span.seg.sealed.Load() || (!span.empty() && span.last > index) {
			break
		}
		point.NextOffset = r.spans[i+1].seg.base
		if !span.empty() {
			point.Index, point.Term, found = span.last, span.lastTerm, true
		}
	}
	return point, found
}

// CompactTo removes the segments Compactable(index) names, oldest first,
// each removal synced.
func (r *RaftLog) CompactTo(index uint64) error {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	defer r.noteActive()
	if err := l.Halted(); err != nil {
		return err
	}
	point, ok := r.Compactable(index)
	if !ok {
		return nil
	}
	// Bases only grow along a log (R4): the segments to drop are those
	// below the first one kept.
	for len(r.spans) > 1 && r.spans[0].seg.base < point.NextOffset {
		if err := r.dropSegment(r.spans[0].seg); err != nil {
			return r.freeze(err)
		}
		r.spans = r.spans[1:]
	}
	return nil
}
