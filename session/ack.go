package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// ack applies an Ack: one operation on up to MaxAckEntries entries,
// answered with one status per entry. Operations that free a credit or a
// key wake the group's long polls.
func (s *session) ack(frame wire.Frame) error {
	a, err := wire.DecodeAck(frame.Body, s.entries)
	if err != nil {
		return s.malformed(frame, err)
	}
	s.entries = a.Entries[:0]
	if refused, err := s.refused(security.ScopeSubscribe, a.Stream, frame.RequestID); refused {
		return err
	}
	moves := a.Op == wire.AckCumulative || a.Op == wire.AckCommit
	verb := security.GroupJoin
	if moves {
		verb = security.GroupCommit
	}
	if s.groupRefused(verb, a.Stream, a.Group, frame.RequestID) {
		return nil
	}
	if a.Stream, a.Group, err = s.readName(a.Stream, a.Group, frame.RequestID); err != nil {
		return nil
	}
	if a.Op > wire.AckCommit || (a.Op > wire.AckNack && s.capabilities&wire.CapGroups == 0) {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest,
			"ack op %d is not served on this connection; ops: done (0), nack (1), and with the groups capability extend (2), term (3), reject (4), range (5), cumulative (6), commit (7)", a.Op))
		return nil
	}
	served, werr := s.ackGroup(a)
	if werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	s.statuses = s.statuses[:0]
	if served == nil { // not open since the broker started: no lease exists
		for range a.Entries {
			s.statuses = append(s.statuses, wire.AckUnknown)
		}
		s.send(wire.Append(nil, frame.RequestID, &wire.AckResult{Statuses: s.statuses}))
		return nil
	}
	if werr := opAllowed(served, a.Op); werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	if a.Op == wire.AckReject {
		// A rejection waits for the dead-letter append to be durable: do
		// not hold up the connection's reader for it.
		entries := append([]wire.AckEntry(nil), a.Entries...)
		s.consumers.Add(1)
		go func() {
			defer s.consumers.Done()
			statuses := make([]uint8, 0, len(entries))
			for _, e := range entries {
				status, _ := served.Consumer().Reject(e.Offset, e.Lease, "")
				statuses = append(statuses, ackStatus(status))
			}
			served.Notify()
			s.out.frame(wire.Append(nil, frame.RequestID, &wire.AckResult{Statuses: statuses}))
		}()
		return nil
	}
	for _, e := range a.Entries {
		s.statuses = append(s.statuses, s.applyAck(served, a, e))
	}
	if moves {
		s.auditCommit(a)
	}
	if a.Op != wire.AckExtend && a.Op != wire.AckCommit {
		served.Notify()
	}
	s.send(wire.Append(nil, frame.RequestID, &wire.AckResult{Statuses: s.statuses}))
	return nil
}

// ackGroup finds the group an Ack names. Lease operations act only on a
// group the engine has open (nil otherwise: nothing is leased); a
// cumulative ack or a commit opens its group, whose type it implies. The
// stream must exist either way.
func (s *session) ackGroup(a wire.Ack) (*broker.Group, *wire.Error) {
	if a.Partition == wire.PartitionAll {
		return nil, wire.NewError(wire.CodeInvalidRequest, "an Ack names the partition its records came from (the Deliver's partition), not partition all")
	}
	var served *broker.Group
	var err error
	switch a.Op {
	case wire.AckCumulative:
		served, err = s.engine.OpenGroup(a.Stream, a.Partition, a.Group, broker.GroupSpec{Type: consumer.TypeBroadcast})
	case wire.AckCommit:
		served, err = s.engine.OpenGroup(a.Stream, a.Partition, a.Group, broker.GroupSpec{Type: consumer.TypeStreaming})
	default:
		served, err = s.engine.LoadedGroup(a.Stream, a.Partition, a.Group)
	}
	if err != nil {
		return nil, wireError(err)
	}
	return served, nil
}

// auditCommit records the cursor moves of a commit or cumulative ack.
func (s *session) auditCommit(a wire.Ack) {
	if s.cfg.Audit == nil {
		return
	}
	for i, e := range a.Entries {
		var err error
		if s.statuses[i] != wire.AckOK {
			err = errCursorRefused
		}
		s.auditOutcome(s.identity, "group.commit", err, fmt.Sprintf("stream %q partition %d group %q offset %d", a.Stream, a.Partition, a.Group, e.Offset))
	}
}

var errCursorRefused = errors.New("offset out of range")

// opAllowed refuses an operation the group's type does not have.
func opAllowed(served *broker.Group, op uint8) *wire.Error {
	kind := served.Type()
	leased := kind == consumer.TypeWork || kind == consumer.TypeKeyShared
	if op <= wire.AckRange && !leased {
		return wire.NewError(wire.CodeGroupModeMismatch, "group %q of stream %q is a %s group: its records are not leased, so ack op %d does not apply (use cumulative or commit)",
			served.Name(), served.Stream(), kind, op)
	}
	return nil
}

// applyAck performs one entry's operation and returns its wire status.
func (s *session) applyAck(served *broker.Group, a wire.Ack, e wire.AckEntry) uint8 {
	g := served.Consumer()
	switch a.Op {
	case wire.AckNack:
		delay := time.Duration(a.DelayMs) * time.Millisecond
		if a.DelayMs == wire.NackDefaultDelay {
			delay = -1
		}
		return ackStatus(g.Nack(e.Offset, e.Lease, delay))
	case wire.AckExtend:
		return ackStatus(g.Extend(e.Offset, e.Lease, time.Duration(a.DelayMs)*time.Millisecond))
	case wire.AckTerm:
		return ackStatus(g.Term(e.Offset, e.Lease))
	case wire.AckRange:
		if g.AckRange(s.client.ID(), e.Offset, e.Lease) > 0 {
			return wire.AckOK
		}
		return wire.AckUnknown
	case wire.AckCumulative:
		return cursorStatus(g.CumulativeAck(e.Offset))
	case wire.AckCommit:
		return cursorStatus(g.Commit(e.Offset))
	}
	return ackStatus(g.Ack(e.Offset, e.Lease))
}

// cursorStatus maps the outcome of a cumulative ack or a commit.
func cursorStatus(err error) uint8 {
	if err != nil {
		return wire.AckOutOfRange
	}
	return wire.AckOK
}

// ackStatus maps a group status to the wire's AckResult codes.
func ackStatus(status consumer.Status) uint8 {
	switch status {
	case consumer.StatusOK:
		return wire.AckOK
	case consumer.StatusUnknown:
		return wire.AckUnknown
	case consumer.StatusExpired:
		return wire.AckExpired
	case consumer.StatusCapped:
		return wire.AckCapped
	}
	return wire.AckStale
}

// openGroupRequest answers an OpenGroup: the group, created with the
// requested mode and start when it does not exist yet.
func (s *session) openGroupRequest(frame wire.Frame) error {
	m, err := wire.DecodeOpenGroup(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if refused, err := s.refused(security.ScopeSubscribe, m.Stream, frame.RequestID); refused {
		return err
	}
	if s.groupRefused(security.GroupJoin, m.Stream, m.Group, frame.RequestID) || s.filterRefused(m.Filter, frame.RequestID) {
		return nil
	}
	if m.Stream, m.Group, err = s.readName(m.Stream, m.Group, frame.RequestID); err != nil {
		return nil
	}
	kind, ok := modeType(m.Mode)
	if !ok {
		s.reply(frame.RequestID, wire.NewError(wire.CodeUnsupportedMode, "consume mode %d: the modes are work (1), key_shared (2), broadcast (3) and streaming (4)", m.Mode))
		return nil
	}
	if werr := s.streamsFields(m.Partition, m.Filter); werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	spec := broker.GroupSpec{Type: kind, Start: startPosition(m.StartKind, m.StartValue), Filter: string(m.Filter)}
	groups, err := s.engine.OpenGroups(m.Stream, partitions(m.Partition), m.Group, spec)
	if err != nil {
		s.reply(frame.RequestID, wireError(err))
		return nil
	}
	// Over every partition the cursor answered is the sum of theirs: how
	// many offsets of the stream are done when the group started at the
	// beginning. GroupAdmin gives each partition's own.
	var committed uint64
	for _, served := range groups {
		committed += served.Consumer().Committed()
	}
	reply := wire.Append(nil, frame.RequestID, &wire.GroupInfo{Mode: typeMode(groups[0].Type()), Committed: committed})
	if allCreated(groups) {
		s.send(reply)
		return nil
	}
	// A new group is answered once its creation is on disk, and the
	// reactor does not wait for that.
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		awaitCreated(groups)
		s.out.frame(reply)
	}()
	return nil
}
