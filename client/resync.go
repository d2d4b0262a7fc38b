package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// An idempotent Producer keeps every stamped record until it is acked,
// and repairs what the pipeline cannot: a broken connection (redial,
// ProducerInit, resend with the original sequences, so the broker answers
// what it had stored as duplicates) and a sequence gap left by a refused
// record (wait for every record in flight to be answered, then renumber
// the ones the broker did not store and resend them in order). Both
// repairs run in one goroutine, the resync, while Send waits.
//
// The sequence invariant: on each partition the broker stores this
// producer's sequences densely, and a sequence it stored is never given
// to another record. The producer therefore renumbers only records the
// broker answered with a gap (nothing stored), and starts them at or
// above every sequence the broker may hold: the floor (acked sequences,
// the broker's own expected sequence in gap answers), the sequences of
// records whose fate is unknown, and the position ProducerInit reports.

// Reconnect backoff bounds, and the longest a resend refused as busy
// waits for the broker.
const (
	reconnectBackoffMin = 50 * time.Millisecond
	reconnectBackoffMax = 2 * time.Second
	maxRetryAfter       = 5 * time.Second
)

// maxAttempts bounds the sends of one record: a broker whose sequence
// keeps disagreeing after that many repairs gets the gap as the record's
// error rather than a producer repairing forever.
const maxAttempts = 16

// keptState is where a kept record stands.
type keptState uint8

const (
	keptSent   keptState = iota // an attempt is in flight on the current connection
	keptParked                  // answered with a gap: not stored; renumber and resend
	keptLost                    // its connection failed unanswered: resend as it is
)

// keptRecord is what a resend of a stamped record needs. body's buffer
// stays with the ring slot, so keeping records allocates nothing in
// steady state.
type keptRecord struct {
	kept      bool
	state     keptState
	uncertain bool   // an earlier attempt went unanswered: a copy may be stored
	messageID bool   // the record has a message id: a first send may be a duplicate
	attempt   uint32 // 1 for the first send; replies to older attempts are stale
	// redirected is when a member first refused the record as not (or
	// no longer) leading: from then on it follows the leadership for up
	// to ReconnectTimeout, however many attempts that takes.
	redirected time.Time
	partition  uint32
	sequence   uint64
	crc        uint32
	options    wire.ProduceOptions
	body       []byte
}

// maxKeptBuffer: a slot's body buffer grown past this by a large record
// is dropped when the record is done, rather than kept for good.
const maxKeptBuffer = 64 << 10

// keep takes the encoder's framed record: the body buffers are swapped,
// and the message keeps pointing at the bytes, now the slot's.
func (k *keptRecord) keep(partition uint32, sequence uint64, enc *encoder) {
	k.body, enc.body = enc.body, k.body[:0]
	enc.msg.Body = k.body
	k.kept, k.state, k.attempt, k.messageID = true, keptSent, 1, enc.hasMessage
	k.partition, k.sequence, k.crc, k.options = partition, sequence, enc.msg.BodyCRC, enc.msg.Options
}

func (k *keptRecord) clear() {
	body := k.body[:0]
	if cap(body) > maxKeptBuffer {
		body = nil
	}
	*k = keptRecord{body: body}
}

// logState is where the producer's sequence stands on one partition.
type logState struct {
	next    uint64 // the sequence of the next record numbered
	floor   uint64 // no sequence below is free: the broker may hold it
	expired bool   // the broker reported the state expired: restart from its position
}

// idempotentState is a Producer's identity and repair state, guarded by
// Producer.mu.
type idempotentState struct {
	on         atomic.Bool // records are stamped; settled by prepare
	known      bool        // id is set
	id         uint64
	epoch      uint32
	partitions uint32 // the stream's partition count; 0: unknown
	positions  map[uint32]uint64
	logs       map[uint32]*logState

	inFlight int        // kept records in keptSent
	drained  *sync.Cond // on Producer.mu: inFlight reached 0
	paused   bool       // Send waits for resumed
	resumed  chan struct{}
	running  bool // the resync goroutine runs
	wanted   bool // another pass is needed
	reinit   bool // send ProducerInit (the broker forgot the producer's state)
	fatal    error
	failed   atomic.Bool // fatal is set
	// retryAfter is how long the next resend waits: a resend was refused
	// as busy.
	retryAfter time.Duration
	order      []uint64 // resync scratch: the sequences to resend
	wg         sync.WaitGroup
	route      producerRoutes // producerroute.go
}

// logLocked returns the state of partition, seeded from the broker's
// position.
func (st *idempotentState) logLocked(partition uint32) *logState {
	log := st.logs[partition]
	if log == nil {
		if st.logs == nil {
			st.logs = map[uint32]*logState{}
		}
		position := st.positions[partition]
		log = &logState{next: position, floor: position}
		st.logs[partition] = log
	}
	return log
}

// wait waits for the resync goroutine to end.
func (st *idempotentState) wait() { st.wg.Wait() }

// reconnects reports whether the producer redials a failed connection.
func (p *Producer) reconnects() bool { return p.idem.on.Load() && p.opts.ReconnectTimeout > 0 }

// fatal returns the error that stopped the producer, nil while it runs.
func (p *Producer) fatal() error {
	if !p.idem.failed.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idem.fatal
}

// prepare settles, on the first Send, whether records are stamped: it
// reads the stream's partition count and announces the producer with
// ProducerInit.
func (p *Producer) prepare(ctx context.Context) error {
	if p.prepared.Load() {
		return nil
	}
	p.prepareMu.Lock()
	defer p.prepareMu.Unlock()
	if p.prepared.Load() {
		return nil
	}
	var dial dialState
	for {
		on, count, info, err := p.announce(ctx, p.conn.Load())
		if err != nil && errors.Is(err, ErrConnectionLost) && p.opts.Idempotence == IdempotenceOn && p.opts.ReconnectTimeout > 0 && ctx.Err() == nil {
			// The connection broke before the producer was announced: it
			// has nothing in flight, so a new connection simply starts it.
			fresh, dialErr := p.redial(&dial)
			if dialErr != nil {
				return dialErr
			}
			if old := p.conn.Swap(fresh); old != p.origin {
				old.Close()
			}
			continue
		}
		if err != nil {
			return err
		}
		p.mu.Lock()
		if on {
			p.idem.partitions = count
			p.applyIdentityLocked(info)
		}
		p.idem.on.Store(on)
		p.mu.Unlock()
		p.prepared.Store(true)
		return nil
	}
}

// announce decides whether the producer is idempotent on c and, if so,
// learns the stream's partition count (for a keyed destination) and sends
// ProducerInit.
func (p *Producer) announce(ctx context.Context, c *Client) (on bool, count uint32, info *wire.ProducerInfo, err error) {
	on = p.opts.Idempotence == IdempotenceOn && c.producersServed() && !p.target.bySubject
	if on && p.target.partition == AnyPartition {
		if count, err = c.partitionCount(ctx, p.stream); err != nil {
			return false, 0, nil, err
		}
		on = count > 0
	}
	if on {
		info, err = c.producerInit(ctx, p.opts.Name)
		if on = !notServed(err); on && err != nil {
			return false, 0, nil, err
		}
	}
	return on, count, info, nil
}

// applyIdentityLocked takes a ProducerInfo and reports whether the id
// changed (the broker forgot the producer): sequences then start afresh.
func (p *Producer) applyIdentityLocked(info *wire.ProducerInfo) (changed bool) {
	changed = p.idem.known && info.ID != p.idem.id
	p.idem.known, p.idem.id, p.idem.epoch = true, info.ID, info.Epoch
	p.idem.positions = map[uint32]uint64{}
	for _, position := range info.Positions {
		if string(position.Stream) == p.stream {
			p.idem.positions[position.Partition] = position.NextSequence
		}
	}
	if changed {
		clear(p.idem.logs)
	}
	return changed
}

// sendPlan is what send decided under the lock before framing a record.
type sendPlan struct {
	paused    bool // a resync runs, or the connection changed: wait and retry
	partition uint32
	stamp     stamp
}

func (p *Producer) plan(c *Client, r *Record) (sendPlan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	plan := sendPlan{partition: p.target.partition}
	switch {
	case p.idem.fatal != nil:
		return plan, p.idem.fatal
	case p.idem.paused:
		plan.paused = true
		return plan, nil
	}
	partition, stamped := uint32(0), false
	if p.idem.on.Load() {
		partition, stamped = stampedPartition(p.target, r.Key, p.idem.partitions)
	}
	route := p.conn.Load()
	if stamped {
		route = p.routeLocked(partition)
	}
	if route != c { // the connection or the partition's leader changed
		plan.paused = true
		return plan, nil
	}
	if !stamped {
		return plan, nil
	}
	plan.partition = partition
	plan.stamp = stamp{idempotent: true, producerID: p.idem.id, sequence: p.idem.logLocked(partition).next, epoch: p.epochLocked(c)}
	return plan, nil
}

// awaitResume waits while a resync runs.
func (p *Producer) awaitResume(ctx context.Context) error {
	p.mu.Lock()
	paused, resumed := p.idem.paused, p.idem.resumed
	p.mu.Unlock()
	if !paused {
		return nil
	}
	select {
	case <-resumed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resyncReason is what a resync is asked to repair.
type resyncReason uint8

const (
	resyncRepair    resyncReason = iota // a gap: drain, renumber, resend
	resyncReconnect                     // the connection failed: redial, announce again, resend
	resyncReinit                        // announce the producer again first
)

func (p *Producer) requestResync(reason resyncReason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requestResyncLocked(reason)
}

// requestResyncLocked pauses Send and starts the resync goroutine unless
// it runs, in which case it makes one more pass.
func (p *Producer) requestResyncLocked(reason resyncReason) {
	if reason == resyncReinit {
		p.idem.reinit = true
	}
	p.idem.wanted = true
	if !p.idem.paused {
		p.idem.paused = true
		p.idem.resumed = make(chan struct{})
	}
	if !p.idem.running {
		p.idem.running = true
		p.idem.wg.Add(1)
		go p.resync()
	}
}

// settleKeptLocked handles the answer to attempt of a kept record and
// reports whether the record is complete (acked, or failed for good),
// with the error its Result carries.
func (p *Producer) settleKeptLocked(s *slot, attempt uint32, ack Ack, err error) (bool, error) {
	k := &s.kept
	log := p.idem.logLocked(k.partition)
	if err == nil {
		// An ack for any attempt: the record is stored (a later attempt
		// would be answered as a duplicate, and is ignored).
		if k.state == keptSent {
			p.sentAnsweredLocked()
		}
		p.idem.route.backoff = 0
		if !ack.Duplicate {
			log.floor = max(log.floor, k.sequence+1)
		} else if k.attempt == 1 && !k.uncertain && !k.messageID {
			// A record sent for the first time cannot be a resend: the
			// broker's state for this producer disagrees with the position
			// it reported. Say so rather than report a record as stored
			// that never was.
			err = fmt.Errorf("%w: the broker answered the first send of the record as a duplicate of offset %d: its producer state disagrees with ProducerInit's positions", ErrSequenceGap, ack.Offset)
		}
		k.clear()
		return true, err
	}
	if attempt != k.attempt || k.state != keptSent {
		return false, nil // a stale attempt, or its connection already counted as lost
	}
	p.sentAnsweredLocked()
	code, werr := wireCode(err)
	retries := k.attempt < maxAttempts
	redirect := code == wire.CodeNotLeader || code == wire.CodeNoLeader
	if redirect {
		if k.redirected.IsZero() {
			k.redirected = time.Now()
		}
		retries = retries || time.Since(k.redirected) < p.opts.ReconnectTimeout
	}
	switch {
	case errors.Is(err, ErrConnectionLost) && p.reconnects():
		// Checked first: the error may wrap the broker's closing Error.
		k.state, k.uncertain = keptLost, true
		p.requestResyncLocked(resyncReconnect)
		return false, nil
	case redirect && p.reconnects() && retries:
		// Refused by a member that does not lead the partition, or during
		// an election: not stored. It keeps its sequence and is resent to
		// the leader (producerroute.go).
		p.redirectedLocked(k, code == wire.CodeNotLeader, werr.Leader, werr.RetryAfter)
		return false, nil
	case redirect:
		err = fmt.Errorf("%w: %w", ErrNoLeader, err)
	case werr != nil && werr.Closes && werr.Retryable && p.reconnects() && retries:
		// Refused by a broker closing the connection (shutting down, at
		// its connection limit): not stored; resend after the reconnect.
		k.state = keptLost
		p.requestResyncLocked(resyncReconnect)
		return false, nil
	case code == wire.CodeSequenceGap && werr.HasValue && werr.Value < k.sequence && retries:
		// Its sequence is not stored, so no copy of it is: renumber it.
		k.state, k.uncertain = keptParked, false
		log.floor = max(log.floor, werr.Value)
		p.requestResyncLocked(resyncRepair)
		return false, nil
	case code == wire.CodeProducerFenced:
		if p.idem.fatal == nil {
			p.idem.fatal = err
			p.idem.failed.Store(true)
		}
		p.requestResyncLocked(resyncRepair)
	case (code == wire.CodeUnknownProducer || code == wire.CodeProducerExpired) && !k.uncertain && retries:
		// The broker forgot the producer, but no copy of this record can
		// be stored: announce again and resend it.
		log.expired = log.expired || code == wire.CodeProducerExpired
		k.state = keptParked
		p.requestResyncLocked(resyncReinit)
		return false, nil
	case code == wire.CodeUnknownProducer || code == wire.CodeProducerExpired:
		// An earlier copy may be stored, and nobody can tell any more.
		log.expired = log.expired || code == wire.CodeProducerExpired
		p.requestResyncLocked(resyncReinit)
	case k.uncertain && werr != nil && werr.Retryable && retries:
		// A resend refused before the broker looked at its sequence (busy,
		// no space): whether an earlier copy is stored is still unknown,
		// so it is resent as it is, after the broker's hint.
		k.state = keptLost
		p.idem.retryAfter = max(p.idem.retryAfter, werr.RetryAfter, reconnectBackoffMin)
		p.requestResyncLocked(resyncRepair)
		return false, nil
	case k.uncertain && code != wire.CodeExpectationFailed:
		// The broker refused the resend without saying whether the copy
		// sent before the connection failed is stored (an expectation is
		// checked after the sequence, so that refusal is definite).
		err = fmt.Errorf("%w: the record was resent after its connection failed, and refused: %w", ErrConnectionLost, err)
	case code != 0 && code != wire.CodeSequenceGap && k.attempt == 1 && log.next == k.sequence+1:
		// Refused, so not stored, sent once and the newest record of its
		// partition: no other record holds a later sequence, so the next
		// one takes this sequence and no gap arises.
		log.next = k.sequence
	}
	k.clear()
	return true, err
}

// sentAnsweredLocked counts one kept record out of keptSent.
func (p *Producer) sentAnsweredLocked() {
	p.idem.inFlight--
	if p.idem.inFlight == 0 {
		p.idem.drained.Broadcast()
	}
}

// resync repairs until nothing more is wanted, then lets Send resume.
// An error it cannot repair (fenced, reconnecting gave up) stops the
// producer: every kept record fails with it, and so does every Send.
func (p *Producer) resync() {
	defer p.idem.wg.Done()
	var dial dialState
	for {
		p.sendMu.Lock() // a barrier: a Send past its pause check finishes first
		p.mu.Lock()
		reinit, err := p.idem.reinit, p.idem.fatal
		p.idem.wanted, p.idem.reinit = false, false
		p.mu.Unlock()
		p.sendMu.Unlock()
		if err == nil {
			err = p.repair(reinit, &dial)
		}
		p.mu.Lock()
		if err != nil {
			if p.idem.fatal == nil {
				p.idem.fatal = err
				p.idem.failed.Store(true)
			}
			p.failKeptLocked(err)
		} else if p.idem.wanted {
			p.mu.Unlock()
			continue
		}
		p.idem.paused, p.idem.running, p.idem.wanted = false, false, false
		close(p.idem.resumed)
		p.mu.Unlock()
		return
	}
}

// repair brings the kept records to the broker again: after every record
// in flight is answered (or the connection is replaced), with a new epoch
// when the connection is new or the broker asked, renumbering the parked.
func (p *Producer) repair(reinit bool, dial *dialState) error {
	c := p.conn.Load()
	p.mu.Lock()
	// With partitions on several connections, every one of them drains:
	// the ordering rule of producerroute.go.
	for p.idem.inFlight > 0 && (c.Err() == nil || p.idem.route.routed.Load()) {
		p.idem.drained.Wait()
	}
	// What the answers that came during the drain asked for is this
	// pass's work, not another pass's.
	reinit = reinit || p.idem.reinit
	p.idem.wanted, p.idem.reinit = false, false
	p.mu.Unlock()
	if c.Err() != nil {
		if !errors.Is(c.Err(), ErrConnectionLost) {
			return c.Err() // closed by its owner: not a failure to repair
		}
		p.mu.Lock()
		p.markLostLocked()
		p.mu.Unlock()
		fresh, err := p.redial(dial)
		if err != nil {
			return err
		}
		if old := p.conn.Swap(fresh); old != p.origin {
			old.Close()
		}
		c, reinit = fresh, true
	}
	if p.reroute() {
		reinit = true
	}
	if reinit {
		if ok, err := p.announceAll(); !ok {
			return err
		}
	}
	if !dial.dialled {
		*dial = dialState{} // this pass needed no redial: a new failure gets the full time
	}
	dial.dialled = false
	p.mu.Lock()
	wait := min(p.idem.retryAfter, maxRetryAfter)
	p.idem.retryAfter = 0
	p.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	p.resend(p.renumber(reinit))
	return nil
}

// markLostLocked counts every record in flight as lost with its
// connection; their late answers are stale.
func (p *Producer) markLostLocked() {
	for seq := p.head; seq < p.next; seq++ {
		if k := &p.ring[seq%uint64(len(p.ring))].kept; k.kept && k.state == keptSent {
			k.state, k.uncertain = keptLost, true
		}
	}
	p.idem.inFlight = 0
	p.idem.drained.Broadcast()
}

// failLostLocked fails the lost records: the broker cannot tell whether
// it holds them.
func (p *Producer) failLostLocked(err error) {
	for seq := p.head; seq < p.next; seq++ {
		s := &p.ring[seq%uint64(len(p.ring))]
		if !s.done && s.kept.kept && s.kept.state == keptLost {
			s.kept.clear()
			p.finishLocked(seq, Ack{}, err)
		}
	}
}

// failKeptLocked fails every kept record not yet complete.
func (p *Producer) failKeptLocked(err error) {
	for seq := p.head; seq < p.next; seq++ {
		s := &p.ring[seq%uint64(len(p.ring))]
		if !s.done && s.kept.kept {
			if s.kept.state == keptSent {
				p.sentAnsweredLocked()
			}
			s.kept.clear()
			p.finishLocked(seq, Ack{}, err)
		}
	}
}

// renumber lists the kept records to resend, in send order, giving the
// parked ones (and every record after a parked one on its partition,
// which the broker cannot have stored either: its sequences are dense)
// fresh sequences above any the broker may hold: the floor, the
// position ProducerInit reported, and the lost records resent with their
// own sequences. Each gets a new attempt, stamped for the current
// identity and epoch.
func (p *Producer) renumber(reinit bool) []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	order := p.idem.order[:0]
	lostTop := map[uint32]uint64{} // partition → above the lost records resent as they are
	parked := map[uint32]bool{}    // partitions with records to renumber
	for seq := p.head; seq < p.next; seq++ {
		s := &p.ring[seq%uint64(len(p.ring))]
		k := &s.kept
		if s.done || !k.kept || k.state == keptSent {
			continue
		}
		if log := p.idem.logLocked(k.partition); reinit && log.expired && k.uncertain {
			k.clear()
			p.finishLocked(seq, Ack{}, fmt.Errorf("%w: the broker forgot the producer before the record's resend: an earlier copy may be stored", ErrProducerExpired))
			continue
		}
		order = append(order, seq)
		if parked[k.partition] || k.state == keptParked {
			k.state, parked[k.partition] = keptParked, true
		} else {
			lostTop[k.partition] = max(lostTop[k.partition], k.sequence+1)
		}
	}
	for partition, log := range p.idem.logs {
		if reinit {
			position := p.idem.positions[partition]
			if log.expired { // the broker forgot: only its position counts
				log.floor, log.expired = position, false
			}
			log.floor = max(log.floor, position)
		}
		if parked[partition] {
			log.next = max(lostTop[partition], log.floor)
		}
		log.next = max(log.next, log.floor)
	}
	for _, seq := range order {
		k := &p.ring[seq%uint64(len(p.ring))].kept
		if k.state == keptParked {
			log := p.idem.logs[k.partition]
			k.sequence = log.next
			log.next++
		}
		k.crc = restamp(k.body, p.idem.id, k.sequence)
		k.options.Epoch = p.epochLocked(p.routeLocked(k.partition))
		k.attempt++
		k.state = keptSent
		p.idem.inFlight++
	}
	p.idem.order = order
	return order
}

// resend writes the records of order, in order, each on its
// partition's connection. A connection that fails meanwhile leaves the
// rest lost for the next pass.
func (p *Producer) resend(order []uint64) {
	for i, seq := range order {
		// Routes change only in the resync, which is running this.
		p.mu.Lock()
		c := p.routeLocked(p.ring[seq%uint64(len(p.ring))].kept.partition)
		p.mu.Unlock()
		err := c.acquireWindow(context.Background())
		p.mu.Lock()
		s := &p.ring[seq%uint64(len(p.ring))]
		if s.done || !s.kept.kept || s.kept.state != keptSent {
			p.mu.Unlock()
			if err == nil {
				<-c.window
			}
			continue
		}
		k := &s.kept
		var id uint32
		if err == nil {
			id, err = c.register(entry{kind: kindProducer, producer: p, seq: seq, attempt: k.attempt})
			if err != nil {
				<-c.window
			}
		}
		if err != nil {
			for _, rest := range order[i:] {
				// Never written on c: each keeps what it knew, and a
				// parked one now holds a fresh sequence nobody has.
				if k := &p.ring[rest%uint64(len(p.ring))].kept; k.kept && k.state == keptSent {
					k.state = keptLost
					p.sentAnsweredLocked()
				}
			}
			if p.reconnects() && errors.Is(err, ErrConnectionLost) {
				p.requestResyncLocked(resyncReconnect)
			} else {
				p.failKeptLocked(err)
			}
			p.mu.Unlock()
			return
		}
		msg := &wire.Produce{Stream: p.target.stream, Partition: k.partition, Flags: p.target.flags,
			BodyCRC: k.crc, Options: k.options, Body: k.body}
		c.enqueue(id, msg)
		p.mu.Unlock()
	}
}

// dialState carries the backoff and the deadline of redialling across
// the passes of one resync, so a broker that accepts and drops every
// connection cannot keep a producer redialling without pause or end.
type dialState struct {
	deadline time.Time
	wait     time.Duration
	dialled  bool // this pass redialled
	seed     int  // the seed tried first by the next dial
}

// redial dials the producer's seeds again (the Client's seed list, in
// turn, from the one after the last connected), with backoff, until one
// connects or ReconnectTimeout has passed since the failure. A refusal
// that retrying cannot change (authentication, no protocol in common)
// ends it at once.
func (p *Producer) redial(dial *dialState) (*Client, error) {
	if dial.deadline.IsZero() {
		dial.deadline, dial.wait = time.Now().Add(p.opts.ReconnectTimeout), 0
	}
	ctx, cancel := context.WithDeadline(context.Background(), dial.deadline)
	defer cancel()
	seeds := []string{p.origin.addr}
	if p.origin.router != nil {
		seeds = p.origin.router.seeds
	}
	addr := strings.Join(seeds, ",")
	if dial.wait == 0 {
		dial.seed = slices.Index(seeds, p.conn.Load().addr) + 1
	}
	dial.dialled = true
	lastErr := errors.New("no attempt left")
	for {
		if dial.wait > 0 {
			// Jitter spreads the redials of many producers that lost one broker.
			timer := time.NewTimer(dial.wait/2 + rand.N(dial.wait))
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("%w: reconnecting to %s for %v: %w", ErrConnectionLost, addr, p.opts.ReconnectTimeout, lastErr)
			}
		}
		dial.wait = min(max(2*dial.wait, reconnectBackoffMin), reconnectBackoffMax)
		// The seeds in turn, from the one after the member lost: it is
		// the likeliest to be down still.
		c, at, err := dialSeeds(ctx, seeds, dial.seed, p.origin.opts)
		dial.seed = at + 1
		if err == nil {
			if !c.producersServed() {
				c.Close()
				return nil, fmt.Errorf("%w: the broker at %s no longer serves idempotent producers", ErrConnectionLost, addr)
			}
			return c, nil
		}
		if _, werr := wireCode(err); werr != nil && !werr.Retryable {
			return nil, fmt.Errorf("%w: reconnecting to %s: %w", ErrConnectionLost, addr, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: reconnecting to %s for %v: %w", ErrConnectionLost, addr, p.opts.ReconnectTimeout, err)
		}
		lastErr = err
	}
}
