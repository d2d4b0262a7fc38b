package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// ErrNotClustered: ClusterInfo was asked of a broker that is not a member
// of a replicated cluster (no cluster capability on the connection).
var ErrNotClustered = errors.New("ironbus client: the broker is not a cluster member")

// ClusterInfoOptions shape ClusterInfo.
type ClusterInfoOptions struct {
	// Partitions lists the replicated partitions (leader, replicas,
	// watermark), not only the nodes.
	Partitions bool
	// Stream, with Partitions, limits them to one stream's; "" is all.
	Stream string
}

// NodeState is how the answering member sees another node.
type NodeState uint8

// Node states.
const (
	NodeUnknown  = NodeState(wire.NodeUnknown) // not heard from since the answering node started
	NodeUp       = NodeState(wire.NodeUp)
	NodeDown     = NodeState(wire.NodeDown)
	NodeRemoving = NodeState(wire.NodeRemoving)
)

func (s NodeState) String() string {
	switch s {
	case NodeUnknown:
		return "unknown"
	case NodeUp:
		return "up"
	case NodeDown:
		return "down"
	case NodeRemoving:
		return "removing"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ReplicaRole is a replica's part in its partition's replication group.
type ReplicaRole uint8

// Replica roles.
const (
	RoleVoter    = ReplicaRole(wire.RoleVoter)
	RoleLearner  = ReplicaRole(wire.RoleLearner)  // catching up; not counted for a majority
	RoleOutgoing = ReplicaRole(wire.RoleOutgoing) // a voter leaving in a joint change
)

func (r ReplicaRole) String() string {
	switch r {
	case RoleVoter:
		return "voter"
	case RoleLearner:
		return "learner"
	case RoleOutgoing:
		return "outgoing"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ClusterState is a cluster as one member sees it: another member's view
// may lag by a heartbeat.
type ClusterState struct {
	ClusterID  string
	Node       uint32 // the member that answered
	MetaLeader uint32 // the metadata group's leader; 0 when none is known
	Nodes      []ClusterNode
	Partitions []ClusterPartition // with ClusterInfoOptions.Partitions
}

// ClusterNode is one member of the cluster.
type ClusterNode struct {
	ID          uint32
	Incarnation uint32 // of the node's data directory
	ClientAddr  string // where clients connect
	ClusterAddr string // where peers connect
	State       NodeState
	// LastSeen is how long ago the answering member last heard from the
	// node; Seen is false when it never did.
	LastSeen time.Duration
	Seen     bool
}

// ClusterPartition is one replicated partition.
type ClusterPartition struct {
	Stream    string
	Partition uint32
	Group     uint64 // the replication group's id
	Leader    uint32 // node id; 0 when none is known
	Term      uint64
	Commit    uint64 // the replication log's commit index
	Watermark uint64 // the offset after the last committed record
	Replicas  []ClusterReplica
}

// ClusterReplica is one replica of a partition.
type ClusterReplica struct {
	Node        uint32
	Incarnation uint32
	Role        ReplicaRole
	Damaged     bool // found a damaged entry: neither votes nor serves until rebuilt
	Latched     bool // stopped after a storage failure
	// Match is the replica's highest log index known to match the
	// leader's (from the leader's view; 0 when the answering member does
	// not lead): Commit - Match is its lag.
	Match uint64
}

// LeaderAddr returns the client address of the node leading p, "" when
// no leader is known or the node is not listed.
func (s ClusterState) LeaderAddr(p ClusterPartition) string {
	for _, n := range s.Nodes {
		if p.Leader != 0 && n.ID == p.Leader {
			return n.ClientAddr
		}
	}
	return ""
}

// ClusterInfo asks the member this Client is connected to for the
// cluster's nodes and, with opts.Partitions, its replicated partitions.
// A broker that is not a cluster member fails it with ErrNotClustered.
func (c *Client) ClusterInfo(ctx context.Context, opts ClusterInfoOptions) (ClusterState, error) {
	if c.info.Capabilities&wire.CapCluster == 0 {
		return ClusterState{}, ErrNotClustered
	}
	m := &wire.ClusterInfo{}
	if opts.Partitions {
		m.Flags |= wire.ClusterInfoPartitions
		if opts.Stream != "" {
			if err := checkName("stream", opts.Stream); err != nil {
				return ClusterState{}, err
			}
			m.Stream = []byte(opts.Stream)
		}
	}
	reply, err := c.request(ctx, m)
	if err != nil {
		return ClusterState{}, err
	}
	state, ok := reply.(*wire.ClusterState)
	if !ok {
		return ClusterState{}, fmt.Errorf("%w: a %s answered ClusterInfo", ErrProtocol, reply.Type())
	}
	return clusterStateOf(state), nil
}

// decodeClusterState decodes a ClusterState answer from a copy of the
// frame body, which its byte fields then alias.
func decodeClusterState(body []byte) (*wire.ClusterState, error) {
	state, err := wire.DecodeClusterState(bytes.Clone(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return &state, nil
}

func clusterStateOf(m *wire.ClusterState) ClusterState {
	s := ClusterState{ClusterID: string(m.ClusterID), Node: m.Node, MetaLeader: m.MetaLeader,
		Nodes: make([]ClusterNode, 0, len(m.Nodes))}
	for _, n := range m.Nodes {
		node := ClusterNode{ID: n.ID, Incarnation: n.Incarnation, ClientAddr: string(n.ClientAddr),
			ClusterAddr: string(n.ClusterAddr), State: NodeState(n.State), Seen: n.LastSeenMs != wire.NeverSeen}
		if node.Seen {
			node.LastSeen = time.Duration(n.LastSeenMs) * time.Millisecond
		}
		s.Nodes = append(s.Nodes, node)
	}
	for _, p := range m.Partitions {
		partition := ClusterPartition{Stream: string(p.Stream), Partition: p.Partition, Group: p.Group,
			Leader: p.Leader, Term: p.Term, Commit: p.Commit, Watermark: p.Watermark,
			Replicas: make([]ClusterReplica, 0, len(p.Replicas))}
		for _, r := range p.Replicas {
			partition.Replicas = append(partition.Replicas, ClusterReplica{Node: r.Node, Incarnation: r.Incarnation,
				Role: ReplicaRole(r.Role), Damaged: r.Flags&wire.ReplicaDamaged != 0,
				Latched: r.Flags&wire.ReplicaLatched != 0, Match: r.Match})
		}
		s.Partitions = append(s.Partitions, partition)
	}
	return s
}

// TransferResult is the outcome of TransferLeadership.
type TransferResult struct {
	Stream    string
	Partition uint32
	From      uint32 // the node that led when the request arrived
	Leader    uint32 // the node that leads now: the one asked for
	Term      uint64 // the term it leads in
	// Elapsed is how long the move took, as the old leader measured it:
	// appends to the partition paused for about this long. 0 when the
	// node asked for already led.
	Elapsed time.Duration
}

// TransferLeadership moves the leadership of one partition of a
// replicated stream to node to, one of the partition's voters (to
// balance leaders across nodes, or to empty a node before maintenance),
// and returns once that node leads and takes appends. The request goes to
// the partition's leader, following not_leader answers like a Produce;
// while the leadership moves, the partition's producers meet not_leader
// and follow too. A broker that is not a cluster member fails it with
// ErrNotClustered; a node that holds no voter of the partition, a
// partition the stream does not have or a stream that is not replicated
// with a *wire.Error invalid_request.
func (c *Client) TransferLeadership(ctx context.Context, stream string, partition uint32, to uint32) (TransferResult, error) {
	if c.info.Capabilities&wire.CapCluster == 0 {
		return TransferResult{}, ErrNotClustered
	}
	if err := checkName("stream", stream); err != nil {
		return TransferResult{}, err
	}
	if to == 0 {
		return TransferResult{}, fmt.Errorf("%w: node ids start at 1", ErrInvalidArgument)
	}
	m := &wire.LeaderTransfer{Stream: []byte(stream), Partition: partition, To: to}
	key := streamPartition{stream: stream, partition: partition}
	var rd redirect
	for conn := c.routeOf(key); ; {
		reply, err := conn.request(ctx, m)
		if !redirectable(err) {
			if err != nil {
				return TransferResult{}, err
			}
			return transferResultOf(reply)
		}
		if conn, err = c.follow(ctx, conn, key, err, &rd); conn == nil {
			return TransferResult{}, err
		}
	}
}

func transferResultOf(reply wire.Message) (TransferResult, error) {
	moved, ok := reply.(*wire.LeaderTransferred)
	if !ok {
		return TransferResult{}, fmt.Errorf("%w: a %s answered LeaderTransfer", ErrProtocol, reply.Type())
	}
	return TransferResult{Stream: string(moved.Stream), Partition: moved.Partition, From: moved.From, Leader: moved.Leader,
		Term: moved.Term, Elapsed: time.Duration(moved.ElapsedUs) * time.Microsecond}, nil
}
