package segment

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// Run is a contiguous span of stored frames holding consecutive records
// [First, Next): the bytes a streaming consumer gets as they are on disk,
// never decoded into entries. Frames may include the commit frames that
// closed producer batches between the records (a consumer skips them).
//
// Frames of a sealed segment alias its mapping, and so do frames of the
// active segment where the log reads it through a live mapping (buffered
// I/O, 64-bit); the run holds a reference on the segment, so neither
// retention nor the open-segment bound can unmap it until Release.
// Otherwise frames of the active segment were read into a buffer the run
// owns. They never reach past the durable watermark.
type Run struct {
	First, Next uint64
	Count       int
	Frames      []byte
	// Gap, when set, means offsets Gap.From..Gap.To-1 are missing and the
	// run carries no frames.
	Gap *Gap

	seg    *segment // the reference Frames depends on, if any
	buffer *[]byte  // the buffer Frames was read into, if any
	log    *Log     // takes buffer back
}

// Release lets go of what the frames alias: the segment's mapping, or the
// buffer they were read into. The frames must not be read afterwards.
// Idempotent.
func (run *Run) Release() {
	if run.seg != nil {
		run.seg.release()
		run.seg = nil
	}
	if run.buffer != nil {
		run.log.putRunBuffer(run.buffer)
		run.buffer = nil
	}
}

// window returns up to n bytes at pos, never past limit: the mapping of a
// sealed segment, the live mapping of the active one, or the active
// segment read into a recycled buffer that the run taking it will own.
func (r *Reader) window(pos int64, n int, limit int64) ([]byte, error) {
	r.liveWindow = false
	if r.seg.sealed.Load() {
		return r.bytesAt(pos, n, limit)
	}
	if end := min(pos+int64(n), limit); end > pos {
		if data, ok := r.liveView(end); ok {
			r.liveWindow = true
			return data[pos:end], nil
		}
	}
	if w := &r.runWindow; w.valid && r.runBuffer != nil && pos >= w.start && pos+record.FrameHeaderSize <= w.start+int64(w.size) {
		// Committed bytes never change: what the window holds from pos
		// is still right, though it may end before limit.
		return (*r.runBuffer)[pos-w.start : w.size], nil
	}
	size := int(max(min(int64(n), limit-pos), 0))
	if r.runBuffer == nil {
		r.runBuffer = r.log.getRunBuffer()
	}
	if cap(*r.runBuffer) < size {
		*r.runBuffer = make([]byte, size)
	}
	buf := (*r.runBuffer)[:size]
	r.seg.mu.Lock()
	file, err := r.seg.readHandleLocked()
	r.seg.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := file.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
		r.runWindow.valid = false
		return nil, fmt.Errorf("segment: reading %s: %w", r.seg.name, err)
	}
	r.runWindow.start, r.runWindow.size, r.runWindow.valid = pos, size, true
	return buf, nil
}

// NextRun returns the next run of up to maxRecords records (at least one)
// and about maxBytes of frames (the first record whatever its size) from
// the reader's position, or a gap, or io.EOF at the committed end. Record
// headers are checked (their CRC, and that offsets follow on); bodies are
// not: sealed segments were verified when first mapped, and the consumer
// verifies every frame it receives anyway. A run never crosses a segment.
//
// With a filter (SetFilter), a run holds only consecutive matching records
// (it ends where a filtered one starts), and the filtered stretches come
// back as gaps, exactly as from Next.
func (r *Reader) NextRun(maxRecords, maxBytes int) (Run, error) {
	if r.held != nil {
		return Run{Gap: r.takeHeld()}, nil
	}
	for {
		committed := r.log.committed.Load()
		if r.next >= committed.next {
			gap, err := r.settle(nil, io.EOF)
			return Run{Gap: gap}, err
		}
		if r.seg == nil || r.next < r.seg.base || r.segmentDone() {
			if gap, err := r.enter(); gap != nil || err != nil {
				gap, err = r.settle(gap, err)
				return Run{Gap: gap}, err
			}
			continue
		}
		if r.filter != nil && r.opening() {
			return r.nextOpenedRun()
		}
		if r.summarised() && r.pos >= r.blockEnd && r.skipBlocks(committed) {
			continue
		}
		if r.summarised() && r.sparse.active && r.jumpSparse(committed, true) {
			continue
		}
		run, walked, err := r.collectRun(committed, max(maxRecords, 1), maxBytes)
		if err == nil && r.opening() {
			run, err = r.openRun(run)
		}
		if err != nil || run.Count > 0 || run.Gap != nil {
			return run, err
		}
		if walked {
			continue
		}
		// The frame at the position is not a record that continues the
		// run (a hole, a skip frame, an offset jump, the end, a matching
		// record after a filtered stretch): Next's step knows each case
		// and turns the missing ones into a gap.
		entry, advanced, err := r.step(committed)
		switch {
		case err != nil || entry.Gap != nil:
			gap, err := r.settle(entry.Gap, err)
			return Run{Gap: gap}, err
		case entry.Frame != nil:
			return Run{}, fmt.Errorf("segment: %s at %d: a record the run walk refused", r.seg.name, r.pos)
		case !advanced:
			if gap := r.finishSegment(); gap != nil {
				gap, err = r.settle(gap, nil)
				return Run{Gap: gap}, err
			}
		}
	}
}

// collectRun walks record frames from r.pos while they continue the run.
// walked reports that it moved past frames that belong to no run
// (commit frames, records below the position) without finding a record.
func (r *Reader) collectRun(committed *mark, maxRecords, maxBytes int) (Run, bool, error) {
	limit := r.limit(committed)
	want := r.runWant(limit, maxBytes)
	window, err := r.window(r.pos, want, limit)
	if err != nil {
		return Run{}, false, err
	}
	windowStart := r.pos
	start, end, pos := r.pos, r.pos, r.pos
	holeStart := r.nextHoleStart(pos)
	run := Run{First: r.next, Next: r.next}
	walked := false
	// A stretch still pending after SetFilter(nil) must go out first too.
	filtered := r.filter != nil || r.skipping
	for run.Count < maxRecords && (run.Count == 0 || int(end-start) < maxBytes) && pos < holeStart {
		at := pos - windowStart
		if at+record.FrameHeaderSize > int64(len(window)) && run.Count == 0 && pos+record.FrameHeaderSize <= limit {
			// Frames below the position used the window up: move it.
			if window, err = r.window(pos, want, limit); err != nil {
				return Run{}, false, err
			}
			windowStart, at = pos, 0
		}
		if at+format.FramePrefixSize > int64(len(window)) {
			break
		}
		kind := format.PeekKind(window[at:])
		if kind == format.KindCommit {
			pos += format.CommitFrameSize
			if run.Count == 0 {
				start, end, walked = pos, pos, true
			}
			continue
		}
		if kind == format.KindControl {
			// A replicated entry that owns no offsets ends a run; before
			// one, the walk steps over it.
			length := int64(frameLength(window[at:]))
			if run.Count > 0 || length < format.ControlHeaderSize || pos+length > limit {
				break
			}
			pos += length
			start, end, walked = pos, pos, true
			continue
		}
		if kind != format.KindRecord || at+record.FrameHeaderSize > int64(len(window)) {
			break
		}
		h, err := record.ParseFrameHeader(window[at:], r.log.opts.MaxRecordBytes)
		if err != nil {
			return Run{}, false, fmt.Errorf("%w: %s at %d: %w", ErrCorruptRead, r.seg.name, pos, err)
		}
		if h.Offset < run.Next && run.Count == 0 {
			pos += int64(h.FrameLength) // before the position: not ours
			start, end, walked = pos, pos, true
			continue
		}
		if h.Offset != run.Next || pos+int64(h.FrameLength) > limit {
			break
		}
		if at+int64(h.FrameLength) > int64(len(window)) {
			if run.Count > 0 {
				break
			}
			// One record past the window: read the window again from it.
			r.runWindow.valid = false
			if window, err = r.window(pos, max(want, int(h.FrameLength)), limit); err != nil {
				return Run{}, false, err
			}
			windowStart, at = pos, 0
		}
		if filtered {
			verdict := r.judge(window[at+record.FrameHeaderSize:at+record.FrameHeaderSize+int64(h.BodyLength)], run.Count)
			if verdict == passRecord {
				// At a new block, stop: its summary may skip it whole.
				pos = r.passInRun(&run, pos, h.FrameLength)
				start, end, walked = pos, pos, true
				if pos < r.blockEnd {
					continue
				}
			}
			if verdict == stopRun && run.Count == 0 {
				// A match ends a filtered stretch: its gap goes out now
				// (step would read the record again only to say so).
				r.pos = start
				return Run{Gap: r.takeFiltered(run.Next)}, false, nil
			}
			if verdict != keepRecord {
				break
			}
		}
		pos += int64(h.FrameLength)
		end = pos
		run.Count++
		run.Next++
	}
	r.pos = start
	if run.Count == 0 {
		return Run{}, walked, nil
	}
	return r.finishRun(run, window[start-windowStart:end-windowStart], end)
}

// runWant is how many bytes a run walk reads into its window at once.
func (r *Reader) runWant(limit int64, maxBytes int) int {
	want := int(max(min(limit-r.pos, int64(max(maxBytes, readChunk))), 0))
	if r.sparse.active {
		// Jumping through a block: only the records at its spots are
		// read, and the next one is usually further than this.
		want = min(want, sparseChunk)
	}
	return want
}

// finishRun moves the reader past the run and pins the frames: a sealed
// segment's mapping by a reference, the active segment's buffer by
// handing it to the run.
func (r *Reader) finishRun(run Run, frames []byte, end int64) (Run, bool, error) {
	switch {
	case r.liveWindow && r.seg.tryAcquire():
		// The frames alias the active segment's live mapping, which the
		// reference keeps mapped (sealed or not) until Release.
		run.seg = r.seg
		run.Frames = frames
	case r.seg.sealed.Load() && r.seg.tryAcquire():
		run.seg = r.seg
		run.Frames = frames
	case r.runBuffer != nil && !r.seg.sealed.Load() && r.filter != nil:
		// A filtered run is short next to the window; copying it keeps
		// the window for the records after it.
		run.buffer, run.log = r.log.getRunBuffer(), r.log
		*run.buffer = append((*run.buffer)[:0], frames...)
		run.Frames = *run.buffer
	case r.runBuffer != nil && !r.seg.sealed.Load():
		run.buffer, run.log, r.runBuffer = r.runBuffer, r.log, nil
		r.runWindow.valid = false
		run.Frames = frames
	default:
		run.Frames = append([]byte(nil), frames...)
	}
	r.pos = end
	r.next = run.Next
	return run, false, nil
}

// nextHoleStart is where the first quarantined span at or after pos
// starts: a run stops there, and Next's step reports the span as a gap.
func (r *Reader) nextHoleStart(pos int64) int64 {
	r.seg.mu.Lock()
	defer r.seg.mu.Unlock()
	first := int64(math.MaxInt64)
	for _, h := range r.seg.mu.holes {
		if h.End > pos && h.Start < first {
			first = max(h.Start, pos)
		}
	}
	return first
}

// maxRunBuffers bounds the recycled run buffers of a log: enough for a
// few streaming consumers with a batch in flight each (I8: memory follows
// configuration, not load; a busier log allocates and lets go).
const maxRunBuffers = 4

func (l *Log) getRunBuffer() *[]byte {
	l.runBuffers.Lock()
	defer l.runBuffers.Unlock()
	if n := len(l.runBuffers.free); n > 0 {
		buffer := l.runBuffers.free[n-1]
		l.runBuffers.free = l.runBuffers.free[:n-1]
		return buffer
	}
	return new([]byte)
}

func (l *Log) putRunBuffer(buffer *[]byte) {
	l.runBuffers.Lock()
	defer l.runBuffers.Unlock()
	if len(l.runBuffers.free) < maxRunBuffers {
		l.runBuffers.free = append(l.runBuffers.free, buffer)
	}
}
