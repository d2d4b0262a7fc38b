package segment

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Replicated logs. A RaftLog makes a log the Raft log of its replica: one
// Raft entry is one batch as stored, closed by a commit frame that carries
// the entry's term and index. A data entry is the record frames its leader
// framed, at the offsets the leader assigned, written as they are; every
// other entry (a no-op, a configuration change, a control payload) is one
// control frame, which owns no offsets, closed by a commit frame of no
// records. Readers of records walk past control frames, so a consumer sees
// the data offsets dense across terms whatever else the log carries.
//
//   - R1 the replica is the log's only writer: producers' appends and
//     offset retention are refused (ErrReplicated) once the Raft log
//     opens, or at the log's open when its directory holds the replica's
//     state; every write, sync, truncation and reset holds the write token.
//   - R2 entries are dense: an entry's index is one past the last one
//     written, and a data entry's first offset is the log's next offset
//     (ErrEntryMismatch otherwise): offsets are never assigned here.
//   - R3 a truncation drops a suffix: later segment files go first, each
//     removal synced, then the segment holding the cut is cut (its footer
//     with it) and synced; a crash at any step leaves a prefix of the
//     log. The offsets after the cut are reused by the entries that
//     replace the suffix, and the committed mark, the next offset and the
//     active segment's index roll back with it.
//   - R4 no two segments share a base offset: a segment that holds no
//     offsets grows instead of rolling.
//   - R5 memory is a function of configuration: per segment, its first and
//     last entry and the indexes where terms change; positions (one per
//     64 KiB of frames) only for the active segment and the one sealed
//     segment read last. A read elsewhere walks that segment's frame
//     prefixes once. The read window and the write buffer (64 KiB each)
//     are kept; a larger entry's buffer is not.

// RaftEntry is one Raft entry as the log stores it.
type RaftEntry struct {
	Index, Term uint64
	// Control says the entry is a control frame of type Type with Data as
	// its payload. Otherwise Data holds record frames carrying offsets
	// FirstOffset .. FirstOffset+Count-1. A control entry read back has
	// the offset it stands at (the next record's) as FirstOffset.
	Control     bool
	Type        uint8
	Data        []byte
	FirstOffset uint64
	Count       uint32
}

// RaftLog is a log written as a replica's Raft log. Its methods are called
// by one goroutine at a time (the replica's); readers of records may read
// the log meanwhile.
type RaftLog struct {
	log   *Log
	spans []*entrySpan // one per segment of the log, in order
	last  uint64       // the last entry's index, or the index the log starts after
	// cached is the sealed span whose positions are kept (R5).
	cached  *entrySpan
	buf     []byte // a piece and its commit frame, as written
	walkBuf []byte // the window walks read frames into
	slot    []byte // the state slot being written
	// active is the log's active segment and activeEnd where its frames
	// end, as the last write left them (noteActive).
	active    *segment
	activeEnd int64
	stateSeq  uint64 // sequence of the state file's current slot
	visibility
}

// entrySpan is what a RaftLog knows of the entries of one segment.
type entrySpan struct {
	seg *segment
	// first and last are the indexes of its entries; a span without any
	// has last one below first, the last index before it, so the spans'
	// last indexes never go down along the log.
	first, last         uint64
	firstTerm, lastTerm uint64
	// terms lists where each term starts, when known (termsKnown); terms
	// only grow along a log, so first and last tell the rest when equal.
	terms      []termStart
	termsKnown bool
	// points are the positions of some entries (the first, then one per
	// pointInterval of frames); nil until the segment is walked.
	points []entryPoint
	// holes are entries the segment lost to damage (skip frames cover
	// them). damaged says a walk met frames that fail their checks: no
	// entry after reach can be read.
	holes   []indexRange
	damaged bool
	reach   uint64
}

type indexRange struct{ first, last uint64 }

// missing reports whether the entry at index, inside the span's bounds,
// is lost to damage.
func (s *entrySpan) missing(index uint64) bool {
	if s.damaged && index > s.reach {
		return true
	}
	for _, h := range s.holes {
		if index >= h.first && index <= h.last {
			return true
		}
	}
	return false
}

type termStart struct{ index, term uint64 }

type entryPoint struct {
	index uint64
	pos   int64 // where the entry's batch starts
}

// pointInterval spaces an entry span's positions, as the sparse offset
// index is spaced.
const pointInterval = indexInterval

func (s *entrySpan) empty() bool { return s.first > s.last }

// add records an entry whose batch starts at pos, appended to the span.
func (s *entrySpan) add(index, term uint64, pos int64) {
	if s.empty() {
		s.first, s.firstTerm = index, term
		s.terms = append(s.terms[:0], termStart{index, term})
		s.points = append(s.points[:0], entryPoint{index, pos})
		s.termsKnown = true
	} else {
		if term != s.lastTerm {
			s.terms = append(s.terms, termStart{index, term})
		}
		if n := len(s.points); n == 0 || pos-s.points[n-1].pos >= pointInterval {
			s.points = append(s.points, entryPoint{index, pos})
		}
	}
	s.last, s.lastTerm = index, term
}

// cut drops the span's entries from index on.
func (s *entrySpan) cut(index uint64) {
	if s.empty() || index > s.last {
		return
	}
	if index <= s.first {
		s.first, s.last = index, index-1
		s.terms, s.points = s.terms[:0], s.points[:0]
		return
	}
	s.last = index - 1
	for len(s.terms) > 0 && s.terms[len(s.terms)-1].index > s.last {
		s.terms = s.terms[:len(s.terms)-1]
	}
	for len(s.points) > 0 && s.points[len(s.points)-1].index > s.last {
		s.points = s.points[:len(s.points)-1]
	}
	if n := len(s.terms); n > 0 {
		s.lastTerm = s.terms[n-1].term
	}
}

// OpenRaft makes the log its replica's Raft log and returns it. after is
// the index the log starts after when it holds no entry (the replica's
// snapshot point). The log must be writable and idle (nothing staged or in
// flight), and every batch it holds must be a Raft entry.
func (l *Log) OpenRaft(after uint64) (*RaftLog, error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	// A log whose directory holds a replica's state is marked replicated
	// at open already: only its writes are refused then, not this.
	marked := l.mu.replicated
	l.mu.replicated = false
	err := l.writableLocked()
	if err == nil && (l.mu.staging.count > 0 || len(l.mu.inflight) > 0) {
		err = fmt.Errorf("%w: records are staged for the log", ErrEntryMismatch)
	}
	if err == nil && l.stop == nil {
		err = ErrReadOnly
	}
	l.mu.replicated = err == nil || marked
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r := &RaftLog{log: l, last: after}
	r.noteActive()
	for _, seg := range l.segments.Load().segments {
		span, err := r.openSpan(seg)
		if err != nil {
			l.mu.Lock()
			l.mu.replicated = marked
			l.mu.Unlock()
			return nil, err
		}
		r.spans = append(r.spans, span)
		if !span.empty() {
			r.last = span.last
		}
	}
	return r, nil
}

// openSpan learns the entries of seg: a sealed segment's first and last
// only (its first batch and the commit frame before its footer), the
// active one's in full. REQUIRES: the write token held.
func (r *RaftLog) openSpan(seg *segment) (*entrySpan, error) {
	span := &entrySpan{seg: seg, first: r.last + 1, last: r.last}
	if !seg.sealed.Load() {
		return span, r.walkSpan(span)
	}
	if !seg.tryAcquire() {
		return nil, fmt.Errorf("segment: %s closed while opening it", seg.name)
	}
	defer seg.release()
	w, err := r.walker(seg)
	if err != nil {
		return nil, err
	}
	defer r.keepWindow(w)
	first, ok, err := w.next(format.SegmentDataStart)
	switch {
	case errors.Is(err, ErrDamagedEntry):
		// Its first batch fails: its entries follow the previous
		// segment's, and none can be read.
		span.first, span.damaged, span.reach = r.last+1, true, r.last
		span.last = r.last
	case err != nil:
		return nil, err
	case !ok:
		return span, nil
	default:
		if err := checkEntry(seg, first.c); err != nil {
			return nil, err
		}
		span.first, span.firstTerm = first.c.Index, first.c.Term
		span.last, span.lastTerm = first.c.Index, first.c.Term
	}
	if at := w.end - format.CommitFrameSize; at >= format.SegmentDataStart {
		b, err := w.bytes(at, format.CommitFrameSize)
		if err != nil {
			return nil, err
		}
		c, err := format.DecodeCommit(b)
		if err == nil && c.Token == seg.header.Token && c.Index >= span.first && c.Index >= span.last {
			span.last, span.lastTerm = c.Index, c.Term
			return span, nil
		}
	}
	if !span.damaged {
		// The segment does not end with a commit frame (a skip frame
		// covers damage there): walk it.
		return span, r.walkSpan(span)
	}
	return span, nil
}

// checkEntry refuses a batch that is not a Raft entry: a log written
// before it was replicated.
func checkEntry(seg *segment, c format.Commit) error {
	if c.Index == 0 {
		return fmt.Errorf("%w: %s holds batches that are not Raft entries", ErrEntryMismatch, seg.name)
	}
	return nil
}

// walkSpan walks every entry of the span's segment, rebuilding its terms
// and positions. Entries a skip frame removed become holes; frames that
// fail their checks end the walk, and the entries after them read as
// damaged.
func (r *RaftLog) walkSpan(span *entrySpan) error {
	seg := span.seg
	if !seg.tryAcquire() {
		return fmt.Errorf("segment: %s closed while reading it", seg.name)
	}
	defer seg.release()
	w, err := r.walker(seg)
	if err != nil {
		return err
	}
	defer r.keepWindow(w)
	walked := &entrySpan{seg: seg, first: span.first, last: span.first - 1}
	for pos := int64(format.SegmentDataStart); ; {
		e, ok, err := w.next(pos)
		if errors.Is(err, ErrDamagedEntry) {
			walked.damaged = true
			break
		}
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := checkEntry(seg, e.c); err != nil {
			return err
		}
		if !walked.empty() && e.c.Index != walked.last+1 {
			if e.c.Index <= walked.last {
				walked.damaged = true
				break
			}
			walked.holes = append(walked.holes, indexRange{walked.last + 1, e.c.Index - 1})
		}
		walked.add(e.c.Index, e.c.Term, e.start)
		pos = e.commit + format.CommitFrameSize
	}
	if walked.damaged {
		walked.reach = walked.last
		if walked.empty() {
			walked.first, walked.firstTerm, walked.reach = span.first, span.firstTerm, span.first-1
			walked.last, walked.lastTerm = span.first-1, span.firstTerm
		}
		if !span.empty() && span.last > walked.last {
			// The commit frame before the footer names a later entry:
			// the bound stays, the entries between read as damaged.
			walked.last, walked.lastTerm = span.last, span.lastTerm
		}
	}
	*span = *walked
	if seg.sealed.Load() {
		r.keepPoints(span)
	}
	return nil
}

// keepPoints makes span the sealed span whose positions are kept,
// dropping the previous one's (R5).
func (r *RaftLog) keepPoints(span *entrySpan) {
	if r.cached != nil && r.cached != span {
		r.cached.points = nil
	}
	r.cached = span
}

// FirstIndex is the index of the first stored entry, or one past
// LastIndex when the log holds none.
func (r *RaftLog) FirstIndex() uint64 {
	for _, span := range r.spans {
		if !span.empty() {
			return span.first
		}
	}
	return r.last + 1
}

// LastIndex is the index of the last entry written, synced or not, or
// the index the log starts after when it holds none.
func (r *RaftLog) LastIndex() uint64 { return r.last }

// NextOffset is the offset the next data entry must start at.
func (r *RaftLog) NextOffset() uint64 {
	r.log.writeMu.Lock()
	defer r.log.writeMu.Unlock()
	return r.log.app.next
}

// spanOf returns the span holding index, or nil.
func (r *RaftLog) spanOf(index uint64) *entrySpan {
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].last >= index })
	if i == len(r.spans) || r.spans[i].first > index {
		return nil
	}
	return r.spans[i]
}

// Term returns the term of the stored entry at index.
func (r *RaftLog) Term(index uint64) (uint64, error) {
	span := r.spanOf(index)
	switch {
	case span == nil && (index < r.FirstIndex() || index > r.last):
		return 0, fmt.Errorf("%w: %d", ErrNoEntry, index)
	case span == nil || span.missing(index):
		return 0, fmt.Errorf("%w: entry %d is missing", ErrDamagedEntry, index)
	case index == span.first || span.firstTerm == span.lastTerm:
		return span.firstTerm, nil
	case index == span.last:
		return span.lastTerm, nil
	}
	if !span.termsKnown {
		if err := r.walkSpan(span); err != nil {
			return 0, err
		}
		if span.missing(index) || !span.termsKnown {
			return 0, fmt.Errorf("%w: entry %d is missing", ErrDamagedEntry, index)
		}
	}
	i := sort.Search(len(span.terms), func(i int) bool { return span.terms[i].index > index })
	return span.terms[i-1].term, nil
}

// ReadEntries calls fn with each stored entry from lo up to hi
// (exclusive), in order, until fn returns false. The entry's Data is
// valid only during the call. An entry that fails its checks, or is
// missing between the first and the last, fails the read with
// ErrDamagedEntry.
func (r *RaftLog) ReadEntries(lo, hi uint64, fn func(RaftEntry) bool) error {
	if lo < r.FirstIndex() || hi > r.last+1 {
		return fmt.Errorf("%w: [%d, %d) outside [%d, %d]", ErrNoEntry, lo, hi, r.FirstIndex(), r.last)
	}
	for index := lo; index < hi; {
		span := r.spanOf(index)
		if span == nil {
			return fmt.Errorf("%w: entry %d is missing", ErrDamagedEntry, index)
		}
		next, more, err := r.readSpan(span, index, min(hi, span.last+1), fn)
		if err != nil || !more {
			return err
		}
		index = next
	}
	return nil
}

// readSpan reads entries [lo, hi) of one span; it returns the index it
// stopped at and whether fn wants more.
func (r *RaftLog) readSpan(span *entrySpan, lo, hi uint64, fn func(RaftEntry) bool) (uint64, bool, error) {
	pos, err := r.positionOf(span, lo)
	if err != nil {
		return lo, false, err
	}
	seg := span.seg
	if !seg.tryAcquire() {
		return lo, false, fmt.Errorf("segment: %s closed while reading it", seg.name)
	}
	defer seg.release()
	w, err := r.walker(seg)
	if err != nil {
		return lo, false, err
	}
	defer r.keepWindow(w)
	index := lo
	for index < hi {
		e, ok, err := w.next(pos)
		if err != nil {
			return index, false, err
		}
		if !ok || e.c.Index > index {
			return index, false, fmt.Errorf("%w: entry %d is missing from %s", ErrDamagedEntry, index, seg.name)
		}
		pos = e.commit + format.CommitFrameSize
		if e.c.Index < index {
			continue
		}
		entry, err := w.entry(e, r.log.opts.MaxRecordBytes)
		if err != nil {
			return index, false, err
		}
		index++
		if !fn(entry) {
			return index, false, nil
		}
	}
	return index, true, nil
}

// positionOf returns a position in span's segment at or before the batch
// of entry index, walking the segment first when its positions are not
// kept.
func (r *RaftLog) positionOf(span *entrySpan, index uint64) (int64, error) {
	if span.points == nil {
		if err := r.walkSpan(span); err != nil {
			return 0, err
		}
	} else if span.seg.sealed.Load() {
		r.keepPoints(span)
	}
	points := span.points
	i := sort.Search(len(points), func(i int) bool { return points[i].index > index })
	if i == 0 {
		return format.SegmentDataStart, nil
	}
	return points[i-1].pos, nil
}

// entryAt returns where the batch of the stored entry index starts and the
// offset it starts at.
func (r *RaftLog) entryAt(span *entrySpan, index uint64) (int64, uint64, error) {
	pos, err := r.positionOf(span, index)
	if err != nil {
		return 0, 0, err
	}
	seg := span.seg
	if !seg.tryAcquire() {
		return 0, 0, fmt.Errorf("segment: %s closed while reading it", seg.name)
	}
	defer seg.release()
	w, err := r.walker(seg)
	if err != nil {
		return 0, 0, err
	}
	defer r.keepWindow(w)
	for {
		e, ok, err := w.next(pos)
		if err != nil {
			return 0, 0, err
		}
		if !ok || e.c.Index > index {
			return 0, 0, fmt.Errorf("%w: entry %d is missing from %s", ErrDamagedEntry, index, seg.name)
		}
		if e.c.Index == index {
			return e.start, e.c.FirstOffset, nil
		}
		pos = e.commit + format.CommitFrameSize
	}
}

// walkedEntry is one entry as a walk of a segment's frames meets it.
type walkedEntry struct {
	start   int64 // where its batch starts
	commit  int64 // where its commit frame starts
	c       format.Commit
	control bool
}

// entryWalker reads a segment's frames through its read handle, a window
// at a time, never past the segment's written (or sealed) end.
type entryWalker struct {
	seg   *segment
	file  vfs.File
	end   int64
	buf   []byte
	bufAt int64
}

const walkChunk = 64 << 10

// walker returns a walker over seg's frames, up to what is written of
// them. REQUIRES: a reference on seg.
func (r *RaftLog) walker(seg *segment) (*entryWalker, error) {
	end, active := r.activeEnd, r.active == seg
	seg.mu.Lock()
	file, err := seg.readHandleLocked()
	if !active {
		end = seg.mu.size
		if seg.sealed.Load() {
			end = int64(seg.mu.footer.DataEnd)
		}
	}
	seg.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &entryWalker{seg: seg, file: file, end: end, buf: r.walkBuf[:0], bufAt: -1}, nil
}

// noteActive records the active segment and where its frames end, for
// walks that do not hold the write token. REQUIRES: the write token held.
func (r *RaftLog) noteActive() {
	r.active, r.activeEnd = r.log.app.active, r.log.app.pos
}

// keepWindow keeps a walker's window for the next walk, unless a large
// entry grew it.
func (r *RaftLog) keepWindow(w *entryWalker) {
	if cap(w.buf) <= walkChunk {
		r.walkBuf = w.buf[:0]
	}
}

// bytes returns n bytes at pos, valid until the next call.
func (w *entryWalker) bytes(pos int64, n int) ([]byte, error) {
	if pos < 0 || pos+int64(n) > w.end {
		return nil, w.damaged(pos, fmt.Sprintf("%d bytes run past the data end %d", n, w.end))
	}
	if w.bufAt >= 0 && pos >= w.bufAt && pos+int64(n) <= w.bufAt+int64(len(w.buf)) {
		return w.buf[pos-w.bufAt : pos-w.bufAt+int64(n)], nil
	}
	size := int(min(max(int64(n), walkChunk), w.end-pos))
	if cap(w.buf) < size {
		w.buf = make([]byte, size)
	}
	w.buf = w.buf[:size]
	read, err := w.file.ReadAt(w.buf, pos)
	if read < size && err != nil && !errors.Is(err, io.EOF) {
		w.bufAt = -1
		return nil, fmt.Errorf("segment: reading %s: %w", w.seg.name, err)
	}
	if read < n {
		w.bufAt = -1
		return nil, w.damaged(pos, "the file ends early")
	}
	w.buf, w.bufAt = w.buf[:read], pos
	return w.buf[:n], nil
}

func (w *entryWalker) damaged(pos int64, detail string) error {
	return fmt.Errorf("%w: %s at %d: %s", ErrDamagedEntry, w.seg.name, pos, detail)
}

// next walks from pos, where a batch starts, to the end of the next entry
// (stepping over skip frames). false at the end of the frames.
func (w *entryWalker) next(pos int64) (walkedEntry, bool, error) {
	start, control := pos, false
	for pos+format.FramePrefixSize <= w.end {
		prefix, err := w.bytes(pos, format.FramePrefixSize)
		if err != nil {
			return walkedEntry{}, false, err
		}
		length := int64(frameLength(prefix))
		switch format.PeekKind(prefix) {
		case format.KindNone, format.KindFooter:
			if pos != start {
				return walkedEntry{}, false, w.damaged(pos, "a batch without its commit frame")
			}
			return walkedEntry{}, false, nil
		case format.KindRecord:
			if control || length < record.FrameHeaderSize {
				return walkedEntry{}, false, w.damaged(pos, "a record frame out of place")
			}
			pos += length
		case format.KindControl:
			if pos != start || length < format.ControlHeaderSize {
				return walkedEntry{}, false, w.damaged(pos, "a control frame out of place")
			}
			control = true
			pos += length
		case format.KindSkip:
			b, err := w.bytes(pos, format.SkipFrameSize)
			if err != nil {
				return walkedEntry{}, false, err
			}
			k, err := format.DecodeSkip(b)
			if err != nil || pos != start {
				return walkedEntry{}, false, w.damaged(pos, "a skip frame out of place")
			}
			pos += int64(k.Length)
			start = pos
		case format.KindCommit:
			b, err := w.bytes(pos, format.CommitFrameSize)
			if err != nil {
				return walkedEntry{}, false, err
			}
			c, err := format.DecodeCommit(b)
			switch {
			case err != nil:
				return walkedEntry{}, false, w.damaged(pos, err.Error())
			case c.Token != w.seg.header.Token || int64(c.BatchLength) != pos-start || (c.Count == 0) != control:
				return walkedEntry{}, false, w.damaged(pos, "a commit frame that does not close its batch")
			}
			return walkedEntry{start: start, commit: pos, c: c, control: control}, true, nil
		default:
			return walkedEntry{}, false, w.damaged(pos, fmt.Sprintf("unknown frame magic %q", prefix[0:2]))
		}
	}
	if pos != start {
		return walkedEntry{}, false, w.damaged(pos, "a batch runs past the data end")
	}
	return walkedEntry{}, false, nil
}

// entry reads and checks the batch of e: its checksum, and a control
// frame's own. Data aliases the walker's window.
func (w *entryWalker) entry(e walkedEntry, maxPayload uint32) (RaftEntry, error) {
	batch, err := w.bytes(e.start, int(e.commit-e.start))
	if err != nil {
		return RaftEntry{}, err
	}
	if format.CRC(batch) != e.c.BatchCRC {
		return RaftEntry{}, w.damaged(e.start, fmt.Sprintf("entry %d fails its batch checksum", e.c.Index))
	}
	entry := RaftEntry{Index: e.c.Index, Term: e.c.Term, FirstOffset: e.c.FirstOffset, Count: e.c.Count}
	if !e.control {
		entry.Data = batch
		return entry, nil
	}
	c, err := format.DecodeControl(batch, maxPayload)
	if err != nil {
		return RaftEntry{}, w.damaged(e.start, err.Error())
	}
	entry.Control, entry.Type, entry.Data = true, c.Type, c.Payload
	return entry, nil
}
