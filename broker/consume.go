package broker

import (
	"context"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// Consume limits.
const (
	maxConsumeRecords = 10_000
	defaultMaxBytes   = 1 << 20
)

// consume starts answering a Consume on its own goroutine: it may wait for
// records, and the connection must keep serving other requests meanwhile.
func (s *session) consume(frame wire.Frame) error {
	c, err := wire.DecodeConsume(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if c.Mode != wire.ModeWork {
		s.reply(frame.RequestID, wire.NewError(wire.CodeUnsupportedMode, "consume mode %d is not served yet; use work (%d)", c.Mode, wire.ModeWork))
		return nil
	}
	l, g, werr := s.broker.groupFor(c.Stream, c.Partition, c.Group)
	if werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	s.groupsMu.Lock()
	s.groups[g] = struct{}{}
	s.groupsMu.Unlock()
	request := consumeRequest{id: frame.RequestID, log: l, group: g, partition: c.Partition,
		max: int(min(max(c.MaxRecords, 1), maxConsumeRecords)), maxBytes: int(c.MaxBytes),
		lease: time.Duration(c.LeaseMs) * time.Millisecond, deadline: s.waitDeadline(c.WaitMs),
		wait:         c.WaitMs > 0 && c.Flags&wire.ConsumeNoWait == 0 && s.capabilities&wire.CapLongPoll != 0,
		gaps:         s.capabilities&wire.CapGapAdvisory != 0,
		maxFrameBody: int(s.clientFrame) - wire.HeaderSize - deliverFields}
	if request.maxBytes <= 0 {
		request.maxBytes = defaultMaxBytes
	}
	s.consumers.Add(1)
	go s.serveConsume(request)
	return nil
}

// deliverFields is the size of a Deliver body's fixed fields.
const deliverFields = 4 + 8 + 8 + 4 + 1 + 8 + 4

type consumeRequest struct {
	id           uint32
	log          *segment.Log
	group        *consumer.Group
	partition    uint32
	max          int
	maxBytes     int
	lease        time.Duration
	deadline     time.Time
	wait         bool // the client may be kept waiting (long_poll)
	gaps         bool // the client understands Gap frames (gap_advisory)
	maxFrameBody int  // largest record body a Deliver to this client can carry
}

// serveConsume fetches, waiting for new records (or a due redelivery)
// until the deadline when nothing is ready, and sends the answer as one
// buffer: Gap and Deliver frames, then ConsumeEnd.
func (s *session) serveConsume(r consumeRequest) {
	defer s.consumers.Done()
	for {
		deliveries, gaps, err := r.group.Fetch(s.conn.ID(), r.max, r.maxBytes, r.lease)
		if err != nil {
			s.replyFromConsumer(r.id, storageError(err))
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
		if !s.waitForRecords(r) {
			s.out.frame(encodeConsume(r, nil, nil, wire.EndWaited))
			return
		}
	}
}

// replyFromConsumer queues an error from a consume goroutine, which must
// not touch the reader's state.
func (s *session) replyFromConsumer(requestID uint32, e *wire.Error) {
	s.out.frame(wire.Append(nil, requestID, e))
}

// waitForRecords blocks until the log commits past the group's next
// offset, a redelivery falls due, the deadline passes or the connection
// closes; false means stop waiting.
func (s *session) waitForRecords(r consumeRequest) bool {
	until := r.deadline
	if due, ok := r.group.NextDue(); ok && due.Before(until) {
		until = due
	}
	ctx, cancel := context.WithDeadline(s.ctx, until)
	defer cancel()
	_, err := r.log.WaitCommitted(ctx, r.group.Next())
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
			r.group.Nack(back.Offset, back.Lease, 0)
		}
		return wire.NewError(wire.CodeRecordTooLarge, "the record at offset %d has a %d-byte body; a frame you accept holds at most %d: raise Hello max_frame",
			d.Offset, len(d.Body), r.maxFrameBody)
	}
	return nil
}

func encodeConsume(r consumeRequest, deliveries []consumer.Delivery, gaps []consumer.Gap, reason uint8) []byte {
	size := 32
	for _, d := range deliveries {
		size += wire.HeaderSize + 45 + len(d.Body)
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

// ack applies an Ack or Nack and answers with one status per entry.
func (s *session) ack(frame wire.Frame) error {
	a, err := wire.DecodeAck(frame.Body, s.entries)
	if err != nil {
		return s.malformed(frame, err)
	}
	s.entries = a.Entries[:0]
	if a.Op != wire.AckDone && a.Op != wire.AckNack {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "ack op %d is not ack (0) or nack (1)", a.Op))
		return nil
	}
	_, g, werr := s.broker.groupFor(a.Stream, a.Partition, a.Group)
	if werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	delay := time.Duration(a.DelayMs) * time.Millisecond
	if a.DelayMs == wire.NackDefaultDelay {
		delay = -1
	}
	s.statuses = s.statuses[:0]
	for _, e := range a.Entries {
		var status consumer.Status
		if a.Op == wire.AckNack {
			status = g.Nack(e.Offset, e.Lease, delay)
		} else {
			status = g.Ack(e.Offset, e.Lease)
		}
		s.statuses = append(s.statuses, ackStatus(status))
	}
	s.send(wire.Append(nil, frame.RequestID, &wire.AckResult{Statuses: s.statuses}))
	return nil
}

// ackStatus maps a group status to the wire's AckResult codes: a lapsed
// lease is fenced like a stale one (nothing changed, the record will be
// redelivered).
func ackStatus(status consumer.Status) uint8 {
	switch status {
	case consumer.StatusOK:
		return wire.AckOK
	case consumer.StatusUnknown:
		return wire.AckUnknown
	}
	return wire.AckStale
}
