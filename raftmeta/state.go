package raftmeta

import (
	"maps"
	"slices"
	"strconv"

	"github.com/ironbus/ironbus/replica"
)

// NodeState is where a node is in its membership.
type NodeState uint8

const (
	// NodeActive: the node takes replicas.
	NodeActive NodeState = 1
	// NodeRemoving: the node's replicas are being moved away; it takes no
	// new ones and is forgotten once no desired set names it.
	NodeRemoving NodeState = 2
)

func (s NodeState) String() string {
	switch s {
	case NodeActive:
		return "active"
	case NodeRemoving:
		return "removing"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

// Node is one registered broker.
type Node struct {
	ID uint32 `json:"id"`
	// Incarnation is the node's data directory incarnation; together with
	// ID it names the node's replicas (ReplicaID).
	Incarnation uint32            `json:"incarnation"`
	ClientAddr  string            `json:"client_addr"`
	ClusterAddr string            `json:"cluster_addr"`
	Tags        map[string]string `json:"tags,omitempty"`
	State       NodeState         `json:"state"`
}

// ReplicaID is the id the node's replicas have under its incarnation.
func (n Node) ReplicaID() replica.ReplicaID { return replica.NewReplicaID(n.ID, n.Incarnation) }

// Partition is one partition's replication: its group and its desired
// replica set, the first replica being the preferred leader.
type Partition struct {
	Group    replica.GroupID     `json:"group"`
	Replicas []replica.ReplicaID `json:"replicas"`
	// ConfigVersion counts the changes of Replicas; SetReplicaSet compares
	// it so two movers never overwrite each other.
	ConfigVersion uint64 `json:"config_version"`
}

// Stream is one stream's cluster configuration. Settings is opaque to
// the metadata group (the broker's stream settings, encoded by it).
type Stream struct {
	Name              string      `json:"name"`
	ReplicationFactor int         `json:"replication_factor"`
	Settings          []byte      `json:"settings,omitempty"`
	Partitions        []Partition `json:"partitions"`
}

// Group is a consumer-group definition. Settings is opaque here.
type Group struct {
	Name     string `json:"name"`
	Stream   string `json:"stream"`
	Kind     string `json:"kind"`
	Settings []byte `json:"settings,omitempty"`
}

// State is the replicated metadata. A State handed out by the API is a
// copy owned by the caller.
type State struct {
	// Index is the Raft index of the last change applied (a refused
	// command changes nothing, the index included).
	Index     uint64            `json:"index"`
	ClusterID uint64            `json:"cluster_id"`
	Nodes     map[uint32]Node   `json:"nodes"`
	Streams   map[string]Stream `json:"streams"`
	// Groups are keyed by stream, then name.
	Groups     map[string]map[string]Group `json:"groups"`
	ACLVersion uint64                      `json:"acl_version"`
	// LastGroup is the last replica.GroupID handed out; ids are never
	// reused, so a stream deleted and created again has new groups.
	LastGroup replica.GroupID `json:"last_group"`
}

func newState() *State {
	return &State{Nodes: map[uint32]Node{}, Streams: map[string]Stream{}, Groups: map[string]map[string]Group{}}
}

// Clone returns a deep copy.
func (s *State) Clone() State {
	out := *s
	out.Nodes = make(map[uint32]Node, len(s.Nodes))
	for id, n := range s.Nodes {
		n.Tags = maps.Clone(n.Tags)
		out.Nodes[id] = n
	}
	out.Streams = make(map[string]Stream, len(s.Streams))
	for name, st := range s.Streams {
		out.Streams[name] = st.clone()
	}
	out.Groups = make(map[string]map[string]Group, len(s.Groups))
	for stream, groups := range s.Groups {
		copied := make(map[string]Group, len(groups))
		for name, g := range groups {
			g.Settings = slices.Clone(g.Settings)
			copied[name] = g
		}
		out.Groups[stream] = copied
	}
	return out
}

func (s Stream) clone() Stream {
	s.Settings = slices.Clone(s.Settings)
	parts := make([]Partition, len(s.Partitions))
	for i, p := range s.Partitions {
		p.Replicas = slices.Clone(p.Replicas)
		parts[i] = p
	}
	s.Partitions = parts
	return s
}

// NodeIDs returns the registered node ids in order.
func (s *State) NodeIDs() []uint32 { return slices.Sorted(maps.Keys(s.Nodes)) }

// StreamNames returns the stream names in order.
func (s *State) StreamNames() []string { return slices.Sorted(maps.Keys(s.Streams)) }

// activeNodes returns the active nodes in id order.
func (s *State) activeNodes() []Node {
	var out []Node
	for _, id := range s.NodeIDs() {
		if n := s.Nodes[id]; n.State == NodeActive {
			out = append(out, n)
		}
	}
	return out
}

// ReplicasOn lists the (stream, partition) pairs whose desired set names
// the node (any incarnation), in order.
func (s *State) ReplicasOn(node uint32) []PartitionRef {
	var out []PartitionRef
	for _, name := range s.StreamNames() {
		for p, part := range s.Streams[name].Partitions {
			for _, r := range part.Replicas {
				if r.Node() == node {
					out = append(out, PartitionRef{Stream: name, Partition: uint32(p)})
					break
				}
			}
		}
	}
	return out
}

// PartitionRef names one partition of one stream.
type PartitionRef struct {
	Stream    string
	Partition uint32
}
