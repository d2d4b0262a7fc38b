package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for ProducerOptions.
const (
	// DefaultReconnectTimeout is how long an idempotent producer keeps
	// redialling after its connection failed.
	DefaultReconnectTimeout = 30 * time.Second
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
	// Idempotence: the zero value, IdempotenceOn, stamps every record
	// whose partition the producer can know with the producer's id and a
	// sequence, so that resends after a reconnect are stored once
	// (IdempotenceOn says which records). IdempotenceOff sends records
	// unstamped and never reconnects (at-least-once).
	Idempotence Idempotence
	// Name identifies the producer to the broker (1 to 128 bytes). The
	// default is a random name, so two producers never fence each other.
	// A stable name lets a restarted process continue the sequences of
	// the previous one (ProducerInit reports where they stand) and fences
	// it: only the newest producer of a name may send.
	Name string
	// ReconnectTimeout is how long an idempotent producer keeps
	// redialling (with backoff) after its connection failed, before it
	// fails the records it holds and stops; default
	// DefaultReconnectTimeout, negative: it never reconnects.
	ReconnectTimeout time.Duration
}

// Result is the outcome of one Send, delivered on Producer.Results in
// the order of the Sends.
type Result struct {
	Ack      Ack   // where the record was stored, when Err is nil
	Err      error // the server's refusal (a *wire.Error, typed as for Produce), or why the connection failed
	Sequence uint64
}

// Producer sends records to one Destination without waiting for each ack: up
// to its window of records are in flight on the connection at once, and
// their frames are batched into few writes. It is safe for concurrent
// use; records sent from one goroutine are stored in the order sent.
//
// Every record that Send accepts gets exactly one Result. A failure is a
// Result with Err set, never a silent loss.
//
// An idempotent producer (the default) stamps each record whose
// partition it can know and keeps it until it is acknowledged. When its
// connection fails, it redials the Client's seeds with the Client's
// Options (its own connection from then on, closed by Close), announces
// itself again and resends what it kept, in order, with the original
// sequences: a record the broker had stored comes back as an Ack with
// Duplicate set and the first copy's offset, so each record is stored
// once and in order. A record a cluster member refuses as not_leader or
// no_leader is resent the same way to its partition's leader (the
// package documentation, Clusters). A record refused by the broker fails
// alone: the producer renumbers the ones it sent after it, which the
// broker did not store, and resends them in order. Unstamped records
// (routed by subject, keyless to a stream of several partitions, or to a
// stream whose partition count the producer cannot read) are
// at-least-once: after a connection failure they fail, and may have
// been stored.
type Producer struct {
	origin  *Client                // the connection it was made on
	conn    atomic.Pointer[Client] // its home connection: origin, or its own; partitions led elsewhere use idem.route
	opts    ProducerOptions
	target  target
	stream  string        // the destination's stream name ("" when routed by subject)
	nameErr error         // a bad stream name or option, reported by every Send
	tokens  chan struct{} // one per record Send accepted whose Result is not yet on results
	results chan Result
	closed  atomic.Bool

	prepareMu sync.Mutex  // the first Send's ProducerInit and partition count
	prepared  atomic.Bool // prepare succeeded: idempotence below is final

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

	idem idempotentState // resync.go
}

type slot struct {
	done   bool
	result Result
	kept   keptRecord // an idempotent record's resend state
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
	if opts.ReconnectTimeout == 0 {
		opts.ReconnectTimeout = DefaultReconnectTimeout
	}
	compressor, err := newCompressor(opts.Compression, opts.CompressMinBytes)
	if err == nil && opts.Name != "" {
		err = checkProducerName(opts.Name)
	}
	if opts.Name == "" {
		opts.Name = randomProducerName()
	}
	p := &Producer{
		origin: c, opts: opts, nameErr: err,
		tokens:  make(chan struct{}, window),
		results: make(chan Result, window),
		ring:    make([]slot, window),
		enc:     encoder{compressor: compressor},
	}
	p.conn.Store(c)
	p.idem.drained = sync.NewCond(&p.mu)
	return p
}

// Results returns the channel of results, in the order of the Sends. It
// is buffered to the window and closed after Close, once the last result
// is on it. Read it: once the window's worth of results is waiting
// unread, Send blocks (Flush and Close do not).
func (p *Producer) Results() <-chan Result { return p.results }

// Send queues record and returns as soon as it is on its way: its Result
// comes on Results. It blocks while the window is full, and while an
// idempotent producer reconnects or repairs its sequences. It returns an
// error only when the record was not sent: the producer or connection is
// closed, ctx ended, the producer was fenced or gave up reconnecting, or
// the record is invalid or too large. The first Send of an idempotent
// producer waits for the broker's ProducerInit answer (and, for a
// ToStream destination, the stream's partition count).
func (p *Producer) Send(ctx context.Context, record Record) error {
	if err := p.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.prepare(ctx); err != nil {
		return err
	}
	if err := p.acquireToken(ctx); err != nil {
		return err
	}
	for {
		if err := p.fatal(); err != nil {
			<-p.tokens
			return err
		}
		c := p.connFor(&record)
		if err := c.acquireWindow(ctx); err != nil {
			if ctx.Err() != nil || !p.reconnects() {
				<-p.tokens
				return err
			}
			p.requestResync(resyncReconnect)
		} else if retry, err := p.send(c, &record); !retry {
			return err
		}
		if err := p.awaitResume(ctx); err != nil {
			<-p.tokens
			return err
		}
	}
}

// TrySend is Send without blocking: it returns ErrWindowFull when the
// window is full, or while an idempotent producer reconnects or repairs
// its sequences. Only the first TrySend of an idempotent producer waits,
// for ProducerInit, as the first Send does.
func (p *Producer) TrySend(record Record) error {
	if err := p.check(); err != nil {
		return err
	}
	if err := p.prepare(context.Background()); err != nil {
		return err
	}
	select {
	case p.tokens <- struct{}{}:
	default:
		return ErrWindowFull
	}
	c := p.connFor(&record)
	select {
	case c.window <- struct{}{}:
	default:
		<-p.tokens
		return ErrWindowFull
	}
	retry, err := p.send(c, &record)
	if retry {
		<-p.tokens
		return ErrWindowFull
	}
	return err
}

func (p *Producer) check() error {
	if p.closed.Load() {
		return fmt.Errorf("%w: producer", ErrClosed)
	}
	if p.nameErr != nil {
		return p.nameErr
	}
	if err := p.fatal(); err != nil {
		return err
	}
	if p.reconnects() {
		return nil
	}
	select {
	case <-p.conn.Load().done:
		return p.conn.Load().Err()
	default:
		return nil
	}
}

// acquireToken takes a place in the producer's window.
func (p *Producer) acquireToken(ctx context.Context) error {
	select {
	case p.tokens <- struct{}{}:
		return nil
	default:
	}
	var done <-chan struct{}
	if !p.reconnects() {
		done = p.conn.Load().done
	}
	select {
	case p.tokens <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return p.conn.Load().Err()
	}
}

// send frames the record, gives it the next sequence and writes it on c.
// The caller holds one place in each window: send gives back c's on
// failure and on retry, and the producer's on failure. retry asks the
// caller to wait for a resync and send again.
func (p *Producer) send(c *Client, r *Record) (retry bool, err error) {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	plan, err := p.plan(c, r)
	if err == nil && !plan.paused {
		err = p.enc.encode(c, p.target, plan.partition, r, plan.stamp)
	}
	var seq uint64
	var attempt uint32
	if err == nil && !plan.paused {
		seq, attempt, err = p.begin(&plan)
	}
	if plan.paused || err != nil {
		<-c.window
		if err != nil {
			<-p.tokens
		}
		return plan.paused, err
	}
	id, err := c.register(entry{kind: kindProducer, producer: p, seq: seq, attempt: attempt})
	if err != nil {
		p.rollback(seq, &plan)
		<-c.window
		if p.reconnects() {
			p.requestResync(resyncReconnect)
			return true, nil
		}
		<-p.tokens
		return false, err
	}
	c.enqueue(id, &p.enc.msg)
	return false, nil
}

// begin takes the next result sequence for a framed record and, for a
// stamped one, its partition sequence (restamping the body if a refusal
// rewound it since plan), and keeps the body for resends.
func (p *Producer) begin(plan *sendPlan) (uint64, uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return 0, 0, fmt.Errorf("%w: producer", ErrClosed)
	}
	seq := p.next
	p.next++
	s := &p.ring[seq%uint64(len(p.ring))]
	s.done, s.result = false, Result{}
	if !plan.stamp.idempotent {
		s.kept.clear()
		return seq, 0, nil
	}
	log := p.idem.logLocked(plan.partition)
	if log.next != plan.stamp.sequence {
		plan.stamp.sequence = log.next
		p.enc.msg.BodyCRC = restamp(p.enc.body, plan.stamp.producerID, log.next)
	}
	log.next++
	s.kept.keep(plan.partition, plan.stamp.sequence, &p.enc)
	p.idem.inFlight++
	return seq, s.kept.attempt, nil
}

// rollback withdraws the sequence of a record that was never registered.
// sendMu is held, so it is still the newest sequence.
func (p *Producer) rollback(seq uint64, plan *sendPlan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = seq
	if s := &p.ring[seq%uint64(len(p.ring))]; s.kept.kept {
		p.idem.logLocked(plan.partition).next = s.kept.sequence
		p.idem.inFlight--
		s.kept.kept = false
	}
	p.wakeFlushersLocked()
	p.closeIfDrainedLocked()
}

// complete records the outcome of attempt of a sequence. It runs on the
// reader goroutine (or in shutdown) and never blocks: results go on the
// channel only if there is room, else a pump goroutine waits for the
// reader of Results. A kept record that failed in a way the producer
// repairs (its connection, a sequence gap) is not complete yet: it waits
// for the resync to send it again.
func (p *Producer) complete(seq uint64, attempt uint32, ack Ack, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.ring[seq%uint64(len(p.ring))]
	if s.done {
		return
	}
	if s.kept.kept {
		var done bool
		if done, err = p.settleKeptLocked(s, attempt, ack, err); !done {
			return
		}
	}
	p.finishLocked(seq, ack, err)
}

// finishLocked completes a sequence with its result.
func (p *Producer) finishLocked(seq uint64, ack Ack, err error) {
	s := &p.ring[seq%uint64(len(p.ring))]
	s.done, s.result = true, Result{Ack: ack, Err: err, Sequence: seq}
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
	s := &p.ring[p.head%uint64(len(p.ring))]
	s.done, s.result = false, Result{}
	s.kept.clear()
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
	p.idem.wait()
	p.closeRoutes()
	if c := p.conn.Load(); c != p.origin {
		c.Close()
	}
	return err
}
