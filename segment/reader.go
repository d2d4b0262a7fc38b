package segment

import (
	"errors"
	"fmt"
	"io"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// Entry is what a Reader returns: a record, or a gap of offsets the log
// does not hold (removed by retention, or lost to damage and reported).
type Entry struct {
	Offset    uint64
	Timestamp int64 // broker wall clock, unix nanoseconds
	BodyCRC   uint32
	// Body is the record body as the producer framed it, and Frame the
	// whole stored frame. Both are valid until the next call to Next or
	// Close.
	Body  []byte
	Frame []byte
	// Gap, when set, means offsets Gap.From..Gap.To-1 are missing and the
	// entry carries no record.
	Gap *Gap
}

// Gap is a range of offsets the log does not hold.
type Gap struct {
	From, To uint64 // To is exclusive
	Reason   string
}

// Gap reasons.
const (
	GapRetention = "retention" // below the first retained offset
	GapMissing   = "missing"   // no segment covers the range
	// GapCompacted: compaction removed the records (a later record of the
	// same key superseded each, or it was an expired tombstone).
	GapCompacted = "compacted"
)

// ErrCorruptRead reports a record that failed its checksum when read,
// after its segment had been validated: memory or the device changed it.
var ErrCorruptRead = errors.New("segment: record failed its checksum on read")

const readChunk = 256 << 10

// Reader iterates over a log's committed records in offset order. It
// never returns a byte that is not covered by the committed mark, and it
// holds a reference on the segment it reads, so retention cannot close or
// delete it underneath. A Reader is not safe for concurrent use.
type Reader struct {
	log  *Log
	next uint64
	seg  *segment
	pos  int64

	buf      []byte // active segment: a window of the file
	bufStart int64

	runBuffer *[]byte // active segment: the buffer the next run is read into
	// liveWindow says the last window came from the active segment's
	// live mapping: a run of it pins the segment, not a buffer.
	liveWindow bool
	// runWindow says which bytes of the active segment runBuffer still
	// holds when no run took it (a filtered reader copies its short runs
	// out, and reads on from the same window instead of reading again).
	runWindow struct {
		start int64
		size  int
		valid bool
	}

	// plain holds the last encrypted record opened (encryption.go); raw
	// hands out encrypted frames as stored (Log.KeyIDs).
	plain  []byte
	raw    bool
	opener opener

	filterState
}

// NewReader returns a Reader starting at offset from.
func (l *Log) NewReader(from uint64) *Reader { return &Reader{log: l, next: from} }

// Next returns the next record or gap. It returns io.EOF at the committed
// end of the log; call WaitCommitted and Next again to follow the log.
func (r *Reader) Next() (Entry, error) {
	if r.held != nil {
		return Entry{Gap: r.takeHeld()}, nil
	}
	for {
		committed := r.log.committed.Load()
		if r.next >= committed.next {
			gap, err := r.settle(nil, io.EOF)
			return Entry{Gap: gap}, err
		}
		if r.seg == nil || r.next < r.seg.base || r.segmentDone() {
			if gap, err := r.enter(); gap != nil || err != nil {
				gap, err = r.settle(gap, err)
				return Entry{Gap: gap}, err
			}
			continue
		}
		if r.summarised() && r.pos >= r.blockEnd && r.skipBlocks(committed) {
			continue
		}
		if r.summarised() && r.sparse.active && r.jumpSparse(committed, false) {
			continue
		}
		entry, advanced, err := r.step(committed)
		if err != nil || entry.Gap != nil {
			gap, err := r.settle(entry.Gap, err)
			return Entry{Gap: gap}, err
		}
		if entry.Frame != nil {
			return entry, nil
		}
		if !advanced {
			// The segment has no more frames for us: whatever offsets it
			// still claims are a gap.
			if gap := r.finishSegment(); gap != nil {
				gap, err = r.settle(gap, nil)
				return Entry{Gap: gap}, err
			}
		}
	}
}

// Close releases the reader's segment.
func (r *Reader) Close() {
	if r.seg != nil {
		r.seg.release()
		r.seg = nil
	}
	r.buf = nil
	if r.runBuffer != nil {
		r.log.putRunBuffer(r.runBuffer)
		r.runBuffer = nil
	}
}

// Offset returns the offset the next call to Next starts from (the start
// of the next entry it returns, a filtered gap included).
func (r *Reader) Offset() uint64 { return r.position() }

func (r *Reader) segmentDone() bool { return r.seg.sealed.Load() && r.next >= r.seg.next() }

// enter moves the reader to the segment holding r.next, or returns the gap
// before the next segment that exists.
func (r *Reader) enter() (*Gap, error) {
	for attempt := 0; ; attempt++ {
		set := r.log.segments.Load()
		if len(set.segments) == 0 {
			return nil, io.EOF
		}
		seg, idx := set.find(r.next)
		if seg == nil {
			return r.jump(set.segments[0].base, GapRetention), nil
		}
		if seg.sealed.Load() && r.next >= seg.next() {
			if idx+1 < len(set.segments) {
				return r.jump(set.segments[idx+1].base, GapMissing), nil
			}
			return nil, io.EOF
		}
		if !seg.tryAcquire() {
			if attempt > 3 {
				return nil, fmt.Errorf("segment: %s closed while opening it", seg.name)
			}
			continue // retention removed it; look again
		}
		if r.seg != nil {
			r.seg.release()
		}
		r.seg, r.buf = seg, r.buf[:0]
		r.runWindow.valid = false
		if seg.sealed.Load() {
			if err := r.log.validateSealed(seg); err != nil {
				return nil, err
			}
		} else if seg.trustPending.Load() {
			if err := r.log.validateTrusted(seg); err != nil {
				return nil, err
			}
		}
		r.pos = seg.locate(r.next)
		r.forgetSummary()
		return nil, nil
	}
}

func (r *Reader) jump(to uint64, reason string) *Gap {
	gap := &Gap{From: r.next, To: to, Reason: reason}
	r.next = to
	return gap
}

// finishSegment ends the current segment: offsets it covers beyond its
// last record form a gap.
func (r *Reader) finishSegment() *Gap {
	seg := r.seg
	end := seg.next()
	seg.release()
	r.seg = nil
	if r.next < end {
		reason := GapMissing
		if h, ok := seg.holeAt(r.next); ok {
			reason = h.Reason.String()
		}
		return r.jump(end, reason)
	}
	return nil
}

// step examines the frame at r.pos. It returns a record or gap entry, or
// advanced=true when it only moved past a frame, or advanced=false when the
// segment has no more frames below the limit.
func (r *Reader) step(committed *mark) (Entry, bool, error) {
	limit := r.limit(committed)
	if h, ok := r.holeStartingAt(r.pos); ok {
		r.pos = h.End
		if end := h.First + h.Count; r.next < end && h.First <= r.next {
			return Entry{Gap: r.jump(end, h.Reason.String())}, true, nil
		}
		return Entry{}, true, nil
	}
	if r.pos+format.FramePrefixSize > limit {
		return Entry{}, false, nil
	}
	prefix, err := r.bytesAt(r.pos, format.FramePrefixSize, limit)
	if err != nil {
		return Entry{}, false, err
	}
	switch format.PeekKind(prefix) {
	case format.KindRecord:
		return r.record(limit)
	case format.KindCommit:
		r.pos += format.CommitFrameSize
		return Entry{}, true, nil
	case format.KindSkip:
		return r.skip(limit)
	case format.KindControl:
		// A replicated entry that owns no offsets: not a record.
		length := int64(frameLength(prefix))
		if length < format.ControlHeaderSize || r.pos+length > limit {
			return Entry{}, false, fmt.Errorf("%w: %s at %d: control frame of %d bytes", ErrCorruptRead, r.seg.name, r.pos, length)
		}
		r.pos += length
		return Entry{}, true, nil
	}
	return Entry{}, false, nil
}

// limit is where readable frames of the current segment end.
func (r *Reader) limit(committed *mark) int64 {
	if r.seg.sealed.Load() {
		r.seg.mu.Lock()
		defer r.seg.mu.Unlock()
		return int64(r.seg.mu.footer.DataEnd)
	}
	if committed.seg == r.seg {
		return committed.pos
	}
	return format.SegmentDataStart
}

func (r *Reader) record(limit int64) (Entry, bool, error) {
	head, err := r.bytesAt(r.pos, record.FrameHeaderSize, limit)
	if err != nil {
		return Entry{}, false, err
	}
	h, err := record.ParseFrameHeader(head, r.log.opts.MaxRecordBytes)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: %s at %d: %w", ErrCorruptRead, r.seg.name, r.pos, err)
	}
	if h.Offset > r.next {
		return Entry{Gap: r.jump(h.Offset, GapMissing)}, true, nil
	}
	if h.Offset < r.next {
		r.pos += int64(h.FrameLength)
		return Entry{}, true, nil
	}
	frame, err := r.bytesAt(r.pos, int(h.FrameLength), limit)
	if err != nil {
		return Entry{}, false, err
	}
	if len(frame) < int(h.FrameLength) {
		return Entry{}, false, fmt.Errorf("%w: %s at %d: frame runs past the committed data", ErrCorruptRead, r.seg.name, r.pos)
	}
	body, err := record.VerifyFrame(frame, h)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: %s offset %d: %w", ErrCorruptRead, r.seg.name, h.Offset, err)
	}
	stored := h.FrameLength
	if h.Encrypted() {
		if frame, err = r.openFrame(frame, h); err != nil {
			return Entry{}, false, err
		}
		if h, err = record.ParseFrameHeader(frame, r.log.opts.MaxRecordBytes); err != nil {
			return Entry{}, false, err
		}
		body = frame[record.FrameHeaderSize : record.FrameHeaderSize+int(h.BodyLength)]
	}
	if !r.matches(body) {
		r.skipRecord(stored)
		return Entry{}, true, nil
	}
	if r.skipping {
		// The stretch of filtered records ends here: its gap goes out
		// first, and the next call reads this record again.
		return Entry{Gap: r.takeFiltered(r.next)}, true, nil
	}
	r.pos += int64(stored)
	r.next++
	return Entry{Offset: h.Offset, Timestamp: h.Timestamp, BodyCRC: h.BodyCRC, Body: body, Frame: frame}, true, nil
}

func (r *Reader) skip(limit int64) (Entry, bool, error) {
	head, err := r.bytesAt(r.pos, format.SkipFrameSize, limit)
	if err != nil {
		return Entry{}, false, err
	}
	k, err := format.DecodeSkip(head)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: %s at %d: %w", ErrCorruptRead, r.seg.name, r.pos, err)
	}
	r.pos += int64(k.Length)
	if end := k.FirstLost + k.LostCount; r.next < end {
		return Entry{Gap: r.jump(end, Reason(k.ReasonCode).String())}, true, nil
	}
	return Entry{}, true, nil
}

func (r *Reader) holeStartingAt(pos int64) (hole, bool) {
	r.seg.mu.Lock()
	defer r.seg.mu.Unlock()
	for _, h := range r.seg.mu.holes {
		if h.Start == pos && h.End > pos {
			return h, true
		}
	}
	return hole{}, false
}

// bytesAt returns up to n bytes at pos, never past limit: from the mapping
// of a sealed segment, or from a window read from the active one.
func (r *Reader) bytesAt(pos int64, n int, limit int64) ([]byte, error) {
	if r.sparse.active {
		return r.bytesAtChunk(pos, n, limit, sparseChunk) // see collectRun
	}
	return r.bytesAtChunk(pos, n, limit, readChunk)
}

// bytesAtChunk is bytesAt reading at least chunk bytes into the window
// when it must read.
func (r *Reader) bytesAtChunk(pos int64, n int, limit int64, chunk int64) ([]byte, error) {
	end := min(pos+int64(n), limit)
	if end <= pos {
		return nil, nil
	}
	if r.seg.sealed.Load() {
		r.seg.mu.Lock()
		data, err := r.seg.mappedLocked()
		r.seg.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return data[pos:end], nil
	}
	if data, ok := r.liveView(end); ok {
		return data[pos:end], nil
	}
	if pos >= r.bufStart && end <= r.bufStart+int64(len(r.buf)) {
		return r.buf[pos-r.bufStart : end-r.bufStart], nil
	}
	size := min(max(int64(n), chunk), limit-pos)
	if int64(cap(r.buf)) < size {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	r.seg.mu.Lock()
	file, err := r.seg.readHandleLocked()
	r.seg.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := file.ReadAt(r.buf, pos); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("segment: reading %s: %w", r.seg.name, err)
	}
	r.bufStart = pos
	return r.buf[:end-pos], nil
}

// liveView returns bytes [0, end) of the active segment through its live
// mapping, when the log reads that way and the mapping covers end.
func (r *Reader) liveView(end int64) ([]byte, bool) {
	if !r.log.liveReads {
		return nil, false
	}
	r.seg.mu.Lock()
	defer r.seg.mu.Unlock()
	return r.seg.liveViewLocked(end)
}

// OffsetForTime returns the offset of the first record whose timestamp is
// at or after ts, or the committed end when there is none. Timestamps are
// broker wall-clock data: they need not be monotonic, and the answer is
// exact anyway.
func (l *Log) OffsetForTime(ts int64) (uint64, error) {
	for _, seg := range l.segments.Load().segments {
		if stats := seg.stats(); stats.Records == 0 || stats.MaxTimestamp < ts {
			continue
		}
		if !seg.tryAcquire() {
			continue
		}
		offset, found, err := l.scanForTime(seg, ts)
		seg.release()
		if err != nil || found {
			return offset, err
		}
	}
	return l.Committed(), nil
}

func (l *Log) scanForTime(seg *segment, ts int64) (uint64, bool, error) {
	if seg.sealed.Load() {
		if err := l.validateSealed(seg); err != nil {
			return 0, false, err
		}
	} else if seg.trustPending.Load() {
		if err := l.validateTrusted(seg); err != nil {
			return 0, false, err
		}
	}
	r := &Reader{log: l, seg: seg, pos: seg.locateTime(ts)}
	seg.tryAcquire() // the reader releases its own reference
	defer r.Close()
	r.next = seg.base
	if h, ok := r.firstRecordAt(); ok {
		r.next = h
	}
	for {
		entry, err := r.Next()
		if errors.Is(err, io.EOF) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		if entry.Gap == nil && entry.Timestamp >= ts {
			return entry.Offset, true, nil
		}
		if r.seg != seg {
			return 0, false, nil
		}
	}
}

// firstRecordAt returns the offset of the record at r.pos, if one starts
// there.
func (r *Reader) firstRecordAt() (uint64, bool) {
	committed := r.log.committed.Load()
	head, err := r.bytesAt(r.pos, record.FrameHeaderSize, r.limit(committed))
	if err != nil || format.PeekKind(head) != format.KindRecord {
		return 0, false
	}
	h, err := record.ParseFrameHeader(head, r.log.opts.MaxRecordBytes)
	return h.Offset, err == nil
}
