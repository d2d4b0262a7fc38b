package loop

import (
	"context"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// epollConn is a connection served by a reactor. The fields without a
// lock comment belong to the reactor goroutine.
type epollConn struct {
	connFront
	reactor *reactor
	fd      int
	session Session

	in       inputBuffer // bytes the session has not consumed yet
	interest uint32      // events registered with epoll
	reading  bool
	closed   bool
	lastRead time.Time
	closeAt  time.Time // when a requested close gives up on unsent output
	// The batch being sent, taken from output: sending's copied bytes
	// (sendingBytes of them) with the borrowed parts between them. sent
	// counts the batch's bytes written, borrowsDone the borrows whose done
	// ran, borrowedDone their bytes.
	sending      []outputChunk
	sendingBytes int
	borrows      []borrowed
	batchBytes   int
	sent         int
	borrowsDone  int
	borrowedDone int

	memoryWait   bool // a goroutine waits for large-frame memory and owns in
	memoryCancel context.CancelFunc
}

var _ Conn = (*epollConn)(nil)

func newEpollConn(r *reactor, fd int, id uint64) *epollConn {
	c := &epollConn{reactor: r, fd: fd, in: newInputBuffer(r.server.cfg)}
	c.connFront = newConnFront(fd, id, r.server.cfg, func(kind taskKind) { r.post(c, kind) })
	c.output.direct = fd // writers may write themselves when nothing waits (outputQueue.writeDirect)
	return c
}

// MayBlock implements InlineConn: only while the reactor is dispatching the
// last event of its pass with no task posted to it, so that blocking
// delays nothing it already knows to be ready. Reactor only (from Data).
func (c *epollConn) MayBlock() bool {
	return c.reactor.lastEvent && c.reactor.queue.idle()
}

// WriteVectored implements Conn. The parts are not copied: the reactor
// writes them with writev from the caller's memory (a mapped segment) and
// runs done once the kernel has them, or the connection closed.
func (c *epollConn) WriteVectored(header []byte, parts [][]byte, done func()) error {
	cfg := &c.reactor.server.cfg
	if err := c.output.writeBorrowed(header, parts, done, cfg.OutputLimit, cfg.WriteTimeout, c.remote); err != nil {
		done()
		return err
	}
	c.flushSoon()
	return nil
}

// waiting reports whether output waits to be sent. Reactor only.
func (c *epollConn) waiting() bool {
	return c.sent < c.batchBytes || c.output.queued()
}

// needsWritable reports whether the connection must watch for EPOLLOUT: a
// write stopped on a full socket buffer, or output is queued that no
// flush task will take. Output queued with a flush pending (a reply Data
// just queued, say) is sent by that task in this pass; watching for it
// would cost two epoll_ctl calls per reply. Reactor only.
func (c *epollConn) needsWritable() bool {
	return c.sent < c.batchBytes || (c.output.queued() && !c.flushPending.Load())
}

// take moves queued output into the batch being sent and lets blocked
// writers go on. Reactor only, once the previous batch is all written.
func (c *epollConn) take() {
	c.output.source.put(c.sending) // all sent: the kernel has the bytes
	c.sending, c.borrows = c.output.takeAll(c.sending, c.borrows)
	c.sendingBytes = filledBytes(c.sending)
	c.batchBytes, c.sent, c.borrowsDone, c.borrowedDone = c.sendingBytes, 0, 0, 0
	for _, b := range c.borrows {
		c.batchBytes += b.size
	}
}

// iovecs appends to dst (up to its capacity) the unsent bytes of the
// batch, in order: sending's bytes with the borrowed parts between them.
func (c *epollConn) iovecs(dst [][]byte) [][]byte {
	skip := c.sent
	add := func(b []byte) bool {
		if skip >= len(b) {
			skip -= len(b)
			return true
		}
		if len(dst) == cap(dst) {
			return false
		}
		dst = append(dst, b[skip:])
		skip = 0
		return true
	}
	at := 0
	for _, b := range c.borrows {
		if !copiedRange(c.sending, at, b.at, add) {
			return dst
		}
		for _, part := range b.parts {
			if !add(part) {
				return dst
			}
		}
		at = b.at
	}
	copiedRange(c.sending, at, c.sendingBytes, add)
	return dst
}

// releaseSent runs done for every borrow the kernel now has all of.
func (c *epollConn) releaseSent() {
	for c.borrowsDone < len(c.borrows) {
		b := c.borrows[c.borrowsDone]
		if b.at+c.borrowedDone+b.size > c.sent {
			return
		}
		c.borrowsDone++
		c.borrowedDone += b.size
		b.done()
	}
}

// dropUnsent runs done for the borrows of the batch that will never be
// sent: the connection closed.
func (c *epollConn) dropUnsent() {
	for ; c.borrowsDone < len(c.borrows); c.borrowsDone++ {
		c.borrows[c.borrowsDone].done()
	}
	c.output.source.put(c.sending)
	c.sending = c.sending[:0]
	c.batchBytes, c.sent, c.sendingBytes = 0, 0, 0
}

// flush writes queued output, one write per pass when the socket takes it
// all; a full socket buffer waits for EPOLLOUT. Reactor only.
func (r *reactor) flush(c *epollConn) {
	c.flushPending.Store(false)
	if c.closed {
		return
	}
	if c.sent == c.batchBytes {
		c.take()
	}
	for c.sent < c.batchBytes {
		r.iovecs = c.iovecs(r.iovecs[:0])
		n, err := unix.Writev(c.fd, r.iovecs)
		clear(r.iovecs) // no reference to a mapping outlives the call
		if n > 0 {
			c.sent += n
			c.releaseSent()
		}
		if err != nil {
			if isRetryable(err) {
				break
			}
			r.stopReading(c, err)
			r.closeConn(c)
			return
		}
		if c.sent == c.batchBytes {
			c.take()
		}
	}
	if c.closing.Load() && !c.waiting() {
		r.closeConn(c)
		return
	}
	r.updateInterest(c)
}

// requestClose closes now when nothing waits to be sent (or the close is
// forced), else after the output drains or the write timeout passes.
func (r *reactor) requestClose(c *epollConn) {
	if c.closed {
		return
	}
	if c.closeNow.Load() || !c.waiting() {
		r.closeConn(c)
		return
	}
	c.closeAt = time.Now().Add(r.server.cfg.WriteTimeout)
	r.flush(c)
}

// closeConn closes the descriptor and tells everyone waiting. Reactor only.
func (r *reactor) closeConn(c *epollConn) {
	if c.closed {
		return
	}
	c.closed = true
	if c.interest != 0 {
		_ = unix.EpollCtl(r.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	// Finished before the close: a direct write (under the queue's lock)
	// must never meet the descriptor closed, or reused by another
	// connection.
	c.output.finish()
	_ = unix.Close(c.fd)
	delete(r.conns, c.fd)
	if c.memoryWait {
		c.memoryCancel() // the waiter's taskMemory releases the buffer
	} else {
		c.in.release()
	}
	c.dropUnsent()
	r.stopReading(c, net.ErrClosed)
	r.server.forget(c)
}
