package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// ProducerOptions configure a Producer.
type ProducerOptions struct {
	// Window is the number of records this producer keeps un-acked;
	// default (and at most) the connection's window, Client.Window.
	Window int
	// Compression is what payloads are compressed with; the zero value is
	// lz4, CompressNone turns it off.
	Compression Compression
	// CompressMinBytes is the shortest payload worth compressing: 0 means
	// codec.DefaultMinBytes (128 bytes), a negative value every payload.
	CompressMinBytes int
}

// Result is the outcome of one Send, delivered on Producer.Results in
// the order of the Sends.
type Result struct {
	Ack      Ack   // where the record was stored, when Err is nil
	Err      error // the server's *wire.Error, or why the connection failed
	Sequence uint64
}

// Producer sends records to one Destination without waiting for each ack: up
// to its window of records are in flight on the connection at once, and
// their frames are batched into few writes. It is safe for concurrent
// use; records sent from one goroutine are stored in the order sent.
//
// Every record that Send accepts gets exactly one Result. A failure is a
// Result with Err set, never a silent loss; after a connection failure a
// failed record may still have been stored (at-least-once).
type Producer struct {
	c       *Client
	target  target
	nameErr error         // a bad stream name or option, reported by every Send
	tokens  chan struct{} // one per record Send accepted whose Result is not yet on results
	results chan Result
	closed  atomic.Bool

	sendMu sync.Mutex // orders sends: sequence, request id and frame bytes go out together
	enc    encoder

	mu         sync.Mutex // guards what follows; taken by the reader on every ack
	closing    bool
	ring       []slot   // result of sequence s at ring[s % len(ring)]
	next       uint64   // sequence of the next Send
	head       uint64   // oldest sequence whose Result is not on results
	doneThru   uint64   // every sequence below is complete
	pumping    bool     // a pump goroutine owns delivery to results
	chanClosed bool     // results is closed
	waiters    []waiter // Flush calls
	failures   int      // failed records since the last Flush reported them
	firstFail  error
}

type slot struct {
	done   bool
	result Result
}

type waiter struct {
	target uint64
	ch     chan struct{}
}

// NewProducer returns a producer for stream on this connection: it is
// NewProducerTo(ToStream(stream), opts), so the broker picks each
// record's partition from its key.
func (c *Client) NewProducer(stream string, opts ProducerOptions) *Producer {
	return c.NewProducerTo(ToStream(stream), opts)
}

func (c *Client) newProducer(opts ProducerOptions) *Producer {
	window := opts.Window
	if window <= 0 || window > c.Window() {
		window = c.Window()
	}
	compressor, err := newCompressor(opts.Compression, opts.CompressMinBytes)
	return &Producer{
		c: c, nameErr: err,
		tokens:  make(chan struct{}, window),
		results: make(chan Result, window),
		ring:    make([]slot, window),
		enc:     encoder{compressor: compressor},
	}
}

// Results returns the channel of results, in the order of the Sends. It
// is buffered to the window and closed after Close, once the last result
// is on it. Read it: once the window's worth of results is waiting
// unread, Send blocks (Flush and Close do not).
func (p *Producer) Results() <-chan Result { return p.results }

// Send queues record and returns as soon as it is on its way: its Result
// comes on Results. It blocks while the window is full. It returns an
// error only when the record was not sent: the producer or connection is
// closed, ctx ended, or the record is invalid or too large.
func (p *Producer) Send(ctx context.Context, record Record) error {
	if err := p.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.acquire(ctx); err != nil {
		return err
	}
	return p.send(&record)
}

// TrySend is Send without blocking: it returns ErrWindowFull when the
// window is full.
func (p *Producer) TrySend(record Record) error {
	if err := p.check(); err != nil {
		return err
	}
	select {
	case p.tokens <- struct{}{}:
	default:
		return ErrWindowFull
	}
	select {
	case p.c.window <- struct{}{}:
	default:
		<-p.tokens
		return ErrWindowFull
	}
	return p.send(&record)
}

func (p *Producer) check() error {
	if p.closed.Load() {
		return fmt.Errorf("%w: producer", ErrClosed)
	}
	if p.nameErr != nil {
		return p.nameErr
	}
	select {
	case <-p.c.done:
		return p.c.Err()
	default:
		return nil
	}
}

// acquire takes a place in the producer's window, then in the
// connection's (shared with other producers and awaited produces).
func (p *Producer) acquire(ctx context.Context) error {
	select {
	case p.tokens <- struct{}{}:
	default:
		select {
		case p.tokens <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.done:
			return p.c.Err()
		}
	}
	if err := p.c.acquireWindow(ctx); err != nil {
		<-p.tokens
		return err
	}
	return nil
}

// send frames the record, gives it the next sequence and queues it. The
// caller holds one place in each window; send gives them back on failure.
func (p *Producer) send(r *Record) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	err := p.enc.encode(p.c, p.target, r)
	var seq uint64
	if err == nil {
		seq, err = p.begin()
	}
	if err != nil {
		<-p.c.window
		<-p.tokens
		return err
	}
	id, err := p.c.register(entry{kind: kindProducer, producer: p, seq: seq})
	if err != nil {
		p.rollback(seq)
		<-p.c.window
		<-p.tokens
		return err
	}
	p.c.enqueue(id, &p.enc.msg)
	return nil
}

func (p *Producer) begin() (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return 0, fmt.Errorf("%w: producer", ErrClosed)
	}
	seq := p.next
	p.next++
	p.ring[seq%uint64(len(p.ring))] = slot{}
	return seq, nil
}

// rollback withdraws the sequence of a record that was never registered.
// sendMu is held, so it is still the newest sequence.
func (p *Producer) rollback(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = seq
	p.wakeFlushersLocked()
	p.closeIfDrainedLocked()
}

// complete records the outcome of a sequence. It runs on the reader
// goroutine (or in shutdown) and never blocks: results go on the channel
// only if there is room, else a pump goroutine waits for the reader of
// Results.
func (p *Producer) complete(seq uint64, ack Ack, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring[seq%uint64(len(p.ring))] = slot{done: true, result: Result{Ack: ack, Err: err, Sequence: seq}}
	if err != nil {
		if p.failures == 0 {
			p.firstFail = err
		}
		p.failures++
	}
	for p.doneThru < p.next && p.ring[p.doneThru%uint64(len(p.ring))].done {
		p.doneThru++
	}
	p.wakeFlushersLocked()
	p.deliverLocked()
}

// deliverLocked moves complete results, in order, onto the channel.
func (p *Producer) deliverLocked() {
	for !p.pumping && p.head < p.doneThru {
		s := &p.ring[p.head%uint64(len(p.ring))]
		select {
		case p.results <- s.result:
			p.releaseHeadLocked()
		default:
			p.pumping = true
			go p.pump()
			return
		}
	}
	p.closeIfDrainedLocked()
}

func (p *Producer) releaseHeadLocked() {
	p.ring[p.head%uint64(len(p.ring))] = slot{}
	p.head++
	<-p.tokens
}

// pump delivers results while the channel is full, blocking on the
// application rather than on the connection's reader.
func (p *Producer) pump() {
	p.mu.Lock()
	for p.head < p.doneThru {
		result := p.ring[p.head%uint64(len(p.ring))].result
		p.mu.Unlock()
		p.results <- result
		p.mu.Lock()
		p.releaseHeadLocked()
	}
	p.pumping = false
	p.closeIfDrainedLocked()
	p.mu.Unlock()
}

func (p *Producer) closeIfDrainedLocked() {
	if p.closing && !p.pumping && !p.chanClosed && p.head == p.next {
		p.chanClosed = true
		close(p.results)
	}
}

func (p *Producer) wakeFlushersLocked() {
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if p.doneThru >= w.target || p.doneThru == p.next {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
}

// Flush waits until every record sent before it has its result (acked
// or failed), whether or not Results has been read. It returns ctx.Err()
// if ctx ends first; otherwise, if records failed since the previous
// Flush reported failures, an error counting them and wrapping the first
// (every failure is also on Results).
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.doneThru < p.next {
		w := waiter{target: p.next, ch: make(chan struct{})}
		p.waiters = append(p.waiters, w)
		p.mu.Unlock()
		select {
		case <-w.ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.failures == 0 {
		return nil
	}
	err := fmt.Errorf("ironbus client: %d record(s) failed; the first: %w", p.failures, p.firstFail)
	p.failures, p.firstFail = 0, nil
	return err
}

// Close stops accepting records, waits for the results of those sent
// (as Flush, and returns what Flush returns) and closes Results once the
// last of them is on it. It does not close the Client.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil
	}
	p.closing = true
	p.closed.Store(true)
	p.mu.Unlock()
	err := p.Flush(context.Background())
	p.mu.Lock()
	p.closeIfDrainedLocked()
	p.mu.Unlock()
	return err
}
