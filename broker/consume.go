package broker

import (
	"context"
	"math"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// Consume limits.
const (
	maxConsumeRecords = 10_000
	defaultMaxBytes   = 1 << 20
	// consumeRetryAfter is the hint sent with a busy broadcast group.
	consumeRetryAfter = time.Second
)

// consume starts answering a Consume on its own goroutine: it may wait for
// records, and the connection must keep serving other requests meanwhile.
func (s *session) consume(frame wire.Frame) error {
	c, err := wire.DecodeConsume(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if refused, err := s.refused(security.ScopeSubscribe, c.Stream, frame.RequestID); refused {
		return err
	}
	kind, ok := modeType(c.Mode)
	if !ok || (kind != consumer.TypeWork && s.capabilities&wire.CapGroups == 0) {
		s.reply(frame.RequestID, wire.NewError(wire.CodeUnsupportedMode,
			"consume mode %d is not served on this connection; modes: work (1), and with the groups capability key_shared (2), broadcast (3), streaming (4)", c.Mode))
		return nil
	}
	served, werr := s.broker.openGroup(c.Stream, c.Partition, c.Group, groupSpec{kind: kind})
	if werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	s.groupsMu.Lock()
	if _, ok := s.groups[served]; !ok {
		s.groups[served] = served.group.Committed() // a streaming read starts at the committed position
	}
	s.groupsMu.Unlock()
	request := consumeRequest{id: frame.RequestID, served: served, partition: c.Partition,
		max: int(min(max(c.MaxRecords, 1), maxConsumeRecords)), maxBytes: int(c.MaxBytes),
		lease: time.Duration(c.LeaseMs) * time.Millisecond, deadline: s.waitDeadline(c.WaitMs),
		wait:         c.WaitMs > 0 && c.Flags&wire.ConsumeNoWait == 0 && s.capabilities&wire.CapLongPoll != 0,
		gaps:         s.capabilities&wire.CapGapAdvisory != 0,
		maxFrameBody: int(s.clientFrame) - wire.HeaderSize - deliverFields}
	if request.maxBytes <= 0 {
		request.maxBytes = defaultMaxBytes
	}
	s.consumers.Add(1)
	if kind == consumer.TypeStreaming && s.capabilities&wire.CapDeliverBatch != 0 {
		go s.serveStream(request)
		return nil
	}
	go s.serveConsume(request)
	return nil
}

// deliverFields is the size of a Deliver body's fixed fields.
const deliverFields = 4 + 8 + 8 + 4 + 1 + 8 + 4

type consumeRequest struct {
	id           uint32
	served       *servedGroup
	partition    uint32
	max          int
	maxBytes     int
	lease        time.Duration
	deadline     time.Time
	wait         bool // the client may be kept waiting (long_poll)
	gaps         bool // the client understands Gap frames (gap_advisory)
	maxFrameBody int  // largest record body a Deliver to this client can carry
}

// serveConsume fetches, waiting for new records (or a due redelivery, or
// an ack that frees a credit or a key) until the deadline when nothing is
// ready, and sends the answer as one buffer: Gap and Deliver frames, then
// ConsumeEnd.
func (s *session) serveConsume(r consumeRequest) {
	defer s.consumers.Done()
	for {
		// Taken before the fetch, so nothing that happens between the
		// fetch and the wait can be missed.
		var wake <-chan struct{}
		if r.wait {
			wake = r.served.wake.channel()
		}
		durable := r.served.log.Committed()
		deliveries, gaps, err := s.fetch(r)
		if err != nil {
			s.replyFromConsumer(r.id, consumerError(err))
			return
		}
		if len(deliveries) > 0 || len(gaps) > 0 || !r.wait || !time.Now().Before(r.deadline) {
			if tooBig := s.dropUnsendable(r, deliveries); tooBig != nil {
				s.replyFromConsumer(r.id, tooBig)
				return
			}
			s.out.frame(encodeConsume(r, deliveries, gaps, endReason(r, deliveries)))
			return
		}
		if !s.waitForRecords(r, wake, durable) {
			s.out.frame(encodeConsume(r, nil, nil, wire.EndWaited))
			return
		}
	}
}

// fetch gets the next records for this connection by the group's type:
// leased (work, key-shared), from the one reader's position (broadcast),
// or from this connection's read position (streaming).
func (s *session) fetch(r consumeRequest) ([]consumer.Delivery, []consumer.Gap, error) {
	g := r.served.group
	if g.Type() != consumer.TypeStreaming {
		return g.Fetch(s.conn.ID(), r.max, r.maxBytes, r.lease)
	}
	from := s.readPosition(r.served)
	deliveries, gaps, err := g.Read(from, r.max, r.maxBytes)
	next := from
	if n := len(deliveries); n > 0 {
		next = max(next, deliveries[n-1].Offset+1)
	}
	for _, gap := range gaps {
		next = max(next, gap.To)
	}
	s.groupsMu.Lock()
	s.groups[r.served] = max(s.groups[r.served], next)
	s.groupsMu.Unlock()
	return deliveries, gaps, err
}

// readPosition is where this connection's next streaming read starts.
func (s *session) readPosition(served *servedGroup) uint64 {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	return s.groups[served]
}

// replyFromConsumer queues an error from a consume goroutine, which must
// not touch the reader's state.
func (s *session) replyFromConsumer(requestID uint32, e *wire.Error) {
	s.out.frame(wire.Append(nil, requestID, e))
}

// waitForRecords blocks until a record past the group's position becomes
// durable, the group's wakeup fires (an ack freed a credit or a key, a
// member left), a redelivery or lease expiry falls due, the deadline
// passes or the connection closes; false means stop waiting. durable is
// the log's committed end before the fetch that found nothing: a group
// still short of it was held back by its limits, not by a lack of
// records, so only its wakeup or time can help it.
func (s *session) waitForRecords(r consumeRequest, wake <-chan struct{}, durable uint64) bool {
	g := r.served.group
	until := r.deadline
	if due, ok := g.NextDue(); ok && due.Before(until) {
		until = due
	}
	ctx, cancel := context.WithDeadline(s.ctx, until)
	defer cancel()
	go func() {
		select {
		case <-wake:
			cancel()
		case <-ctx.Done():
		}
	}()
	position := g.Next()
	if g.Type() == consumer.TypeStreaming {
		position = s.readPosition(r.served)
	}
	if position < durable {
		position = math.MaxUint64 // held back: a new record would not help
	}
	_, err := r.served.log.WaitCommitted(ctx, position)
	if s.ctx.Err() != nil {
		return false
	}
	return err == nil || ctx.Err() != nil
}

// endReason says why an answer ended: a limit (records or bytes), nothing
// more ready, or the wait elapsed.
func endReason(r consumeRequest, deliveries []consumer.Delivery) uint8 {
	bytes := 0
	for _, d := range deliveries {
		bytes += len(d.Body)
	}
	switch {
	case len(deliveries) >= r.max || (len(deliveries) > 0 && bytes >= r.maxBytes):
		return wire.EndLimit
	case len(deliveries) == 0 && r.wait:
		return wire.EndWaited
	}
	return wire.EndCaughtUp
}

// dropUnsendable returns every lease of a fetch and an error when one
// record cannot fit in a frame the client accepts; the client must raise
// its max_frame to read it.
func (s *session) dropUnsendable(r consumeRequest, deliveries []consumer.Delivery) *wire.Error {
	for _, d := range deliveries {
		if len(d.Body) <= r.maxFrameBody {
			continue
		}
		for _, back := range deliveries {
			if back.Lease != 0 {
				r.served.group.Nack(back.Offset, back.Lease, 0)
			}
		}
		r.served.wake.notify()
		return wire.NewError(wire.CodeRecordTooLarge, "the record at offset %d has a %d-byte body; a frame you accept holds at most %d: raise Hello max_frame",
			d.Offset, len(d.Body), r.maxFrameBody)
	}
	return nil
}

func encodeConsume(r consumeRequest, deliveries []consumer.Delivery, gaps []consumer.Gap, reason uint8) []byte {
	size := 32
	for _, d := range deliveries {
		size += wire.HeaderSize + deliverFields + len(d.Body)
	}
	buf := make([]byte, 0, size)
	for _, g := range gaps {
		if !r.gaps {
			break // the client does not understand Gap; the offsets are simply skipped
		}
		code := wire.GapLost
		if g.Reason == segment.GapRetention {
			code = wire.GapRetention
		}
		buf = wire.Append(buf, r.id, &wire.Gap{Partition: r.partition, From: g.From, To: g.To, Reason: code, Detail: g.Reason})
	}
	for _, d := range deliveries {
		var flags uint8
		if d.Redelivered {
			flags |= wire.DeliverRedelivered
		}
		buf = wire.Append(buf, r.id, &wire.Deliver{Partition: r.partition, Offset: d.Offset, Lease: d.Lease,
			Attempt: d.Attempt, Flags: flags, Timestamp: d.Timestamp, BodyCRC: d.BodyCRC, Body: d.Body})
	}
	return wire.Append(buf, r.id, &wire.ConsumeEnd{Delivered: uint32(len(deliveries)), Reason: reason})
}
