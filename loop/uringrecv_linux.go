package loop

import (
	"context"
	"errors"
	"io"

	"github.com/ironbus/ironbus/loop/uring"
	"golang.org/x/sys/unix"
)

// Receiving: each reading connection keeps one multishot RECV armed that
// takes its buffers from the reactor's provided-buffer ring. The kernel
// writes into a buffer it picked; the loop hands those bytes to the session
// (straight from the buffer when nothing is pending, else copied into the
// connection's input buffer, exactly as the epoll reactor does with its
// shared read buffer) and gives the buffer back at once. A paused
// connection has its RECV cancelled; bytes that were already on their way
// wait in spill and are offered, after the input buffer, on resume.

// canTake reports whether the session may be handed bytes now.
func (c *uringConn) canTake() bool {
	return c.reading && !c.closed && !c.memoryWait && !c.paused.Load()
}

// syncRecv arms the RECV when the connection wants input and cancels it
// when it does not (paused, waiting for memory, reading over). Reactor
// only.
func (r *uringReactor) syncRecv(c *uringConn) {
	if c.closed {
		return
	}
	wants := c.canTake() && c.spill.empty() && c.heldEnd == nil && r.haltBegan.IsZero()
	switch {
	case wants && !c.recvArmed:
		sqe := r.sqe()
		sqe.PrepMultishotRecv(c.fd, r.buffers.Group(), 0)
		sqe.SetUserData(c.token(opRecv))
		c.recvArmed, c.recvCancelling = true, false
	case !wants && c.recvArmed && !c.recvCancelling:
		r.cancel(c.token(opRecv))
		c.recvCancelling = true
	}
}

// received handles one RECV completion. Without IORING_CQE_F_MORE the
// multishot RECV has ended (EOF, an error, ENOBUFS when the buffer ring ran
// dry, a cancel, or a full CQ) and syncRecv arms a new one if the
// connection still wants input.
func (r *uringReactor) received(c *uringConn, cqe uring.CQE) {
	if !cqe.More() {
		c.recvArmed = false
	}
	if id, data, ok := r.buffers.Received(cqe); ok {
		if len(data) > 0 {
			r.offer(c, data)
		}
		r.buffers.Recycle(id)
		r.buffers.Advance()
	}
	err := cqe.Err()
	switch {
	case c.closed:
		r.release(c)
		return
	case cqe.Result == 0 && !cqe.More():
		r.endReading(c, io.EOF)
	case err == nil, errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ECANCELED),
		errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		// Data, or an end that only needs a new RECV.
	default:
		r.endReading(c, err)
	}
	r.syncRecv(c)
}

// recycle gives back the buffer of a completion nobody will read.
func (r *uringReactor) recycle(cqe uring.CQE) {
	if id, ok := cqe.BufferID(); ok {
		r.buffers.Recycle(id)
		r.buffers.Advance()
	}
}

// offer hands bytes the kernel just received to the session, or keeps them
// in spill when the session cannot take them now. data is the reactor's
// provided buffer: nothing may hold on to it after this returns.
func (r *uringReactor) offer(c *uringConn, data []byte) {
	if !c.reading {
		return // reading stopped: like epoll, the rest is never read
	}
	c.lastRead = r.now
	if !c.spill.empty() || !c.canTake() {
		c.spill.add(data, &r.spillPool)
		return
	}
	if c.in.empty() {
		// data is at most one provided buffer, ReadBufferSize bytes, so
		// what the session leaves fits the base input buffer.
		consumed, err := c.session.Data(data)
		c.in.keep(data[consumed:])
		if err != nil {
			r.stopReading(c, err)
		}
		return
	}
	if rest := r.feed(c, data); len(rest) > 0 {
		c.spill.add(rest, &r.spillPool)
	}
	r.tidy(c)
}

// feed copies data into the input buffer and offers it to the session,
// until all of it went in or the session cannot take more (paused,
// waiting for large-frame memory, reading over); it returns what is left.
func (r *uringReactor) feed(c *uringConn, data []byte) []byte {
	for len(data) > 0 && c.canTake() {
		space, err := c.in.free()
		if errors.Is(err, errNeedMemory) {
			r.waitForMemory(c)
			break
		}
		if len(space) == 0 {
			r.stopReading(c, ErrBufferFull)
			return nil
		}
		n := copy(space, data)
		c.in.filled(n)
		data = data[n:]
		if err := c.in.deliver(c.session); err != nil {
			r.stopReading(c, err)
			return nil
		}
	}
	return data
}

// tidy gives the input buffer back when nothing is pending: an idle
// connection holds no buffer.
func (r *uringReactor) tidy(c *uringConn) {
	if !c.memoryWait && c.in.empty() {
		c.in.release()
	}
}

// endReading ends reading with cause once every byte received before it
// was offered; until then (a paused session, bytes in spill) it is held.
func (r *uringReactor) endReading(c *uringConn, cause error) {
	if !c.reading {
		return
	}
	if !c.spill.empty() || !c.canTake() {
		if c.heldEnd == nil {
			c.heldEnd = cause
		}
		return
	}
	r.stopReading(c, cause)
}

// resume offers the buffered bytes again, then what waited in spill, then
// reads on.
func (r *uringReactor) resume(c *uringConn) {
	if !c.canTake() {
		return
	}
	if err := c.in.deliver(c.session); err != nil {
		r.stopReading(c, err)
		return
	}
	r.drainSpill(c)
	r.syncRecv(c)
}

// drainSpill feeds the bytes held in spill, and ends reading if its end
// was held behind them.
func (r *uringReactor) drainSpill(c *uringConn) {
	for !c.spill.empty() && c.canTake() {
		pending := c.spill.pending()
		rest := r.feed(c, pending)
		c.spill.consume(len(pending)-len(rest), &r.spillPool)
		if len(rest) > 0 {
			break
		}
	}
	if c.reading && !c.closed {
		r.tidy(c)
	}
	if c.spill.empty() && c.heldEnd != nil && c.canTake() {
		cause := c.heldEnd
		c.heldEnd = nil
		r.stopReading(c, cause)
	}
}

// waitForMemory stops receiving while a goroutine waits for the
// large-frame pool; the input buffer belongs to that goroutine until it
// posts taskMemory.
func (r *uringReactor) waitForMemory(c *uringConn) {
	ctx, cancel := context.WithCancel(context.Background())
	c.memoryWait, c.memoryCancel = true, cancel
	go func() {
		err := c.in.waitForMemory(ctx)
		r.queue.post(uringTask{conn: c, kind: taskMemory, err: err})
	}()
}

// memoryArrived takes the input buffer back after a wait and goes on
// where feed stopped.
func (r *uringReactor) memoryArrived(c *uringConn, err error) {
	c.memoryWait = false
	c.memoryCancel()
	if c.closed {
		c.in.release()
		return
	}
	if err != nil {
		r.stopReading(c, err)
		return
	}
	// The session has seen what is in the buffer; only the bytes that did
	// not fit before (in spill) are new to it.
	r.drainSpill(c)
	r.syncRecv(c)
}

// stopReading ends reading once; the session hears it on a goroutine of
// its own, because it may block while it finishes its work.
func (r *uringReactor) stopReading(c *uringConn, cause error) {
	if !c.reading {
		return
	}
	c.reading = false
	c.spill.release(&r.spillPool)
	c.heldEnd = nil
	r.syncRecv(c)
	if session := c.session; session != nil {
		go session.ReadStopped(cause)
	}
}
