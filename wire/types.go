package wire

import "fmt"

// Type identifies a frame. The numbers are the protocol: never reuse one.
type Type uint8

// Frame types of protocol version 1.
const (
	TypeHello      Type = 1  // C→S: first frame; version range, capabilities, limits
	TypeWelcome    Type = 2  // S→C: answers Hello
	TypePing       Type = 3  // either way: liveness; answered by Pong
	TypePong       Type = 4  // answers Ping with its payload
	TypeProduce    Type = 5  // C→S: one record for a stream partition
	TypeProduceAck Type = 6  // S→C: the record is durable at an offset
	TypeConsume    Type = 7  // C→S: fetch records for a group, with a mode
	TypeDeliver    Type = 8  // S→C: one record answering a Consume
	TypeConsumeEnd Type = 9  // S→C: ends the answer to a Consume
	TypeAck        Type = 10 // C→S: acknowledge or return leased records
	TypeAckResult  Type = 11 // S→C: outcome of each entry of an Ack
	TypeGap        Type = 12 // S→C: offsets a consumer will never see, and why
	TypeError      Type = 13 // S→C: structured error answering a request
	TypeOpenGroup  Type = 14 // C→S: open a group, creating it with a mode and start position
	TypeGroupInfo  Type = 15 // S→C: answers OpenGroup
	// TypeDeliverBatch carries a run of stored record frames answering a
	// streaming Consume (S→C), sent only with CapDeliverBatch.
	TypeDeliverBatch Type = 16
	// Admin frames, sent only with CapAdmin.
	TypeGroupAdmin      Type = 17 // C→S: list, inspect, reset or delete consumer groups
	TypeGroupList       Type = 18 // S→C: answers GroupAdmin
	TypeDeadLetterAdmin Type = 19 // C→S: list or redrive dead-letter queues
	TypeDeadLetterState Type = 20 // S→C: answers DeadLetterAdmin
	TypeStreamAdmin     Type = 21 // C→S: create, list, inspect, purge, remove streams; bind subjects
	TypeStreamList      Type = 22 // S→C: answers StreamAdmin
	// Producer frames, sent only with CapProducers.
	TypeProducerInit Type = 23 // C→S: the id and a new epoch for a named idempotent producer
	TypeProducerInfo Type = 24 // S→C: answers ProducerInit
	TypeTxnBegin     Type = 25 // C→S: open a transaction
	TypeTxnEnd       Type = 26 // C→S: commit or abort a transaction
	TypeTxnState     Type = 27 // S→C: answers TxnBegin and TxnEnd
	// TypeStreamCompacted answers a StreamAdmin compact (S→C, CapAdmin).
	TypeStreamCompacted Type = 28
	TypeClusterInfo     Type = 29 // C→S: the cluster's nodes and, optionally, its partitions' leaders and replicas
	TypeClusterState    Type = 30 // S→C: answers ClusterInfo
	// TypeLeaderTransfer moves a replicated partition's leadership to
	// another of its voters (C→S, CapCluster).
	TypeLeaderTransfer    Type = 31
	TypeLeaderTransferred Type = 32 // S→C: answers LeaderTransfer
)

// TypeInfo describes a frame type for docs and tests.
type TypeInfo struct {
	Type      Type
	Name      string
	Direction string // "C→S", "S→C" or "both"
}

var typeInfo = []TypeInfo{
	{TypeHello, "Hello", "C→S"},
	{TypeWelcome, "Welcome", "S→C"},
	{TypePing, "Ping", "both"},
	{TypePong, "Pong", "both"},
	{TypeProduce, "Produce", "C→S"},
	{TypeProduceAck, "ProduceAck", "S→C"},
	{TypeConsume, "Consume", "C→S"},
	{TypeDeliver, "Deliver", "S→C"},
	{TypeConsumeEnd, "ConsumeEnd", "S→C"},
	{TypeAck, "Ack", "C→S"},
	{TypeAckResult, "AckResult", "S→C"},
	{TypeGap, "Gap", "S→C"},
	{TypeError, "Error", "S→C"},
	{TypeOpenGroup, "OpenGroup", "C→S"},
	{TypeGroupInfo, "GroupInfo", "S→C"},
	{TypeDeliverBatch, "DeliverBatch", "S→C"},
	{TypeGroupAdmin, "GroupAdmin", "C→S"},
	{TypeGroupList, "GroupList", "S→C"},
	{TypeDeadLetterAdmin, "DeadLetterAdmin", "C→S"},
	{TypeDeadLetterState, "DeadLetterState", "S→C"},
	{TypeStreamAdmin, "StreamAdmin", "C→S"},
	{TypeStreamList, "StreamList", "S→C"},
	{TypeProducerInit, "ProducerInit", "C→S"},
	{TypeProducerInfo, "ProducerInfo", "S→C"},
	{TypeTxnBegin, "TxnBegin", "C→S"},
	{TypeTxnEnd, "TxnEnd", "C→S"},
	{TypeTxnState, "TxnState", "S→C"},
	{TypeStreamCompacted, "StreamCompacted", "S→C"},
	{TypeClusterInfo, "ClusterInfo", "C→S"},
	{TypeClusterState, "ClusterState", "S→C"},
	{TypeLeaderTransfer, "LeaderTransfer", "C→S"},
	{TypeLeaderTransferred, "LeaderTransferred", "S→C"},
}

// Types lists every frame type of this protocol version.
func Types() []TypeInfo { return append([]TypeInfo(nil), typeInfo...) }

// Known reports whether t is a frame type of this protocol version.
func (t Type) Known() bool { return t >= TypeHello && t <= TypeLeaderTransferred }

func (t Type) String() string {
	if t.Known() {
		return typeInfo[t-1].Name
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Capability bits, announced in Hello and Welcome; the connection has the
// bits both sides set.
const (
	// CapGapAdvisory: the client understands Gap frames inside a consume.
	CapGapAdvisory uint64 = 1 << 0
	// CapLongPoll: Consume may wait for new records (wait_ms > 0).
	CapLongPoll uint64 = 1 << 1
	// CapGroups: the consumer model beyond work mode: OpenGroup, the
	// key_shared, broadcast and streaming modes, and Ack ops 2–7.
	CapGroups uint64 = 1 << 2
	// CapDeliverBatch: a streaming Consume is answered with DeliverBatch
	// frames (stored record frames, byte for byte) instead of Deliver.
	CapDeliverBatch uint64 = 1 << 3
	// CapAdmin: the admin frames GroupAdmin and DeadLetterAdmin are
	// served.
	CapAdmin uint64 = 1 << 4
	// CapStreams: named multi-partition streams and subjects: Produce may
	// route by subject (ProduceRouteBySubject) or let the broker pick the
	// partition (PartitionAny); Consume and OpenGroup may span every
	// partition (PartitionAll) and carry a subject filter; Gap may say
	// GapFiltered; StreamAdmin is served (with CapAdmin).
	CapStreams uint64 = 1 << 5
	// CapProducers: ProducerInit and the transaction frames are served; Produce may carry publish
	// options (ProduceHasOptions) and ProduceNoAck; ProduceAck may carry
	// flags (a duplicate); Error may carry a value (the expected sequence,
	// the actual last offset).
	CapProducers uint64 = 1 << 6
	// CapCluster: the server is a member of a cluster. ClusterInfo and
	// LeaderTransfer are served; an Error not_leader carries the leader's
	// client address (flag leader); a client with it follows a
	// partition's leader.
	CapCluster uint64 = 1 << 7
)

// Capabilities this implementation supports.
const Capabilities = CapGapAdvisory | CapLongPoll | CapGroups | CapDeliverBatch | CapAdmin | CapStreams | CapProducers
