package client

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ironbus/ironbus/wire"
)

const (
	// readBufferSize is the usual read size: many small acks per syscall.
	readBufferSize = 64 << 10
	// minReadRoom: compact the buffer rather than read into less than this.
	minReadRoom = 4 << 10
	// maxRetainedWriteBuffer: a write buffer grown past this by a burst of
	// big records is dropped once recent batches are much smaller, rather
	// than kept for good (sustained big batches keep it: no churn).
	maxRetainedWriteBuffer = 4 << 20
)

// readBuffer accumulates bytes from the connection and cuts frames out of
// them. It grows for a frame bigger than itself (up to the maximum frame,
// which ParseFrame enforces before anything is allocated) and shrinks
// back afterwards, so one large record does not pin memory for good.
type readBuffer struct {
	buf        []byte
	start, end int // unparsed bytes are buf[start:end]
	// sinceLarge counts fits since one needed more than readBufferSize:
	// a grown buffer is kept while large frames keep coming (a stream of
	// DeliverBatch frames would otherwise reallocate it for each one).
	sinceLarge int
}

// keepLargeFits is how many fits without a large frame it takes to let a
// grown read buffer go.
const keepLargeFits = 64

func newReadBuffer() readBuffer { return readBuffer{buf: make([]byte, readBufferSize)} }

// next returns the next frame, reading as needed. The frame's body
// aliases the buffer and is valid until the following call.
func (b *readBuffer) next(conn net.Conn, maxFrame uint32) (wire.Frame, error) {
	for {
		frame, n, err := wire.ParseFrame(b.buf[b.start:b.end], maxFrame)
		if err == nil {
			b.start += n
			return frame, nil
		}
		if !errors.Is(err, wire.ErrIncomplete) {
			return frame, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		b.fit(n)
		m, err := conn.Read(b.buf[b.end:])
		b.end += m
		if err != nil && m == 0 {
			if errors.Is(err, io.EOF) {
				return frame, fmt.Errorf("server closed the connection: %w", err)
			}
			return frame, fmt.Errorf("read: %w", err)
		}
	}
}

// buffered says whether bytes read from the connection wait to be parsed.
func (b *readBuffer) buffered() bool { return b.start < b.end }

// fit makes room for a frame of need bytes starting at start.
func (b *readBuffer) fit(need int) {
	if b.start+need <= len(b.buf) && (len(b.buf)-b.end >= minReadRoom || b.start == 0) {
		return
	}
	size := max(need, readBufferSize)
	if need > readBufferSize {
		b.sinceLarge = 0
	} else if b.sinceLarge < keepLargeFits {
		b.sinceLarge++
	}
	shrink := len(b.buf) > 2*size && b.sinceLarge >= keepLargeFits
	if size > len(b.buf) || shrink {
		buf := make([]byte, size)
		b.end = copy(buf, b.buf[b.start:b.end])
		b.buf, b.start = buf, 0
		return
	}
	b.end = copy(b.buf, b.buf[b.start:b.end])
	b.start = 0
}

// start launches the connection's goroutines: the read loop, the flusher,
// and a keepalive when the server has an idle timeout.
func (c *Client) start(buf readBuffer) {
	c.lastSend.Store(c.now())
	c.rbuf = buf
	c.wg.Add(2)
	go c.readLoop()
	go c.flushLoop()
	if c.info.IdleTimeout > 0 {
		c.wg.Add(1)
		go c.keepaliveLoop(c.info.IdleTimeout / 3)
	}
}

// enqueue appends a frame to the write buffer and wakes the flusher. The
// frame is encoded in place, under the lock, so frames from concurrent
// callers never interleave and the caller's message can be reused as
// soon as enqueue returns.
func (c *Client) enqueue(id uint32, m wire.Message) {
	c.wmu.Lock()
	wasEmpty := len(c.wbuf) == 0
	c.wbuf = wire.Append(c.wbuf, id, m)
	c.wmu.Unlock()
	// A non-empty buffer already has a wake pending (or the flusher is
	// about to take it), so only the first frame of a batch signals.
	if wasEmpty {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// enqueueFrames queues encoded frames together, so nothing from another
// caller comes between them (an atomic batch).
func (c *Client) enqueueFrames(frames [][]byte) {
	c.wmu.Lock()
	wasEmpty := len(c.wbuf) == 0
	for _, frame := range frames {
		c.wbuf = append(c.wbuf, frame...)
	}
	c.wmu.Unlock()
	if wasEmpty {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// enqueueAwaited sends a request whose caller waits for the answer. When
// nothing else is queued or being written, the caller writes its frame
// itself rather than waking the flusher, as it reads its answer itself
// when nobody else reads (await): no goroutine hand-off either way.
// Otherwise it queues like enqueue, behind what is already waiting.
func (c *Client) enqueueAwaited(id uint32, m wire.Message) {
	c.wmu.Lock()
	if c.writing || len(c.wbuf) > 0 {
		c.wmu.Unlock()
		c.enqueue(id, m)
		return
	}
	c.writing = true
	c.direct = wire.Append(c.direct[:0], id, m)
	c.wmu.Unlock()
	_, err := c.conn.Write(c.direct)
	c.lastSend.Store(c.now())
	c.finishWrite()
	if err != nil {
		c.shutdown(c.lost(fmt.Errorf("write: %w", err)))
	}
}

// finishWrite ends a write and hands the flusher what was queued
// meanwhile (its wake-up then found a write under way and waited).
func (c *Client) finishWrite() {
	c.wmu.Lock()
	c.writing = false
	queued := len(c.wbuf) > 0
	c.wmu.Unlock()
	if queued {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// flushLoop writes whatever is buffered, one write per wake-up. While a
// write is in the kernel, new frames accumulate in the other buffer, so a
// pipelined producer sends many frames per syscall without any timer.
func (c *Client) flushLoop() {
	defer c.wg.Done()
	var out []byte
	recent := 0 // a slowly decaying maximum of batch sizes
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.wmu.Lock()
		if c.writing {
			// An awaited call is writing its own frame; it wakes the
			// flusher again when done if frames were queued meanwhile.
			c.wmu.Unlock()
			continue
		}
		out, c.wbuf = c.wbuf, out[:0]
		c.writing = len(out) > 0
		c.wmu.Unlock()
		if len(out) == 0 {
			continue
		}
		_, err := c.conn.Write(out)
		c.finishWrite()
		if err != nil {
			c.shutdown(c.lost(fmt.Errorf("write: %w", err)))
			return
		}
		c.lastSend.Store(c.now())
		recent = max(len(out), recent-recent/16)
		if cap(out) > maxRetainedWriteBuffer && cap(out) > 4*recent {
			out = nil
		}
	}
}

// now is the client's monotonic clock: wall-clock steps cannot make the
// keepalive fire early or late (DESIGN I6).
func (c *Client) now() int64 { return int64(time.Since(c.epoch)) }

// keepaliveLoop pings when nothing was written for interval (a third of
// the server's idle timeout), so an idle but healthy connection is not
// closed by the server.
func (c *Client) keepaliveLoop(interval time.Duration) {
	defer c.wg.Done()
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-timer.C:
		}
		idle := time.Duration(c.now() - c.lastSend.Load())
		if idle < interval {
			timer.Reset(interval - idle)
			continue
		}
		c.sendKeepalive()
		timer.Reset(interval)
	}
}

// sendKeepalive sends one Ping unless the previous keepalive is still
// unanswered: the server is then busy or gone, and more pings would only
// pile up.
func (c *Client) sendKeepalive() {
	if c.pingID.Load() != 0 {
		return
	}
	id, err := c.register(entry{kind: kindKeepalive})
	if err != nil {
		return
	}
	c.pingID.Store(id)
	c.enqueue(id, &wire.Ping{Payload: uint64(c.now())})
}
