package segment

import "github.com/ironbus/ironbus/segment/vfs"

// The staging buffers of a writable log. A log owns a fixed set for its
// whole life: two that alternate between the batch producers fill and the
// batch the appender writes, and under direct I/O a third, the aligned
// bounce buffer for writes that cannot go out in place. They come from
// Options.StagingBuffers (a slab registered with the RAM budget) and go
// back to it when the log closes; without a slab they are allocated once
// from the heap. Nothing on the append path allocates a staging buffer
// after open, except for a record larger than the staging size, which
// the broker admits through its large-record pool first.

// StagingBufferSize is the size of each buffer a log takes from
// Options.StagingBuffers: the staging bytes plus room for the direct-I/O
// partial block in front and the commit frame and padding behind.
func StagingBufferSize(opts Options) int {
	staging := opts.StagingBytes
	if staging == 0 {
		staging = DefaultStagingBytes
	}
	return staging + 3*vfs.DirectAlignment
}

// StagingBuffersPerLog is how many buffers one writable log takes under
// mode: two, plus the bounce buffer of direct I/O (auto may pick direct,
// so it counts as direct).
func StagingBuffersPerLog(mode IOMode) int {
	if mode == IOBuffered {
		return 2
	}
	return 3
}

// takeStagingBuffers gives a log that is about to start appending its
// buffers, and makes the first staging batch on one of them.
func (l *Log) takeStagingBuffers() {
	count := StagingBuffersPerLog(l.app.mode)
	buffers := make([][]byte, 0, count)
	for range count {
		buffers = append(buffers, l.stagingBuffer())
	}
	if l.app.mode == IODirect {
		l.app.direct = buffers[count-1]
		buffers = buffers[:count-1]
	}
	l.mu.Lock()
	l.mu.free = buffers
	l.mu.staging = l.newStagingLocked(0)
	l.mu.Unlock()
}

// stagingBuffer takes one buffer from the slab, or from the heap when
// there is no slab or it is exhausted (more logs on disk than the budget
// planned for open anyway: refusing them would refuse data already
// acknowledged).
func (l *Log) stagingBuffer() []byte {
	size := StagingBufferSize(*l.opts)
	if slab := l.opts.StagingBuffers; slab != nil && slab.BufferSize() >= size {
		if buffer, ok := slab.Get(); ok {
			l.ownedBuffers = append(l.ownedBuffers, buffer)
			return buffer.Bytes()
		}
		l.opts.Logger.Warn("append staging pool exhausted; this log stages on the heap, outside the RAM budget",
			"log", l.id.String(), "pool", slab.Name(), "buffers", slab.Capacity())
	}
	return vfs.AlignedBuffer(size)
}

// releaseStagingBuffers returns the log's buffers to the slab. Called by
// Close once the appender has stopped and every batch has completed, so
// no one reads or writes them any more.
func (l *Log) releaseStagingBuffers() {
	for _, buffer := range l.ownedBuffers {
		if err := buffer.Release(); err != nil {
			l.opts.Logger.Error("staging buffer released twice", "log", l.id.String(), "error", err.Error())
		}
	}
	l.ownedBuffers = nil
	l.app.direct = nil
	l.mu.Lock()
	l.mu.free = nil
	l.mu.Unlock()
}

// newStagingLocked returns an empty staging batch on a free buffer of the
// log. In direct mode the records start at, the length the partial block
// will have when the batch is written, so that the block can be copied in
// front and the batch written in place (0 when unknown: the write then
// goes through the bounce buffer). A log with no free buffer (read-only,
// or one not yet started) stages on the heap. REQUIRES: l.mu held.
func (l *Log) newStagingLocked(at int) *batch {
	b := &batch{done: make(chan struct{}), log: l}
	last := len(l.mu.free) - 1
	if last < 0 {
		return b
	}
	b.owned = l.mu.free[last]
	l.mu.free = l.mu.free[:last]
	if l.app.mode == IODirect {
		b.slab, b.slabAt, b.buf = b.owned, at, b.owned[at:at]
		return b
	}
	b.buf = b.owned[:0]
	return b
}

// giveBackLocked returns the buffer b was staged on to the log, once b is
// written or failed and its bytes are no longer needed. REQUIRES: l.mu held.
func (l *Log) giveBackLocked(b *batch) {
	if b.owned != nil {
		l.mu.free = append(l.mu.free, b.owned)
	}
	b.owned, b.buf, b.slab = nil, nil, nil
}
