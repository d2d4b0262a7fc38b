package session

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/ring"
	"github.com/ironbus/ironbus/wire"
)

// ackGroup is one run of produce requests appended with one AppendBatch:
// their offsets are ticket.First, ticket.First+1, … in request order, and
// their request ids sit in the writer's id ring at [start, start+count).
type ackGroup struct {
	ticket    broker.Ticket
	partition uint32
	start     int
	count     int
	// answers, when set, are the run's replies one by one (duplicates,
	// refusals, silent records); nil: plain acks at consecutive offsets.
	answers []recordAnswer
}

// writer owns the write side of a connection. It waits for the tickets of
// ack groups in order, and writes every reply that is ready — acks of all
// completed groups, errors, consume answers — with one Write. Nothing that
// feeds it blocks: produce credits bound the ack groups, and the reply
// queue reports when it is over its limit so the session pauses reading.
type writer struct {
	conn    loop.Conn
	credits *credits
	// limit bounds the reply bytes queued before the session stops
	// reading (a client that sends requests and never reads the answers).
	limit int
	ids   []uint32 // ring of produce request ids, one per credit
	tail  int      // next free slot (touched by the session's reader only)

	// acks carries runs from the session's reader to the writer: an SPSC
	// ring (one push and one atomic store per run, no lock) sized by the
	// window, so the credits the reader holds guarantee it room.
	acks *ring.SPSC[ackGroup]
	// parked is set by the writer before it blocks; a push that finds it
	// set sends the one wake on signal, so a busy writer costs pushers no
	// channel operation at all.
	parked atomic.Bool
	wakeFn func() // w.wake, bound once: handed to every ticket
	// unsent counts the runs pushed whose acks have not yet been handed
	// to the connection: while it is zero, an ack the session writes
	// itself cannot overtake one of the writer's (session.flushRunLast).
	unsent atomic.Int64
	signal chan struct{} // a reply was queued, or a run completed while parked
	done   chan struct{} // closed by the session: no more input
	exited chan struct{}

	mu     sync.Mutex
	queued []outgoing
	// head is the first item of queued not yet collected: collect takes
	// up to one vectored item per write, and a consume answer queues one
	// per run, so shifting the rest down each time would be quadratic.
	head        int
	queuedBytes int
	onDrain     func() // one-shot: the queue fell below half its limit
	finished    bool   // the writer exited: vectored items are released at once

	buf     []byte
	pending []ackGroup
}

func newWriter(conn loop.Conn, window, limit int) *writer {
	w := &writer{conn: conn, credits: newCredits(window), limit: limit, ids: make([]uint32, window),
		acks: ring.NewSPSC[ackGroup](window), signal: make(chan struct{}, 1),
		done: make(chan struct{}), exited: make(chan struct{}), buf: make([]byte, 0, 64<<10),
		pending: make([]ackGroup, 0, window)}
	w.wakeFn = w.wake
	go w.run()
	return w
}

// pushAcks queues a run; the caller holds count credits, so both rings
// have room. Called from the session's reader only (the SPSC producer).
//
// It does not wake a parked writer: there is nothing to send until the
// ticket completes, and the completion wakes it (Ticket.OnDone). Waking it
// now as well cost every awaited produce a second wake-up of its writer.
func (w *writer) pushAcks(ticket broker.Ticket, partition uint32, ids []uint32, answers []recordAnswer) {
	start := w.tail
	for _, id := range ids {
		w.ids[w.tail] = id
		w.tail = (w.tail + 1) % len(w.ids)
	}
	group := ackGroup{ticket: ticket, partition: partition, start: start, count: len(ids), answers: answers}
	w.unsent.Add(1)
	for !w.acks.TryPush(group) {
		// Unreachable while credits hold (a run takes at least one of
		// the window's credits, and the ring has a slot per credit);
		// yield rather than drop if that reasoning is ever broken.
		select {
		case <-w.exited:
			return
		default:
			runtime.Gosched()
		}
	}
	ticket.OnDone(w.wakeFn)
}

// wake sends the writer its one wake if it is parked.
func (w *writer) wake() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}
}

// outgoing is one queued reply: encoded bytes, or a header and parts
// that alias memory (a mapped segment) the writer hands to the
// connection without copying, then gives back with done.
type outgoing struct {
	bytes []byte
	parts [][]byte
	done  func() // set for vectored items only
}

// frame queues an encoded frame (or several) and reports whether the queue
// is now over its limit. Never blocks.
func (w *writer) frame(b []byte) (over bool) {
	return w.push(outgoing{bytes: b}, len(b))
}

// vectored queues header followed by parts, sent in order with the other
// replies; done runs exactly once, when the connection no longer needs
// the parts (sent, copied, or the connection failed). Never blocks.
func (w *writer) vectored(header []byte, parts [][]byte, done func()) (over bool) {
	size := len(header)
	for _, part := range parts {
		size += len(part)
	}
	return w.push(outgoing{bytes: header, parts: parts, done: done}, size)
}

func (w *writer) push(item outgoing, size int) (over bool) {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		if item.done != nil {
			item.done()
		}
		return false
	}
	w.queued = append(w.queued, item)
	w.queuedBytes += size
	over = w.queuedBytes > w.limit
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
	return over
}

// abandon runs the done of every vectored item that will never be sent,
// now and later: the connection failed or the writer exited.
func (w *writer) abandon(head *outgoing) {
	if head != nil && head.done != nil {
		head.done()
	}
	w.mu.Lock()
	w.finished = true
	items := w.queued[w.head:]
	w.queued, w.head = nil, 0
	w.mu.Unlock()
	for _, item := range items {
		if item.done != nil {
			item.done()
		}
	}
}

// whenDrained calls fn once the reply queue is below half its limit (at
// once if it already is).
func (w *writer) whenDrained(fn func()) {
	w.mu.Lock()
	if w.queuedBytes <= w.limit/2 {
		w.mu.Unlock()
		fn()
		return
	}
	w.onDrain = fn
	w.mu.Unlock()
}

func (w *writer) run() {
	defer close(w.exited)
	defer func() { _ = w.conn.Close() }()
	defer w.abandon(nil)
	closing := false
	for {
		vectored := w.collect()
		runs := w.encodeCompleted()
		wrote := len(w.buf) > 0
		if wrote {
			if err := w.conn.Write(w.buf); err != nil {
				w.credits.fail()
				w.abandon(vectored)
				return
			}
			w.buf = w.buf[:0]
		}
		w.unsent.Add(-int64(runs))
		if vectored != nil {
			// The connection runs done itself, whatever the outcome.
			if err := w.conn.WriteVectored(vectored.bytes, vectored.parts, vectored.done); err != nil {
				w.credits.fail()
				return
			}
			continue
		}
		if wrote {
			continue
		}
		if closing && len(w.pending) == 0 && w.acks.Len() == 0 && w.empty() {
			return
		}
		closing = w.wait(closing)
	}
}

// collect moves what is queued into the write buffer without blocking,
// up to the first vectored item, which it takes off the queue and
// returns: its parts go to the connection as they are, after the buffer.
func (w *writer) collect() *outgoing {
	// pending has room for the whole window, and the ring and pending
	// together hold at most a window of runs: one PopBatch takes them all.
	w.pending = w.acks.PopBatch(w.pending)
	w.mu.Lock()
	var vectored *outgoing
	taken := 0
	for i := w.head; i < len(w.queued); i++ {
		item := w.queued[i]
		w.queued[i] = outgoing{}
		taken++
		size := len(item.bytes)
		if item.done != nil {
			for _, part := range item.parts {
				size += len(part)
			}
			w.queuedBytes -= size
			vectored = &item
			break
		}
		w.queuedBytes -= size
		w.buf = append(w.buf, item.bytes...)
	}
	w.head += taken
	switch {
	case w.head == len(w.queued):
		w.queued, w.head = w.queued[:0], 0
	case w.head > len(w.queued)/2:
		// Move the rest down once at least as many were taken: amortized
		// constant per item, and the slice does not grow without bound.
		rest := copy(w.queued, w.queued[w.head:])
		clear(w.queued[rest:])
		w.queued, w.head = w.queued[:rest], 0
	}
	var drained func()
	if w.queuedBytes <= w.limit/2 {
		drained = w.onDrain
		w.onDrain = nil
	}
	w.mu.Unlock()
	if drained != nil {
		drained()
	}
	return vectored
}

func (w *writer) empty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queued) == w.head
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
	w.parked.Store(true)
	if w.acks.Len() > 0 {
		// A run pushed before the flag was visible: take it now. A
		// pusher that did see the flag leaves one spare wake on signal,
		// which costs one extra pass.
		w.parked.Store(false)
		return closing
	}
	select {
	case <-w.signal:
	case <-headDone:
	case <-done:
		closing = true
	}
	w.parked.Store(false)
	return closing
}

// encodeCompleted turns the completed groups at the head of the queue into
// ProduceAck frames (or, when the append failed, Error frames), and
// returns how many it encoded.
func (w *writer) encodeCompleted() int {
	n := 0
	for n < len(w.pending) && completed(w.pending[n].ticket) {
		w.encodeGroup(w.pending[n])
		n++
	}
	if n > 0 {
		w.pending = append(w.pending[:0], w.pending[n:]...)
	}
	return n
}

func completed(t broker.Ticket) bool {
	select {
	case <-t.Done():
		return true
	default:
		return false
	}
}

func (w *writer) encodeGroup(g ackGroup) {
	// The group's ids may wrap around the end of the ring.
	end := g.start + g.count
	if g.answers != nil {
		if end <= len(w.ids) {
			w.buf = appendAnswers(w.buf, g.ticket, g.partition, w.ids[g.start:end], g.answers)
		} else {
			head := w.ids[g.start:]
			w.buf = appendAnswers(w.buf, g.ticket, g.partition, head, g.answers)
			w.buf = appendAnswers(w.buf, g.ticket, g.partition, w.ids[:end-len(w.ids)], g.answers[len(head):])
		}
		w.credits.release(g.count)
		return
	}
	if end <= len(w.ids) {
		w.buf = appendRunAnswers(w.buf, g.ticket, g.partition, w.ids[g.start:end], 0)
	} else {
		head := w.ids[g.start:]
		w.buf = appendRunAnswers(w.buf, g.ticket, g.partition, head, 0)
		w.buf = appendRunAnswers(w.buf, g.ticket, g.partition, w.ids[:end-len(w.ids)], uint64(len(head)))
	}
	w.credits.release(g.count)
}

// appendRunAnswers appends the answers to records skip, skip+1, … of a
// completed run, whose request ids are ids: a ProduceAck per record, or
// the append's error for each.
func appendRunAnswers(buf []byte, ticket broker.Ticket, partition uint32, ids []uint32, skip uint64) []byte {
	var failure *wire.Error
	if err := ticket.Err(); err != nil {
		failure = wireError(err)
	}
	for i, id := range ids {
		if failure != nil {
			buf = wire.Append(buf, id, failure)
			continue
		}
		buf = wire.AppendProduceAck(buf, id, partition, ticket.First+skip+uint64(i))
	}
	return buf
}

// close tells the writer no more input comes and waits until it has
// answered everything queued and closed the connection.
func (w *writer) close() {
	close(w.done)
	<-w.exited
}

// credits bounds produce requests read but not yet answered. It never
// blocks: a reader that finds too few registers a callback for when enough
// are back.
type credits struct {
	mu        sync.Mutex
	available int
	broken    bool
	waitFor   int
	waiter    func()
}

func newCredits(n int) *credits { return &credits{available: n} }

// tryAcquire takes n credits if they are free.
func (c *credits) tryAcquire(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken || c.available < n {
		return false
	}
	c.available -= n
	return true
}

// whenAvailable calls fn once n credits are free or the connection broke
// (at once if so already).
func (c *credits) whenAvailable(n int, fn func()) {
	c.mu.Lock()
	if c.broken || c.available >= n {
		c.mu.Unlock()
		fn()
		return
	}
	c.waitFor, c.waiter = n, fn
	c.mu.Unlock()
}

func (c *credits) release(n int) {
	c.mu.Lock()
	c.available += n
	c.notifyLocked()
}

func (c *credits) fail() {
	c.mu.Lock()
	c.broken = true
	c.notifyLocked()
}

// notifyLocked releases c.mu and runs a waiter whose need is met.
func (c *credits) notifyLocked() {
	var fn func()
	if c.waiter != nil && (c.broken || c.available >= c.waitFor) {
		fn, c.waiter = c.waiter, nil
	}
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (c *credits) isBroken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}
