package loop

import (
	"context"
	"errors"
	"net"
	"runtime"
	"time"
	"unsafe"

	"github.com/ironbus/ironbus/loop/uring"
	"golang.org/x/sys/unix"
)

// uringConn is a connection served by an io_uring reactor. The fields
// without a lock comment or atomic type belong to the reactor goroutine.
type uringConn struct {
	connFront
	reactor *uringReactor
	fd      int
	session Session

	slot, generation uint32 // its place in the reactor's slotTable

	in       inputBuffer // bytes the session has not consumed yet
	spill    spillBuffer // received bytes the session could not take yet; they follow in
	heldEnd  error       // how reading ended (EOF, error), held until spill was delivered
	reading  bool
	closed   bool // closed for the session; the descriptor waits for released
	released bool // descriptor closed and slot freed: no operation remains
	lastRead time.Time
	closeAt  time.Time // when a requested close gives up on unsent output

	recvArmed      bool // a multishot RECV may still post completions
	recvCancelling bool
	sendArmed      bool          // a WRITEV is in flight; sending and iovecs are pinned
	sending        []outputChunk // output taken from output, sent up to sent
	sendingBytes   int           // the copied bytes sending holds
	sent           int
	iovecs         []unix.Iovec   // the WRITEV in flight: the unsent bytes of sending
	pinner         runtime.Pinner // keeps sending and iovecs in place for the kernel

	memoryWait   bool // a goroutine waits for large-frame memory and owns in
	memoryCancel context.CancelFunc
}

var _ Conn = (*uringConn)(nil)

func newURingConn(r *uringReactor, fd int, id uint64) *uringConn {
	c := &uringConn{reactor: r, fd: fd, in: newInputBuffer(r.server.cfg)}
	c.connFront = newConnFront(fd, id, r.server.cfg, func(kind taskKind) {
		r.queue.post(uringTask{conn: c, kind: kind})
	})
	return c
}

// MayBlock implements InlineConn: only while the reactor dispatches a
// completion after which only send completions wait in its pass (the
// kernel has those bytes already; handling them later delays nothing),
// with no task posted to it. SQEs prepared and not yet submitted go to the
// kernel now, so blocking holds none of them back. Reactor only (from
// Data).
func (c *uringConn) MayBlock() bool {
	r := c.reactor
	if !r.dispatching || !r.onlySendsAfter() || !r.queue.idle() {
		return false
	}
	if r.ring.SQSpace() != r.ring.SQEntries() {
		if _, err := r.ring.Submit(); err != nil {
			return false
		}
	}
	return true
}

// WriteVectored implements Conn. The reactor backends copy the parts
// into the output queue (one memcpy each, no re-encoding), so done runs
// before it returns and the caller may release the parts at once.
func (c *uringConn) WriteVectored(header []byte, parts [][]byte, done func()) error {
	defer done()
	cfg := &c.reactor.server.cfg
	if err := c.output.writeParts(header, parts, cfg.OutputLimit, cfg.WriteTimeout, c.remote); err != nil {
		return err
	}
	c.flushSoon()
	return nil
}

// waiting reports whether output waits to be sent. Reactor only.
func (c *uringConn) waiting() bool {
	return c.sendArmed || c.sent < c.sendingBytes || c.output.queued()
}

// add gives a new connection a slot, opens its session and starts
// receiving.
func (r *uringReactor) add(c *uringConn) {
	slot, generation, ok := r.slots.add(c)
	if !ok || !r.haltBegan.IsZero() {
		if ok {
			r.slots.remove(slot)
		}
		_ = unix.Close(c.fd)
		c.closed, c.released = true, true
		c.output.finish()
		r.server.forget(c)
		return
	}
	c.slot, c.generation = slot, generation
	session, err := r.server.handler.Open(c)
	if err != nil {
		// The handler may have queued an explanation: send it, then close.
		c.closing.Store(true)
		r.requestClose(c)
		return
	}
	c.session, c.reading, c.lastRead = session, true, r.now
	c.in.sizer, _ = session.(FrameSizer)
	r.syncRecv(c)
}

// flush sends queued output: everything queued goes into one WRITEV over
// its chunks, and the next waits for its completion, so a connection has
// at most one in flight. Reactor only.
func (r *uringReactor) flush(c *uringConn) {
	c.flushPending.Store(false)
	if c.closed || c.sendArmed {
		return // the WRITEV's completion flushes again
	}
	if c.sent == c.sendingBytes && c.output.queued() {
		c.output.source.put(c.sending) // all sent: the kernel has the bytes
		c.sending = c.output.take(c.sending)
		c.sendingBytes, c.sent = filledBytes(c.sending), 0
	}
	if c.sent == c.sendingBytes {
		if c.closing.Load() {
			r.closeConn(c)
		}
		return
	}
	// The kernel reads the chunks and the iovecs after this call returns:
	// pin them until the completion (chunks from the off-heap slab need
	// no pin; Pin ignores them), and keep them referenced from the conn
	// (its slot holds the conn until the final completion).
	c.iovecs = c.iovecs[:0]
	copiedRange(c.sending, c.sent, c.sendingBytes, func(b []byte) bool {
		if len(c.iovecs) == uringMaxIovecs {
			return false
		}
		c.pinner.Pin(&b[0])
		iovec := unix.Iovec{Base: &b[0]}
		iovec.SetLen(len(b))
		c.iovecs = append(c.iovecs, iovec)
		return true
	})
	c.pinner.Pin(&c.iovecs[0])
	sqe := r.sqe()
	sqe.PrepWritev(c.fd, uintptr(unsafe.Pointer(&c.iovecs[0])), uint32(len(c.iovecs)), 0)
	sqe.SetUserData(c.token(opSend))
	c.sendArmed = true
}

// sent handles a SEND completion: a short send leaves the rest for the
// next SEND, a failure ends the connection.
func (r *uringReactor) sent(c *uringConn, cqe uring.CQE) {
	c.sendArmed = false
	c.pinner.Unpin()
	if c.closed {
		r.release(c)
		return
	}
	switch err := cqe.Err(); {
	case err == nil:
		c.sent += int(cqe.Result)
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR), errors.Is(err, unix.ECANCELED):
		// Passing, or a cancel meant for an earlier operation: send again.
	default:
		r.stopReading(c, err)
		r.closeConn(c)
		return
	}
	r.flush(c)
}

// requestClose closes now when nothing waits to be sent (or the close is
// forced), else after the output drains or the write timeout passes.
func (r *uringReactor) requestClose(c *uringConn) {
	if c.closed {
		return
	}
	if c.closeNow.Load() || !c.waiting() {
		r.closeConn(c)
		return
	}
	if c.closeAt.IsZero() {
		c.closeAt = r.now.Add(r.server.cfg.WriteTimeout)
	}
	r.flush(c)
}

// closeConn ends the connection for its session and everyone waiting,
// and cancels its operations; the descriptor is closed and the slot freed
// by release once the last of them has posted its final completion, so
// no operation can touch a reused descriptor, slot or buffer. Reactor only.
func (r *uringReactor) closeConn(c *uringConn) {
	if c.closed {
		return
	}
	c.closed = true
	if c.memoryWait {
		c.memoryCancel() // the waiter's taskMemory releases the buffer
	} else {
		c.in.release()
	}
	c.spill.release(&r.spillPool)
	c.heldEnd = nil
	c.output.finish()
	r.stopReading(c, net.ErrClosed)
	r.server.forget(c)
	if (c.recvArmed || c.sendArmed) && !r.tearingDown {
		// The kernel matches by file, so the descriptor stays open until
		// this is submitted (release runs only after the final CQEs).
		sqe := r.sqe()
		sqe.PrepCancelFd(c.fd, uring.CancelAll)
		sqe.SetUserData(uring.EncodeUserData(opCancel, 0, 0))
		return
	}
	r.release(c)
}

// release closes the descriptor and frees the slot of a closed connection
// once no operation of its remains (or the ring is gone). The descriptor
// is closed with a plain close(2): nothing references it any more, and an
// IORING_OP_CLOSE would be one more completion to wait for.
func (r *uringReactor) release(c *uringConn) {
	if !c.closed || c.released || (!r.tearingDown && (c.recvArmed || c.sendArmed)) {
		return
	}
	c.released = true
	if c.sendArmed {
		c.pinner.Unpin() // the ring is closed: its WRITEV was cancelled
	}
	clear(c.iovecs)
	c.output.source.put(c.sending) // no operation reads them any more
	c.sending, c.sendingBytes, c.sent = nil, 0, 0
	_ = unix.Close(c.fd)
	r.slots.remove(c.slot)
}
