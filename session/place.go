package session

import (
	"fmt"
	"math"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// placeRecord decides where a produced record goes: its stream (named, or
// routed by its subject), the permission to publish there, and its
// partition (named, or PartitionAny: the stable hash of its key, or this
// connection's own partition for a keyless record). closes reports an
// error that ends the connection (an identity removed). Allocation-free
// when the record is placed.
func (s *session) placeRecord(p *wire.Produce) (part *broker.Partition, view record.View, werr *wire.Error, closes bool) {
	stream := p.Stream
	routed := p.Flags&wire.ProduceRouteBySubject != 0
	if !routed {
		// The permission check comes first, as it always has: a
		// refused identity learns nothing about its records.
		if werr, closes = s.authorize(security.ScopePublish, stream); werr != nil {
			return nil, view, werr, closes
		}
	}
	view, err := s.engine.CheckRecord(p.Body, p.BodyCRC)
	if err != nil {
		return nil, view, wireError(err), false
	}
	if !routed && len(view.Subject) > 0 {
		if err := broker.ValidateSubject(view.Subject); err != nil {
			return nil, view, wireError(err), false
		}
	}
	if werr := s.subjectRefused(view.Subject); werr != nil {
		return nil, view, werr, false
	}
	if routed {
		if len(stream) != 0 {
			return nil, view, wire.NewError(wire.CodeInvalidRequest, "a Produce routed by subject names no stream; it names %q", stream), false
		}
		if stream, werr = s.routeSubject(view.Subject); werr != nil {
			return nil, view, werr, false
		}
		if werr, closes = s.authorize(security.ScopePublish, s.routedName(stream)); werr != nil {
			return nil, view, werr, closes
		}
	} else if len(stream) > 0 {
		var err error
		if s.produceName, err = s.names.AppendStream(s.produceName[:0], stream); err != nil {
			return nil, view, foreignName(err), false
		}
		stream = s.produceName
	}
	unlock, werr := s.creationRefused(s.identity, stream, 1)
	if werr != nil {
		return nil, view, werr, false
	}
	served, err := s.engine.ProduceStream(stream, s.owner())
	unlock()
	if err != nil {
		return nil, view, wireError(err), false
	}
	partition := p.Partition
	if partition == wire.PartitionAny {
		count := served.Partitions()
		switch {
		case len(view.Key) > 0:
			partition = wire.PartitionForKey(view.Key, count)
		case served.Replicated():
			// A keyless record goes to a partition this node leads, so it
			// is stored without a hop to another node.
			partition, _ = served.LeadingPartition(s.sticky)
		default:
			partition = s.sticky % count
		}
	}
	part, err = served.Partition(partition)
	if err != nil {
		return nil, view, wireError(err), false
	}
	return part, view, nil, false
}

// routeSubject returns the stream whose binding matches a record's
// subject. The answer aliases s.routed, valid until the next record.
func (s *session) routeSubject(subj []byte) ([]byte, *wire.Error) {
	key, err := s.names.AppendSubject(s.routeKey[:0], subj)
	if err != nil {
		return nil, foreignName(err)
	}
	s.routeKey = key
	stream, err := s.engine.Route(&s.subjects, key)
	if err == nil && !s.names.Plain() {
		if _, own := s.names.External(stream); !own {
			err = fmt.Errorf("%w: %w: no binding of the account matches subject %q; nothing was stored", broker.ErrNoRoute, errForeignRoute, subj)
		}
	}
	if err != nil {
		return nil, wireError(err)
	}
	s.routed = append(s.routed[:0], stream...)
	return s.routed, nil
}

// routedName is the account's name of the engine's stream a subject
// routed to, for the permission check: the engine's bytes themselves for
// the default account (no allocation).
func (s *session) routedName(stream []byte) []byte {
	if s.names.Plain() {
		return stream
	}
	name, _ := s.names.External(string(stream))
	return []byte(name)
}

// partitions maps the wire's partition field to the engine's: the
// all-partitions sentinel has its own name on each side.
func partitions(p uint32) uint32 {
	if p == wire.PartitionAll {
		return broker.AllPartitions
	}
	return p
}

// modeType maps a wire consume mode to a group type.
func modeType(mode uint8) (consumer.Type, bool) {
	switch mode {
	case wire.ModeWork:
		return consumer.TypeWork, true
	case wire.ModeKeyShared:
		return consumer.TypeKeyShared, true
	case wire.ModeBroadcast:
		return consumer.TypeBroadcast, true
	case wire.ModeStreaming:
		return consumer.TypeStreaming, true
	}
	return 0, false
}

// typeMode maps a group type to its wire consume mode (the numbers agree).
func typeMode(kind consumer.Type) uint8 { return uint8(kind) }

// startPosition maps OpenGroup's start fields to a group start. A time
// too far in the future for nanoseconds means "after every record".
func startPosition(kind uint8, value uint64) consumer.StartPosition {
	switch kind {
	case wire.StartLatest:
		return consumer.StartPosition{Kind: consumer.StartLatest}
	case wire.StartOffset:
		return consumer.StartPosition{Kind: consumer.StartOffset, Offset: value}
	case wire.StartTime:
		nanos := int64(math.MaxInt64)
		if value <= math.MaxInt64/uint64(time.Millisecond) {
			nanos = int64(value) * int64(time.Millisecond)
		}
		return consumer.StartPosition{Kind: consumer.StartTime, Time: nanos}
	}
	return consumer.StartPosition{Kind: consumer.StartEarliest}
}
