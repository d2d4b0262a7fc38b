package wire

import "fmt"

// Admin frames: what operators do to groups and dead-letter queues of a
// running broker (list, inspect, reset, delete, redrive). They need
// CapAdmin. A request that changes state is answered only once the change
// is durable.

// GroupAdmin operations.
const (
	GroupOpList   uint8 = 0 // every group of a stream partition (or of every stream when stream is empty)
	GroupOpInfo   uint8 = 1 // one group
	GroupOpReset  uint8 = 2 // move one group's cursor to target; refused while it has live members
	GroupOpDelete uint8 = 3 // remove one group and its checkpoint; refused while it has live members
)

// GroupAdmin asks about, or changes, consumer groups (C→S). Answered by
// GroupList, or by Error (not_found, invalid_name, invalid_request,
// group_active when a reset or delete finds live members).
type GroupAdmin struct {
	Op          uint8 // GroupOp*
	Stream      []byte
	Partition   uint32
	Group       []byte // empty for GroupOpList
	TargetKind  uint8  // GroupOpReset: Start* (as in OpenGroup)
	TargetValue uint64 // GroupOpReset with StartOffset or StartTime
}

// Type implements Message.
func (*GroupAdmin) Type() Type { return TypeGroupAdmin }

// AppendBody implements Message.
func (m *GroupAdmin) AppendBody(dst []byte) []byte {
	dst = append(dst, m.Op)
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	dst = appendBytes16(dst, m.Group)
	dst = append(dst, m.TargetKind)
	return le.AppendUint64(dst, m.TargetValue)
}

// DecodeGroupAdmin decodes a GroupAdmin body; Stream and Group alias it.
// An unknown op decodes (the broker answers invalid_request); a target
// kind this version does not define is malformed, as in OpenGroup.
func DecodeGroupAdmin(body []byte) (GroupAdmin, error) {
	r := reader{buf: body, what: "GroupAdmin"}
	m := GroupAdmin{Op: r.u8("op"), Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.bytes16("group"),
		TargetKind: r.u8("target kind"), TargetValue: r.u64("target value")}
	if err := r.done(); err != nil {
		return m, err
	}
	if m.TargetKind > StartTime {
		return m, fmt.Errorf("%w: GroupAdmin: target kind %d", ErrMalformed, m.TargetKind)
	}
	return m, nil
}

// GroupStateSize is the fixed part of one GroupState in a GroupList: the
// name's bytes follow its length.
const GroupStateSize = 2 + 4 + 2 + 1 + 8 + 8 + 4 + 4 + 4 + 8 + 4 + 4

// GroupState is one group as the broker sees it: the figures of its last
// checkpoint, or of its live state when the broker has it open.
type GroupState struct {
	Stream         []byte
	Partition      uint32
	Group          []byte
	Mode           uint8 // the group's consume mode
	Committed      uint64
	AckedAhead     uint64 // offsets done above Committed
	Unsettled      uint32 // records above Committed delivered and not settled
	MostDeliveries uint32 // the highest delivery count among them
	PendingMoves   uint32 // dead-letter moves begun and not finished
	LogEnd         uint64 // the partition's committed end
	Members        uint32 // live consumers (connections holding the group)
	Leased         uint32 // live leases
}

// GroupList answers GroupAdmin (S→C): the groups listed, or the one group
// after the operation (a deleted group as it was just before).
type GroupList struct {
	Groups []GroupState
}

// Type implements Message.
func (*GroupList) Type() Type { return TypeGroupList }

// AppendBody implements Message.
func (m *GroupList) AppendBody(dst []byte) []byte {
	dst = le.AppendUint32(dst, uint32(len(m.Groups)))
	for i := range m.Groups {
		g := &m.Groups[i]
		dst = appendBytes16(dst, g.Stream)
		dst = le.AppendUint32(dst, g.Partition)
		dst = appendBytes16(dst, g.Group)
		dst = append(dst, g.Mode)
		dst = le.AppendUint64(dst, g.Committed)
		dst = le.AppendUint64(dst, g.AckedAhead)
		dst = le.AppendUint32(dst, g.Unsettled)
		dst = le.AppendUint32(dst, g.MostDeliveries)
		dst = le.AppendUint32(dst, g.PendingMoves)
		dst = le.AppendUint64(dst, g.LogEnd)
		dst = le.AppendUint32(dst, g.Members)
		dst = le.AppendUint32(dst, g.Leased)
	}
	return dst
}

// DecodeGroupList decodes a GroupList body; names alias it. A count the
// body cannot hold is malformed before anything is allocated.
func DecodeGroupList(body []byte) (GroupList, error) {
	r := reader{buf: body, what: "GroupList"}
	count := r.u32("count")
	if r.err == nil && uint64(count) > uint64(len(r.buf)/GroupStateSize) {
		return GroupList{}, fmt.Errorf("%w: GroupList: %d groups in %d bytes", ErrMalformed, count, len(r.buf))
	}
	m := GroupList{Groups: make([]GroupState, 0, count)}
	for i := uint32(0); i < count && r.err == nil; i++ {
		m.Groups = append(m.Groups, GroupState{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.bytes16("group"),
			Mode: r.u8("mode"), Committed: r.u64("committed"), AckedAhead: r.u64("acked ahead"), Unsettled: r.u32("unsettled"),
			MostDeliveries: r.u32("most deliveries"), PendingMoves: r.u32("pending moves"), LogEnd: r.u64("log end"),
			Members: r.u32("members"), Leased: r.u32("leased")})
	}
	return m, r.done()
}

// DeadLetterAdmin operations.
const (
	DeadLetterOpList    uint8 = 0 // the queues (every queue when stream is empty)
	DeadLetterOpRedrive uint8 = 1 // republish a queue's dead letters to their stream; idempotent
)

// DeadLetterAdmin asks about, or redrives, dead-letter queues (C→S).
// Answered by DeadLetterState, or by Error.
type DeadLetterAdmin struct {
	Op     uint8 // DeadLetterOp*
	Stream []byte
	Max    uint32 // redrive: at most this many dead letters; 0 = all
}

// Type implements Message.
func (*DeadLetterAdmin) Type() Type { return TypeDeadLetterAdmin }

// AppendBody implements Message.
func (m *DeadLetterAdmin) AppendBody(dst []byte) []byte {
	dst = append(dst, m.Op)
	dst = appendBytes16(dst, m.Stream)
	return le.AppendUint32(dst, m.Max)
}

// DecodeDeadLetterAdmin decodes a DeadLetterAdmin body; Stream aliases it.
func DecodeDeadLetterAdmin(body []byte) (DeadLetterAdmin, error) {
	r := reader{buf: body, what: "DeadLetterAdmin"}
	m := DeadLetterAdmin{Op: r.u8("op"), Stream: r.bytes16("stream"), Max: r.u32("max")}
	return m, r.done()
}

// DeadLetterQueueSize is the fixed part of one DeadLetterQueue: the
// stream name's bytes follow its length.
const DeadLetterQueueSize = 2 + 8 + 8 + 8

// DeadLetterQueue is one stream's dead-letter queue.
type DeadLetterQueue struct {
	Stream   []byte // the source stream (the queue reads as ".dlq.<stream>")
	First    uint64 // the first offset the queue still holds
	End      uint64 // the queue's committed end
	Redriven uint64 // every dead letter below it has been redriven
}

// DeadLetterState answers DeadLetterAdmin (S→C): the queues, and for a
// redrive how many dead letters it republished and skipped (already
// redriven by an interrupted run, or not dead letters at all).
type DeadLetterState struct {
	Republished uint64
	Skipped     uint64
	Queues      []DeadLetterQueue
}

// Type implements Message.
func (*DeadLetterState) Type() Type { return TypeDeadLetterState }

// AppendBody implements Message.
func (m *DeadLetterState) AppendBody(dst []byte) []byte {
	dst = le.AppendUint64(dst, m.Republished)
	dst = le.AppendUint64(dst, m.Skipped)
	dst = le.AppendUint32(dst, uint32(len(m.Queues)))
	for i := range m.Queues {
		q := &m.Queues[i]
		dst = appendBytes16(dst, q.Stream)
		dst = le.AppendUint64(dst, q.First)
		dst = le.AppendUint64(dst, q.End)
		dst = le.AppendUint64(dst, q.Redriven)
	}
	return dst
}

// DecodeDeadLetterState decodes a DeadLetterState body; names alias it.
func DecodeDeadLetterState(body []byte) (DeadLetterState, error) {
	r := reader{buf: body, what: "DeadLetterState"}
	m := DeadLetterState{Republished: r.u64("republished"), Skipped: r.u64("skipped")}
	count := r.u32("count")
	if r.err == nil && uint64(count) > uint64(len(r.buf)/DeadLetterQueueSize) {
		return DeadLetterState{}, fmt.Errorf("%w: DeadLetterState: %d queues in %d bytes", ErrMalformed, count, len(r.buf))
	}
	m.Queues = make([]DeadLetterQueue, 0, count)
	for i := uint32(0); i < count && r.err == nil; i++ {
		m.Queues = append(m.Queues, DeadLetterQueue{Stream: r.bytes16("stream"), First: r.u64("first"), End: r.u64("end"),
			Redriven: r.u64("redriven")})
	}
	return m, r.done()
}
