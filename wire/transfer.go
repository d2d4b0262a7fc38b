package wire

// LeaderTransfer asks for one replicated partition's leadership to move
// to another of its voters (C→S, CapCluster). Only the node leading the
// partition performs it; another member answers not_leader naming the
// leader. Moving the leadership to the node that already leads is done at
// once.
type LeaderTransfer struct {
	Stream    []byte
	Partition uint32
	To        uint32 // the node that is to lead
}

// LeaderTransferSize is a LeaderTransfer's body without its stream name.
const LeaderTransferSize = 2 + 4 + 4

// Type implements Message.
func (*LeaderTransfer) Type() Type { return TypeLeaderTransfer }

// AppendBody implements Message.
func (m *LeaderTransfer) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	return le.AppendUint32(dst, m.To)
}

// DecodeLeaderTransfer decodes a LeaderTransfer body; Stream aliases body.
func DecodeLeaderTransfer(body []byte) (LeaderTransfer, error) {
	r := reader{buf: body, what: "LeaderTransfer"}
	m := LeaderTransfer{Stream: r.bytes16("stream"), Partition: r.u32("partition"), To: r.u32("to")}
	return m, r.done()
}

// LeaderTransferred answers LeaderTransfer (S→C) once the node named
// leads the partition in a new term and has committed in it, so it takes
// appends.
type LeaderTransferred struct {
	Stream    []byte
	Partition uint32
	From      uint32 // the node that led when the request arrived
	Leader    uint32 // the node that leads now
	Term      uint64 // the term it leads in
	// ElapsedUs is how long the move took, in microseconds: from the
	// old leader asking until it saw the new one commit (0 when no move
	// was needed). Appends to the partition pause for about this long.
	ElapsedUs uint32
}

// LeaderTransferredSize is a LeaderTransferred's body without its stream
// name.
const LeaderTransferredSize = 2 + 4 + 4 + 4 + 8 + 4

// Type implements Message.
func (*LeaderTransferred) Type() Type { return TypeLeaderTransferred }

// AppendBody implements Message.
func (m *LeaderTransferred) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	dst = le.AppendUint32(dst, m.From)
	dst = le.AppendUint32(dst, m.Leader)
	dst = le.AppendUint64(dst, m.Term)
	return le.AppendUint32(dst, m.ElapsedUs)
}

// DecodeLeaderTransferred decodes a LeaderTransferred body; Stream
// aliases body.
func DecodeLeaderTransferred(body []byte) (LeaderTransferred, error) {
	r := reader{buf: body, what: "LeaderTransferred"}
	m := LeaderTransferred{Stream: r.bytes16("stream"), Partition: r.u32("partition"), From: r.u32("from"),
		Leader: r.u32("leader"), Term: r.u64("term"), ElapsedUs: r.u32("elapsed")}
	return m, r.done()
}
