package wire

import "fmt"

// ClusterInfo asks a cluster member for the cluster's nodes and, with
// ClusterInfoPartitions, its partitions' leaders and replicas (C→S,
// CapCluster). Any member answers from its own view; a node's view of
// another node's state may lag by a heartbeat.
type ClusterInfo struct {
	Flags uint8
	// Stream, when not empty with ClusterInfoPartitions, limits the
	// partitions to one stream's.
	Stream []byte
}

// ClusterInfo flag bits.
const (
	// ClusterInfoPartitions: list partitions, not only nodes.
	ClusterInfoPartitions uint8 = 1 << 0
)

// Type implements Message.
func (*ClusterInfo) Type() Type { return TypeClusterInfo }

// AppendBody implements Message.
func (m *ClusterInfo) AppendBody(dst []byte) []byte {
	dst = append(dst, m.Flags)
	return appendBytes16(dst, m.Stream)
}

// DecodeClusterInfo decodes a ClusterInfo body; Stream aliases body.
func DecodeClusterInfo(body []byte) (ClusterInfo, error) {
	r := reader{buf: body, what: "ClusterInfo"}
	m := ClusterInfo{Flags: r.u8("flags"), Stream: r.bytes16("stream")}
	return m, r.done()
}

// Node states in a ClusterState.
const (
	NodeUnknown  uint8 = 0 // never heard from since this node started
	NodeUp       uint8 = 1 // connected and answering
	NodeDown     uint8 = 2 // not reachable now
	NodeRemoving uint8 = 3 // being removed from the cluster
)

// Replica roles in a ClusterState.
const (
	RoleVoter    uint8 = 0
	RoleLearner  uint8 = 1 // catching up; not counted for a majority
	RoleOutgoing uint8 = 2 // a voter leaving in a joint configuration change
)

// Replica flag bits in a ClusterState.
const (
	ReplicaDamaged uint8 = 1 << 0 // found a damaged entry; neither votes nor serves until rebuilt
	ReplicaLatched uint8 = 1 << 1 // stopped after a storage failure
)

// ClusterState answers ClusterInfo (S→C).
type ClusterState struct {
	ClusterID  []byte
	Node       uint32 // the node answering
	MetaLeader uint32 // the metadata group's leader; 0 when none is known
	Nodes      []ClusterNode
	Partitions []ClusterPartition
}

// ClusterNode is one node of a ClusterState.
type ClusterNode struct {
	ID          uint32
	Incarnation uint32 // of the node's data directory
	ClientAddr  []byte // where clients connect
	ClusterAddr []byte // where peers connect
	State       uint8  // NodeUp, NodeDown, …
	// LastSeenMs is how long ago the answering node last heard from it
	// (NeverSeen: never).
	LastSeenMs uint32
}

// NeverSeen is ClusterNode.LastSeenMs for a node never heard from.
const NeverSeen uint32 = 1<<32 - 1

// ClusterPartition is one replicated partition of a ClusterState.
type ClusterPartition struct {
	Stream    []byte
	Partition uint32
	Group     uint64
	Leader    uint32 // node id; 0 when none is known
	Term      uint64
	Commit    uint64 // the Raft commit index
	Watermark uint64 // the offset after the last committed record
	Replicas  []ClusterReplica
}

// ClusterReplica is one replica of a ClusterPartition.
type ClusterReplica struct {
	Node        uint32
	Incarnation uint32
	Role        uint8
	Flags       uint8
	// Match is the replica's highest index known to match the leader's
	// log (from the leader's view; 0 when the answering node does not
	// lead): Commit - Match is its lag.
	Match uint64
}

// Sizes of the fixed parts, for decoders' bounds checks.
const (
	clusterNodeMinSize      = 4 + 4 + 2 + 2 + 1 + 4
	clusterPartitionMinSize = 2 + 4 + 8 + 4 + 8 + 8 + 8 + 1
	ClusterReplicaSize      = 4 + 4 + 1 + 1 + 8
	// MaxClusterNodes bounds a ClusterState's nodes.
	MaxClusterNodes = 1024
	// MaxClusterPartitions bounds a ClusterState's partitions.
	MaxClusterPartitions = 1 << 20
	// MaxReplicas bounds a partition's replicas.
	MaxReplicas = 255
)

// Type implements Message.
func (*ClusterState) Type() Type { return TypeClusterState }

// AppendBody implements Message.
func (m *ClusterState) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.ClusterID)
	dst = le.AppendUint32(dst, m.Node)
	dst = le.AppendUint32(dst, m.MetaLeader)
	dst = le.AppendUint16(dst, uint16(len(m.Nodes)))
	for _, n := range m.Nodes {
		dst = le.AppendUint32(dst, n.ID)
		dst = le.AppendUint32(dst, n.Incarnation)
		dst = appendBytes16(dst, n.ClientAddr)
		dst = appendBytes16(dst, n.ClusterAddr)
		dst = append(dst, n.State)
		dst = le.AppendUint32(dst, n.LastSeenMs)
	}
	dst = le.AppendUint32(dst, uint32(len(m.Partitions)))
	for _, p := range m.Partitions {
		dst = appendBytes16(dst, p.Stream)
		dst = le.AppendUint32(dst, p.Partition)
		dst = le.AppendUint64(dst, p.Group)
		dst = le.AppendUint32(dst, p.Leader)
		dst = le.AppendUint64(dst, p.Term)
		dst = le.AppendUint64(dst, p.Commit)
		dst = le.AppendUint64(dst, p.Watermark)
		dst = append(dst, uint8(len(p.Replicas)))
		for _, r := range p.Replicas {
			dst = le.AppendUint32(dst, r.Node)
			dst = le.AppendUint32(dst, r.Incarnation)
			dst = append(dst, r.Role, r.Flags)
			dst = le.AppendUint64(dst, r.Match)
		}
	}
	return dst
}

// DecodeClusterState decodes a ClusterState body; its byte fields alias
// body. Counts are checked against the bytes left before anything is
// allocated for them.
func DecodeClusterState(body []byte) (ClusterState, error) {
	r := reader{buf: body, what: "ClusterState"}
	m := ClusterState{ClusterID: r.bytes16("cluster id"), Node: r.u32("node"), MetaLeader: r.u32("meta leader")}
	nodes := int(r.u16("nodes"))
	if r.err == nil && (nodes > MaxClusterNodes || nodes*clusterNodeMinSize > len(r.buf)) {
		return m, fmt.Errorf("%w: ClusterState: %d nodes in %d bytes", ErrMalformed, nodes, len(r.buf))
	}
	for i := 0; i < nodes && r.err == nil; i++ {
		m.Nodes = append(m.Nodes, ClusterNode{ID: r.u32("node id"), Incarnation: r.u32("incarnation"),
			ClientAddr: r.bytes16("client address"), ClusterAddr: r.bytes16("cluster address"),
			State: r.u8("node state"), LastSeenMs: r.u32("last seen")})
	}
	partitions := int(r.u32("partitions"))
	if r.err == nil && (partitions > MaxClusterPartitions || partitions*clusterPartitionMinSize > len(r.buf)) {
		return m, fmt.Errorf("%w: ClusterState: %d partitions in %d bytes", ErrMalformed, partitions, len(r.buf))
	}
	for i := 0; i < partitions && r.err == nil; i++ {
		p := ClusterPartition{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.u64("group"),
			Leader: r.u32("leader"), Term: r.u64("term"), Commit: r.u64("commit"), Watermark: r.u64("watermark")}
		replicas := int(r.u8("replicas"))
		if r.err == nil && replicas*ClusterReplicaSize > len(r.buf) {
			return m, fmt.Errorf("%w: ClusterState: %d replicas in %d bytes", ErrMalformed, replicas, len(r.buf))
		}
		for j := 0; j < replicas && r.err == nil; j++ {
			p.Replicas = append(p.Replicas, ClusterReplica{Node: r.u32("replica node"),
				Incarnation: r.u32("replica incarnation"), Role: r.u8("role"), Flags: r.u8("replica flags"),
				Match: r.u64("match")})
		}
		m.Partitions = append(m.Partitions, p)
	}
	return m, r.done()
}
