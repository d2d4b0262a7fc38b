package session

import (
	"errors"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/producer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// maxConnectionProducers bounds the producer ids one connection may use:
// an id is usable on the connection that initialised it, so another
// client cannot advance (and so silence) a producer's sequence by
// forging its id.
const maxConnectionProducers = 64

// recordCheck builds what a produced record asks beyond being stored,
// and reports whether it asks anything. A record naming a producer this
// connection did not initialise is refused here.
func (s *session) recordCheck(p *wire.Produce, view *record.View) (broker.Check, bool, *wire.Error) {
	var c broker.Check
	o := &p.Options
	if view.HasProducer && !o.Idempotent {
		// Stored unchecked, the id and sequence would still be replayed
		// into the producer table at recovery: another client could move
		// a real producer's sequence, and the rebuilt table would differ
		// from the live one.
		return c, false, wire.NewError(wire.CodeInvalidRequest, "a record body carrying a producer id and sequence must be sent with the producer option (ProducerInit first)")
	}
	if o.Idempotent {
		if !view.HasProducer {
			return c, false, wire.NewError(wire.CodeInvalidRequest, "an idempotent record's body carries no producer id and sequence")
		}
		epoch, ok := s.producers[view.ProducerID]
		if !ok {
			return c, false, wire.NewError(wire.CodeUnknownProducer, "producer id %d was not initialised on this connection; send ProducerInit", view.ProducerID)
		}
		if o.Epoch != epoch {
			return c, false, wire.NewError(wire.CodeProducerFenced, "epoch %d, this connection initialised epoch %d", o.Epoch, epoch)
		}
		c.Producer, c.ProducerID, c.Sequence, c.Epoch = true, view.ProducerID, view.Sequence, o.Epoch
	}
	if id := view.MessageID(); id != nil {
		if len(id) > record.MaxMessageIDBytes {
			return c, false, wire.NewError(wire.CodeInvalidRequest, "a message id of %d bytes (at most %d)", len(id), record.MaxMessageIDBytes)
		}
		c.MessageID = id
	}
	c.Subject = view.Subject
	if o.HasExpectLastOffset {
		c.ExpectLast, c.ExpectLastOffset = true, o.ExpectLastOffset
	}
	if o.HasExpectLastSubjectOffset {
		if len(view.Subject) == 0 {
			return c, false, wire.NewError(wire.CodeInvalidRequest, "an expectation on the subject's last offset needs a record with a subject")
		}
		c.ExpectLastSubject, c.ExpectLastSubjectOffset = true, o.ExpectLastSubjectOffset
	}
	asks := c.Producer || c.MessageID != nil || c.ExpectLast || c.ExpectLastSubject
	return c, asks, nil
}

// producerInit answers ProducerInit: the producer's id and a new epoch,
// which this connection may then use. The name is scoped by the
// connection's identity, so one tenant cannot fence another's producer.
func (s *session) producerInit(frame wire.Frame) error {
	m, err := wire.DecodeProducerInit(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if len(s.producers) >= maxConnectionProducers {
		s.reply(frame.RequestID, wire.NewError(wire.CodeBusy, "this connection has initialised %d producers, the most it may", maxConnectionProducers))
		return nil
	}
	owner := ""
	if s.identity != nil {
		owner = s.identity.Name
	}
	identity, positions, err := s.engine.InitProducer(owner + "\x00" + string(m.Name))
	if err != nil {
		s.reply(frame.RequestID, wireError(err))
		return nil
	}
	if s.producers == nil {
		s.producers = make(map[uint64]uint32)
	}
	s.producers[identity.ID] = identity.Epoch
	info := wire.ProducerInfo{ID: identity.ID, Epoch: identity.Epoch}
	for _, position := range positions {
		if len(info.Positions) == wire.MaxProducerPositions {
			break
		}
		info.Positions = append(info.Positions, wire.ProducerPosition{Stream: []byte(position.Stream), Partition: position.Partition, NextSequence: position.NextSequence})
	}
	s.send(wire.Append(nil, frame.RequestID, &info))
	return nil
}

// recordAnswer is the reply to one record of a run whose records are not all
// plainly stored: a silent (no-ack) record gets none.
type recordAnswer struct {
	silent bool
	kind   broker.OutcomeKind
	offset uint64
	flags  uint8
	err    *wire.Error
}

// runAnswers returns the replies of a run appended at first when they are
// not all plain acks at consecutive offsets (nil when they are, the common
// case).
func (s *session) runAnswers(first uint64) []recordAnswer {
	mixed := s.silentCount > 0
	if s.runChecked {
		for i := range s.checked.Outcomes {
			mixed = mixed || s.checked.Outcomes[i].Kind != broker.Stored
		}
	}
	if !mixed {
		return nil
	}
	answers := make([]recordAnswer, len(s.ids))
	for i := range answers {
		a := &answers[i]
		a.silent = s.silent[i]
		if !s.runChecked {
			a.kind, a.offset = broker.Stored, first+uint64(i)
			continue
		}
		o := s.checked.Outcomes[i]
		a.kind, a.offset = o.Kind, o.Offset
		switch o.Kind {
		case broker.Duplicate:
			a.flags = wire.AckDuplicate
			if !o.OffsetKnown {
				a.flags |= wire.AckOffsetUnknown
				a.offset = 0
			}
		case broker.Refused:
			a.err = checkError(o.Err)
		}
	}
	return answers
}

// checkError maps a refused record's error to its wire error, with the
// typed value its code carries (the sequence expected, the actual last
// offset), so a client need not parse the message.
func checkError(err error) *wire.Error {
	e := wireError(err)
	var gap *producer.GapError
	var expectation *broker.ExpectationError
	switch {
	case errors.As(err, &gap):
		e.HasValue, e.Value = true, gap.Expected
	case errors.As(err, &expectation):
		e.HasValue, e.Value = true, expectation.Actual
	}
	return e
}

// appendAnswers appends the replies of a completed run with mixed
// answers: a failed ticket fails every record that was to be stored or
// named as a duplicate.
func appendAnswers(buf []byte, ticket broker.Ticket, partition uint32, ids []uint32, answers []recordAnswer) []byte {
	var failure *wire.Error
	if err := ticket.Err(); err != nil {
		failure = wireError(err)
	}
	for i, id := range ids {
		a := &answers[i]
		switch {
		case a.silent:
		case a.err != nil:
			buf = wire.Append(buf, id, a.err)
		case failure != nil:
			buf = wire.Append(buf, id, failure)
		case a.kind == broker.Stored && a.flags == 0:
			buf = wire.AppendProduceAck(buf, id, partition, a.offset)
		default:
			buf = wire.Append(buf, id, &wire.ProduceAck{Partition: partition, Offset: a.offset, Flags: a.flags})
		}
	}
	return buf
}
