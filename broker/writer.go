package broker

import (
	"sync"

	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// ackGroup is one run of produce requests appended with one AppendBatch:
// their offsets are ticket.First, ticket.First+1, … in request order, and
// their request ids sit in the writer's id ring at [start, start+count).
type ackGroup struct {
	ticket    segment.Ticket
	partition uint32
	start     int
	count     int
}

// writer owns the write side of a connection. It waits for the tickets of
// ack groups in order, and writes every reply that is ready — acks of all
// completed groups, errors, consume answers — in one write.
type writer struct {
	conn    loop.Conn
	credits *credits
	ids     []uint32 // ring of produce request ids, one per credit
	tail    int      // next free slot (touched by the session's reader only)

	acks   chan ackGroup
	frames chan []byte
	done   chan struct{} // closed by the session: no more input
	exited chan struct{}

	buf     []byte
	pending []ackGroup
}

func newWriter(conn loop.Conn, window int) *writer {
	w := &writer{conn: conn, credits: newCredits(window), ids: make([]uint32, window),
		acks: make(chan ackGroup, window), frames: make(chan []byte, 256),
		done: make(chan struct{}), exited: make(chan struct{}), buf: make([]byte, 0, 64<<10)}
	go w.run()
	return w
}

// pushAcks queues a run; the caller already holds count credits, so the
// ring has room. Called from the session's reader only.
func (w *writer) pushAcks(ticket segment.Ticket, partition uint32, ids []uint32) {
	start := w.tail
	for _, id := range ids {
		w.ids[w.tail] = id
		w.tail = (w.tail + 1) % len(w.ids)
	}
	select {
	case w.acks <- ackGroup{ticket: ticket, partition: partition, start: start, count: len(ids)}:
	case <-w.exited:
	}
}

// frame queues an encoded frame (or several) to send; dropped when the
// connection already broke.
func (w *writer) frame(b []byte) {
	select {
	case w.frames <- b:
	case <-w.exited:
	}
}

func (w *writer) run() {
	defer close(w.exited)
	defer func() { _ = w.conn.Close() }()
	closing := false
	for {
		w.collect()
		w.encodeCompleted()
		if len(w.buf) > 0 {
			if err := w.conn.Write(w.buf); err != nil {
				w.discard()
				return
			}
			w.buf = w.buf[:0]
			continue
		}
		if closing && len(w.pending) == 0 && len(w.acks) == 0 && len(w.frames) == 0 {
			return
		}
		closing = w.wait(closing)
	}
}

// collect moves everything queued without blocking.
func (w *writer) collect() {
	for {
		select {
		case g := <-w.acks:
			w.pending = append(w.pending, g)
		case f := <-w.frames:
			w.buf = append(w.buf, f...)
		default:
			return
		}
	}
}

// wait blocks until something is ready and reports whether input ended.
func (w *writer) wait(closing bool) bool {
	var headDone <-chan struct{}
	if len(w.pending) > 0 {
		headDone = w.pending[0].ticket.Done()
	}
	done := w.done
	if closing {
		done = nil
	}
	select {
	case g := <-w.acks:
		w.pending = append(w.pending, g)
	case f := <-w.frames:
		w.buf = append(w.buf, f...)
	case <-headDone:
	case <-done:
		return true
	}
	return closing
}

// encodeCompleted turns the completed groups at the head of the queue into
// ProduceAck frames (or, when the append failed, Error frames).
func (w *writer) encodeCompleted() {
	n := 0
	for n < len(w.pending) && completed(w.pending[n].ticket) {
		w.encodeGroup(w.pending[n])
		n++
	}
	if n > 0 {
		w.pending = append(w.pending[:0], w.pending[n:]...)
	}
}

func completed(t segment.Ticket) bool {
	select {
	case <-t.Done():
		return true
	default:
		return false
	}
}

func (w *writer) encodeGroup(g ackGroup) {
	err := g.ticket.Err()
	var failure *wire.Error
	if err != nil {
		failure = storageError(err)
	}
	for i := 0; i < g.count; i++ {
		id := w.ids[(g.start+i)%len(w.ids)]
		if failure != nil {
			w.buf = wire.Append(w.buf, id, failure)
			continue
		}
		w.buf = wire.AppendProduceAck(w.buf, id, g.partition, g.ticket.First+uint64(i))
	}
	w.credits.release(g.count)
}

// discard gives back the credits of groups that will never be answered
// (the connection broke), so a reader blocked on credits wakes up.
func (w *writer) discard() {
	w.credits.fail()
	for {
		select {
		case <-w.acks:
		case <-w.frames:
		default:
			return
		}
	}
}

// close tells the writer no more input comes and waits until it has
// answered everything queued and closed the connection.
func (w *writer) close() {
	close(w.done)
	<-w.exited
}

// credits bounds produce requests read but not yet answered.
type credits struct {
	mu        sync.Mutex
	cond      *sync.Cond
	available int
	broken    bool
}

func newCredits(n int) *credits {
	c := &credits{available: n}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// acquire blocks until n credits are free; false when the connection
// broke meanwhile.
func (c *credits) acquire(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.available < n && !c.broken {
		c.cond.Wait()
	}
	if c.broken {
		return false
	}
	c.available -= n
	return true
}

func (c *credits) release(n int) {
	c.mu.Lock()
	c.available += n
	c.mu.Unlock()
	c.cond.Broadcast()
}

func (c *credits) fail() {
	c.mu.Lock()
	c.broken = true
	c.mu.Unlock()
	c.cond.Broadcast()
}
