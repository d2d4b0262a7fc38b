package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/arena"
)

// errNeedMemory says a connection's buffer must grow for a large frame
// and the shared pool has no room right now: the backend stops reading
// that connection until waitForMemory succeeds.
var errNeedMemory = errors.New("loop: waiting for the large-frame pool")

// inputBuffer holds a connection's received bytes that Data has not
// consumed yet: a partial frame, or frames a paused session left for later.
//
// Its memory comes from the server's budgeted pools when it has them: the
// base buffer (ReadBufferSize) from Config.Buffers, a larger one for a large
// frame from Config.LargeFrames, taken and given back as the frame comes
// and goes, so a connection holds large-frame memory only while it has a
// large frame. Without pools it uses the heap, bounded by MaxBuffer.
type inputBuffer struct {
	buf        []byte
	start, end int
	base, max  int // the base buffer size and the largest one

	buffers *arena.Slab
	large   *arena.SharedPool
	slot    arena.Buffer // holds buf when it came from buffers
	lease   arena.Lease  // holds buf when it came from large
	held    uint8        // which of slot and lease holds buf
	want    int          // the size a pending grow waits for
	sizer   FrameSizer   // the session, when it can tell a frame's size
}

const (
	heldNothing uint8 = iota
	heldSlot
	heldLease
)

func newInputBuffer(cfg Config) inputBuffer {
	return inputBuffer{base: cfg.ReadBufferSize, max: cfg.MaxBuffer, buffers: cfg.Buffers, large: cfg.LargeFrames}
}

// free returns the space to read into, making room first: it compacts,
// then grows up to max. It returns an empty slice when one unconsumed
// frame fills the largest buffer, and errNeedMemory when growing must wait
// for the large-frame pool.
func (b *inputBuffer) free() ([]byte, error) {
	if b.start == b.end {
		b.start, b.end = 0, 0
	}
	if len(b.buf) == 0 {
		b.setBase()
	}
	if b.end == len(b.buf) && b.start > 0 {
		copy(b.buf, b.buf[b.start:b.end])
		b.end -= b.start
		b.start = 0
	}
	if b.end == len(b.buf) && len(b.buf) < b.max {
		size := b.frameSize()
		if size > b.max {
			return nil, nil // never fits: the caller reports ErrBufferFull
		}
		if err := b.grow(size); err != nil {
			return nil, err
		}
	}
	return b.buf[b.end:], nil
}

// frameSize is the buffer a full buffer's first frame needs. Leasing it
// whole, once, means a connection never holds part of the pool while
// waiting for more of it, which would deadlock connections that each hold
// a part. A session that cannot tell gets the largest buffer.
func (b *inputBuffer) frameSize() int {
	if b.sizer != nil {
		if size := b.sizer.FrameSize(b.buf[b.start:b.end]); size > len(b.buf) {
			return size
		}
	}
	return b.max
}

// setBase takes a base buffer from the slab, or the heap when the slab is
// exhausted (more connections than it was sized for; counted there).
func (b *inputBuffer) setBase() {
	if b.buffers != nil {
		if slot, ok := b.buffers.Get(); ok {
			b.slot, b.held, b.buf = slot, heldSlot, slot.Bytes()
			return
		}
	}
	b.buf, b.held = make([]byte, b.base), heldNothing
}

// grow moves the pending bytes into a buffer of size bytes.
func (b *inputBuffer) grow(size int) error {
	if b.large == nil {
		b.replace(make([]byte, size), heldNothing, arena.Lease{})
		return nil
	}
	lease, ok := b.large.TryAcquire(size)
	if !ok {
		b.want = size
		return errNeedMemory
	}
	b.replace(lease.Bytes(), heldLease, lease)
	return nil
}

// waitForMemory blocks until the grow that returned errNeedMemory can
// happen, and does it. Not on a reactor goroutine.
func (b *inputBuffer) waitForMemory(ctx context.Context) error {
	lease, err := b.large.Acquire(ctx, b.want)
	if err != nil {
		if errors.Is(err, arena.ErrTooLarge) {
			return fmt.Errorf("%w (%w)", ErrBufferFull, err)
		}
		return err
	}
	b.replace(lease.Bytes(), heldLease, lease)
	b.want = 0
	return nil
}

// replace moves the pending bytes into buf and gives back what held the
// old one.
func (b *inputBuffer) replace(buf []byte, held uint8, lease arena.Lease) {
	n := copy(buf, b.buf[b.start:b.end])
	b.giveBack()
	b.buf, b.start, b.end = buf, 0, n
	b.held, b.lease = held, lease
}

func (b *inputBuffer) giveBack() {
	switch b.held {
	case heldSlot:
		_ = b.slot.Release()
	case heldLease:
		_ = b.lease.Release()
	}
	b.slot, b.lease, b.held = arena.Buffer{}, arena.Lease{}, heldNothing
}

// release gives the memory back when nothing is pending (or the
// connection is gone): an idle connection holds no buffer.
func (b *inputBuffer) release() {
	b.giveBack()
	b.buf, b.start, b.end = nil, 0, 0
}

// shrink gives back a large-frame buffer once its frame was consumed, so
// the pool serves the next large frame.
func (b *inputBuffer) shrink() {
	if b.start == b.end && len(b.buf) > b.base {
		b.release()
	}
}

func (b *inputBuffer) filled(n int) { b.end += n }

func (b *inputBuffer) pending() []byte { return b.buf[b.start:b.end] }

func (b *inputBuffer) empty() bool { return b.start == b.end }

// deliver hands the pending bytes to the session.
func (b *inputBuffer) deliver(session Session) error {
	if b.start == b.end {
		return nil
	}
	consumed, err := session.Data(b.buf[b.start:b.end])
	b.start += consumed
	return err
}

// keep stores bytes the session left unconsumed from a buffer it does not
// own (a reactor's shared read buffer). The buffer is empty when this is
// called.
func (b *inputBuffer) keep(rest []byte) {
	if len(rest) == 0 {
		return
	}
	b.start, b.end = 0, 0
	if len(b.buf) == 0 {
		b.setBase()
	}
	// rest came from one read of at most ReadBufferSize bytes, so it fits
	// in a base buffer.
	b.end = copy(b.buf, rest)
}
