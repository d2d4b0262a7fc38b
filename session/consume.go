package session

import (
	"reflect"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
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
	if refused, err := s.refused(security.ScopeSubscribe, c.Stream, frame.RequestID); refused {
		return err
	}
	if s.groupRefused(security.GroupJoin, c.Stream, c.Group, frame.RequestID) || s.filterRefused(c.Filter, frame.RequestID) {
		return nil
	}
	if c.Stream, c.Group, err = s.readName(c.Stream, c.Group, frame.RequestID); err != nil {
		return nil
	}
	kind, ok := modeType(c.Mode)
	if !ok || (kind != consumer.TypeWork && s.capabilities&wire.CapGroups == 0) {
		s.reply(frame.RequestID, wire.NewError(wire.CodeUnsupportedMode,
			"consume mode %d is not served on this connection; modes: work (1), and with the groups capability key_shared (2), broadcast (3), streaming (4)", c.Mode))
		return nil
	}
	request, werr := s.consumeRequest(frame.RequestID, c, kind)
	if werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	s.consumers.Add(1)
	if kind == consumer.TypeStreaming && s.capabilities&wire.CapDeliverBatch != 0 {
		go s.serveStream(request)
		return nil
	}
	go s.serveConsume(request)
	return nil
}

// consumeRequest opens the groups a Consume names and builds the request
// its goroutine serves.
func (s *session) consumeRequest(id uint32, c wire.Consume, kind consumer.Type) (consumeRequest, *wire.Error) {
	if werr := s.streamsFields(c.Partition, c.Filter); werr != nil {
		return consumeRequest{}, werr
	}
	spec := broker.GroupSpec{Type: kind}
	request := consumeRequest{id: id,
		max: int(min(max(c.MaxRecords, 1), maxConsumeRecords)), maxBytes: int(c.MaxBytes),
		lease: time.Duration(c.LeaseMs) * time.Millisecond, deadline: s.waitDeadline(c.WaitMs),
		wait:         c.WaitMs > 0 && c.Flags&wire.ConsumeNoWait == 0 && s.capabilities&wire.CapLongPoll != 0,
		gaps:         s.capabilities&wire.CapGapAdvisory != 0,
		maxFrameBody: int(s.clientFrame) - wire.HeaderSize - deliverFields}
	if len(c.Filter) > 0 {
		if kind != consumer.TypeStreaming {
			// Leased and broadcast records are the group's, not the
			// request's: a filter on such a Consume is the group's filter.
			spec.Filter = string(c.Filter)
		} else {
			request.filter, _ = subject.Compile(c.Filter) // validated by streamsFields
		}
	}
	groups, err := s.engine.OpenGroups(c.Stream, partitions(c.Partition), c.Group, spec)
	if err != nil {
		return consumeRequest{}, wireError(err)
	}
	request.anchor, request.all, request.parts = groups[0], groups, groups
	s.groupsMu.Lock()
	for _, served := range groups {
		if _, ok := s.groups[served]; !ok {
			s.groups[served] = served.Consumer().Committed() // a streaming read starts at the committed position
		}
	}
	s.groupsMu.Unlock()
	if kind == consumer.TypeStreaming && c.Partition == wire.PartitionAll {
		request.assigned = true
		request.parts = s.assignedGroups(request.anchor, groups)
	}
	if request.maxBytes <= 0 {
		request.maxBytes = defaultMaxBytes
	}
	return request, nil
}

// streamsFields checks the fields a Consume or OpenGroup has only with
// the streams capability: the all-partitions sentinel and a filter, which
// must be a valid subject pattern.
func (s *session) streamsFields(partition uint32, filter []byte) *wire.Error {
	if (partition == wire.PartitionAll || len(filter) > 0) && s.capabilities&wire.CapStreams == 0 {
		return wire.NewError(wire.CodeInvalidRequest, "partition all (0xFFFFFFFF) and subject filters need the streams capability")
	}
	if len(filter) > 0 {
		if err := subject.ValidatePattern(filter); err != nil {
			return wire.NewError(wire.CodeInvalidRequest, "subject filter %q: %v", filter, err)
		}
	}
	return nil
}

// deliverFields is the size of a Deliver body's fixed fields.
const deliverFields = 4 + 8 + 8 + 4 + 1 + 8 + 4

type consumeRequest struct {
	id uint32
	// parts are the groups read, one per partition, ascending: the one a
	// request names, every partition's for wire.PartitionAll, or a
	// streaming member's assigned ones. Every frame names its group's
	// partition.
	parts []*broker.Group
	// anchor is partition 0's group (or the one named): it holds what
	// the partitions share, rotation and streaming assignment.
	anchor *broker.Group
	all    []*broker.Group // every group the request named
	// assigned: a streaming PartitionAll member, whose parts follow the
	// group's assignment.
	assigned     bool
	filter       consumer.Matcher // a streaming request's own subject filter
	max          int
	maxBytes     int
	lease        time.Duration
	deadline     time.Time
	wait         bool // the client may be kept waiting (long_poll)
	gaps         bool // the client understands Gap frames (gap_advisory)
	maxFrameBody int  // largest record body a Deliver to this client can carry
}

// assignedGroups joins this connection to a streaming group's members
// (leaving again when the connection closes) and returns the groups of
// the partitions assigned to it now. A partition it gained is read from
// the group's committed position there: the previous owner's reads past
// its last commit are read again, so nothing is lost in a rebalance.
func (s *session) assignedGroups(anchor *broker.Group, groups []*broker.Group) []*broker.Group {
	member := s.client.ID()
	if anchor.JoinAssignment(member) {
		anchor.Notify() // the other members' waits pick up the new assignment
		go func() {
			<-s.ctx.Done()
			anchor.LeaveAssignment(member)
			anchor.Notify()
		}()
	}
	assigned, gained := anchor.Assigned(member, uint32(len(groups)))
	if len(gained) > 0 {
		s.groupsMu.Lock()
		for _, p := range gained {
			s.groups[groups[p]] = groups[p].Consumer().Committed()
		}
		s.groupsMu.Unlock()
	}
	parts := make([]*broker.Group, 0, len(assigned))
	for _, p := range assigned {
		parts = append(parts, groups[p])
	}
	return parts
}

// partFetch is what one partition's group gave a fetch.
type partFetch struct {
	served     *broker.Group
	deliveries []consumer.Delivery
	gaps       []consumer.Gap
}

// awaitCreated returns once every group has its first
// checkpoint behind it (the engine creates groups in the background): a group delivers nothing that a power cut could leave it
// without, such as the offset a "latest" start resolved to.
func awaitCreated(groups []*broker.Group) {
	for _, served := range groups {
		<-served.Created()
	}
}

// allCreated reports whether every group's creation is on disk already.
func allCreated(groups []*broker.Group) bool {
	for _, served := range groups {
		select {
		case <-served.Created():
		default:
			return false
		}
	}
	return true
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
		wakes, durable := s.beforeFetch(&r)
		fetched, records, err := s.fetchAll(r)
		if err != nil {
			s.replyFromConsumer(r.id, wireError(err))
			return
		}
		if records > 0 || hasGaps(fetched) || !r.wait || !time.Now().Before(r.deadline) {
			if tooBig := s.dropUnsendable(r, fetched); tooBig != nil {
				s.replyFromConsumer(r.id, tooBig)
				return
			}
			awaitCreated(r.parts)
			s.out.frame(encodeConsume(r, fetched, endReason(r, fetched)))
			return
		}
		if !s.waitForRecords(r, wakes, durable) {
			s.out.frame(encodeConsume(r, nil, wire.EndWaited))
			return
		}
	}
}

// beforeFetch takes, before a fetch, the wakeups a wait after it would
// need and each partition's durable end; a streaming member first takes
// up its current assignment.
func (s *session) beforeFetch(r *consumeRequest) ([]<-chan struct{}, []uint64) {
	var wakes []<-chan struct{}
	if r.wait {
		wakes = append(wakes, r.anchor.Changed()) // an assignment change, partition 0's acks
		for _, served := range r.parts {
			if served != r.anchor {
				wakes = append(wakes, served.Changed())
			}
		}
	}
	if r.assigned {
		r.parts = s.assignedGroups(r.anchor, r.all)
	}
	durable := make([]uint64, len(r.parts))
	for i, served := range r.parts {
		durable[i] = served.Log().Committed()
	}
	return wakes, durable
}

func hasGaps(fetched []partFetch) bool {
	for _, f := range fetched {
		if len(f.gaps) > 0 {
			return true
		}
	}
	return false
}

// fetchAll fetches from each partition's group in turn, starting at a
// different partition each time, until the request's limits (records,
// body bytes) are reached across them. An error from one partition ends
// the fetch; it is returned only when nothing was fetched before it (a
// record leased to this connection must reach it).
func (s *session) fetchAll(r consumeRequest) ([]partFetch, int, error) {
	n := len(r.parts)
	if n == 0 {
		return nil, 0, nil
	}
	start := 0
	if n > 1 {
		start = r.anchor.Rotation(n)
	}
	var fetched []partFetch
	records, bytes := 0, 0
	for i := range n {
		if records >= r.max || (records > 0 && bytes >= r.maxBytes) {
			break
		}
		served := r.parts[(start+i)%n]
		deliveries, gaps, err := s.fetch(r, served, r.max-records, r.maxBytes-bytes)
		if err != nil {
			if len(fetched) == 0 && len(deliveries) == 0 && len(gaps) == 0 {
				return nil, 0, err
			}
			fetched = append(fetched, partFetch{served: served, deliveries: deliveries, gaps: gaps})
			return fetched, records + len(deliveries), nil
		}
		if len(deliveries) > 0 || len(gaps) > 0 {
			fetched = append(fetched, partFetch{served: served, deliveries: deliveries, gaps: gaps})
		}
		records += len(deliveries)
		for _, d := range deliveries {
			bytes += len(d.Body)
		}
	}
	return fetched, records, nil
}

// fetch gets the next records of one partition's group for this
// connection by the group's type: leased (work, key-shared), from the one
// reader's position (broadcast), or from this connection's read position
// (streaming).
func (s *session) fetch(r consumeRequest, served *broker.Group, limit, maxBytes int) ([]consumer.Delivery, []consumer.Gap, error) {
	g := served.Consumer()
	if g.Type() != consumer.TypeStreaming {
		deliveries, gaps, err := g.Fetch(s.client.ID(), limit, maxBytes, r.lease)
		return deliveries, gaps, broker.Classify(err)
	}
	from := s.readPosition(served)
	deliveries, gaps, err := g.Read(from, limit, maxBytes, r.filter)
	next := from
	if n := len(deliveries); n > 0 {
		next = max(next, deliveries[n-1].Offset+1)
	}
	for _, gap := range gaps {
		next = max(next, gap.To)
	}
	s.groupsMu.Lock()
	s.groups[served] = max(s.groups[served], next)
	s.groupsMu.Unlock()
	return deliveries, gaps, broker.Classify(err)
}

// readPosition is where this connection's next streaming read starts.
func (s *session) readPosition(served *broker.Group) uint64 {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	return s.groups[served]
}

// replyFromConsumer queues an error from a consume goroutine, which must
// not touch the reader's state.
func (s *session) replyFromConsumer(requestID uint32, e *wire.Error) {
	s.out.frame(wire.Append(nil, requestID, s.hide(e)))
}

// waitForRecords blocks until a record past a group's position becomes
// durable in any partition read, a group's wakeup fires (an ack freed a
// credit or a key, a member left or joined), a redelivery or lease expiry
// falls due, the deadline passes or the connection closes; false means
// stop waiting. durable is each log's committed end before the fetch that
// found nothing: a group still short of it was held back by its limits,
// not by a lack of records, so only its wakeup or time can help it.
func (s *session) waitForRecords(r consumeRequest, wakes []<-chan struct{}, durable []uint64) bool {
	until := r.deadline
	for _, served := range r.parts {
		if due, ok := served.Consumer().NextDue(); ok && due.Before(until) {
			until = due
		}
	}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	// One select over every channel, built at run time: a stream of 1,024
	// partitions must not park a goroutine per partition per waiting
	// consumer (invariant I8).
	cases := make([]reflect.SelectCase, 0, len(wakes)+len(r.parts)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	for _, wake := range wakes {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(wake)})
	}
	watched := make([]*broker.Group, 0, len(r.parts))
	for i, served := range r.parts {
		if i >= len(durable) {
			break
		}
		position := served.Consumer().Next()
		if served.Type() == consumer.TypeStreaming {
			position = s.readPosition(served)
		}
		if position < durable[i] {
			continue // held back: a new record would not help
		}
		watched = append(watched, served)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(served.Log().CommittedChange(position))})
	}
	chosen, _, _ := reflect.Select(cases)
	if s.ctx.Err() != nil {
		return false
	}
	// A log that froze or closed closes its channel for good: waiting
	// again would spin, so the answer ends.
	if log := chosen - 2 - len(wakes); log >= 0 && watched[log].Log().Halted() != nil {
		return false
	}
	return chosen != 0
}

// endReason says why an answer ended: a limit (records or bytes), nothing
// more ready, or the wait elapsed.
func endReason(r consumeRequest, fetched []partFetch) uint8 {
	records, bytes := 0, 0
	for _, f := range fetched {
		records += len(f.deliveries)
		for _, d := range f.deliveries {
			bytes += len(d.Body)
		}
	}
	switch {
	case records >= r.max || (records > 0 && bytes >= r.maxBytes):
		return wire.EndLimit
	case records == 0 && r.wait:
		return wire.EndWaited
	}
	return wire.EndCaughtUp
}

// dropUnsendable returns every lease of a fetch and an error when one
// record cannot fit in a frame the client accepts; the client must raise
// its max_frame to read it.
func (s *session) dropUnsendable(r consumeRequest, fetched []partFetch) *wire.Error {
	for _, f := range fetched {
		for _, d := range f.deliveries {
			if len(d.Body) <= r.maxFrameBody {
				continue
			}
			for _, back := range fetched {
				for _, leased := range back.deliveries {
					if leased.Lease != 0 {
						back.served.Consumer().Nack(leased.Offset, leased.Lease, 0)
					}
				}
				back.served.Notify()
			}
			return wire.NewError(wire.CodeRecordTooLarge, "the record at offset %d of partition %d has a %d-byte body; a frame you accept holds at most %d: raise Hello max_frame",
				d.Offset, f.served.Partition(), len(d.Body), r.maxFrameBody)
		}
	}
	return nil
}

func encodeConsume(r consumeRequest, fetched []partFetch, reason uint8) []byte {
	size, records := 32, 0
	for _, f := range fetched {
		for _, d := range f.deliveries {
			size += wire.HeaderSize + deliverFields + len(d.Body)
		}
		records += len(f.deliveries)
	}
	buf := make([]byte, 0, size)
	for _, f := range fetched {
		partition := f.served.Partition()
		for _, g := range f.gaps {
			if !r.gaps {
				break // the client does not understand Gap; the offsets are simply skipped
			}
			buf = wire.Append(buf, r.id, gapFrame(partition, g.From, g.To, g.Reason))
		}
		for _, d := range f.deliveries {
			var flags uint8
			if d.Redelivered {
				flags |= wire.DeliverRedelivered
			}
			buf = wire.Append(buf, r.id, &wire.Deliver{Partition: partition, Offset: d.Offset, Lease: d.Lease,
				Attempt: d.Attempt, Flags: flags, Timestamp: d.Timestamp, BodyCRC: d.BodyCRC, Body: d.Body})
		}
	}
	return wire.Append(buf, r.id, &wire.ConsumeEnd{Delivered: uint32(records), Reason: reason})
}

// gapFrame is the Gap advisory for offsets [from, to) of partition. A
// filtered or compacted gap carries no detail: its code says it all, and
// a sparse filter or a compacted log sends one per record.
func gapFrame(partition uint32, from, to uint64, reason string) *wire.Gap {
	frame := &wire.Gap{Partition: partition, From: from, To: to, Reason: gapCode(reason), Detail: reason}
	if frame.Reason == wire.GapFiltered || frame.Reason == wire.GapCompacted {
		frame.Detail = ""
	}
	return frame
}

// gapCode maps a gap's reason to its wire code.
func gapCode(reason string) uint8 {
	switch reason {
	case segment.GapRetention:
		return wire.GapRetention
	case segment.GapFiltered:
		return wire.GapFiltered
	case segment.GapCompacted:
		return wire.GapCompacted
	}
	return wire.GapLost
}
