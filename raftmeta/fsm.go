package raftmeta

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/ironbus/ironbus/replica"
)

// snapshotVersion is the version byte in front of a snapshot's JSON.
const snapshotVersion = 1

// maxSnapshotBytes bounds what Restore reads.
const maxSnapshotBytes = 1 << 30

// fsm is the state machine. The state is copy-on-write: Apply changes a
// clone and publishes it only when the command succeeds, so a refused
// command leaves no trace, readers never lock, and a snapshot is the
// pointer current when it was taken.
type fsm struct {
	logger  *slog.Logger
	current atomic.Pointer[State]
	stalled atomic.Pointer[error]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each publish
}

func newFSM(logger *slog.Logger) *fsm {
	f := &fsm{logger: logger, changed: make(chan struct{})}
	f.current.Store(newState())
	return f
}

func (f *fsm) publish(s *State) {
	f.current.Store(s)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// watch returns the current state and a channel closed once a later one
// is published.
func (f *fsm) watch() (*State, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current.Load(), f.changed
}

func (f *fsm) stall(err error) {
	f.stalled.CompareAndSwap(nil, &err)
}

func (f *fsm) stallError() error {
	if p := f.stalled.Load(); p != nil {
		return *p
	}
	return nil
}

// Apply applies one committed entry. It returns the command's result (a
// value, or nil) or its refusal (an error).
func (f *fsm) Apply(entry *raft.Log) any {
	if entry.Type != raft.LogCommand {
		return nil
	}
	if err := f.stallError(); err != nil {
		return fmt.Errorf("%w: %w", ErrStalled, err)
	}
	cmd, err := DecodeCommand(entry.Data)
	if err != nil {
		// Skipping it would let this node's state part from the others'
		// (a newer binary applies it); stopping keeps it a stale prefix.
		f.logger.Error("metadata command does not decode; applying nothing more", "index", entry.Index, "error", err)
		f.stall(err)
		return fmt.Errorf("%w: %w", ErrStalled, err)
	}
	next := f.current.Load().Clone()
	result, err := applyCommand(&next, cmd)
	if err != nil {
		return err
	}
	next.Index = entry.Index
	f.publish(&next)
	return result
}

// applyCommand changes s as cmd says, or refuses it with a typed error
// (s is then to be discarded). Deterministic: it reads only s and cmd and
// never ranges over a map where the order would show.
func applyCommand(s *State, cmd Command) (any, error) {
	switch c := cmd.(type) {
	case *InitCluster:
		if s.ClusterID != 0 {
			return nil, fmt.Errorf("%w: %016x", ErrClusterInitialized, s.ClusterID)
		}
		s.ClusterID = c.ClusterID
		return s.ClusterID, nil
	case *RegisterNode:
		return applyRegister(s, c.Node)
	case *RemoveNode:
		return nil, applyRemove(s, c.Node)
	case *ForgetNode:
		if _, ok := s.Nodes[c.Node]; !ok {
			return nil, fmt.Errorf("%w: %d", ErrUnknownNode, c.Node)
		}
		if refs := s.ReplicasOn(c.Node); len(refs) > 0 {
			return nil, fmt.Errorf("%w: node %d in %d replica sets", ErrNodeInUse, c.Node, len(refs))
		}
		delete(s.Nodes, c.Node)
		return nil, nil
	case *CreateStream:
		return applyCreateStream(s, c)
	case *DeleteStream:
		if _, ok := s.Streams[c.Name]; !ok {
			return nil, fmt.Errorf("%w: %s", ErrNoSuchStream, c.Name)
		}
		delete(s.Streams, c.Name)
		delete(s.Groups, c.Name)
		return nil, nil
	case *SetReplicaSet:
		return applySetReplicaSet(s, c)
	case *CreateGroup:
		if _, ok := s.Streams[c.Group.Stream]; !ok {
			return nil, fmt.Errorf("%w: %s", ErrNoSuchStream, c.Group.Stream)
		}
		if _, ok := s.Groups[c.Group.Stream][c.Group.Name]; ok {
			return nil, fmt.Errorf("%w: %s/%s", ErrGroupExists, c.Group.Stream, c.Group.Name)
		}
		if s.Groups[c.Group.Stream] == nil {
			s.Groups[c.Group.Stream] = map[string]Group{}
		}
		s.Groups[c.Group.Stream][c.Group.Name] = c.Group
		return c.Group, nil
	case *DeleteGroup:
		if _, ok := s.Groups[c.Stream][c.Name]; !ok {
			return nil, fmt.Errorf("%w: %s/%s", ErrNoSuchGroup, c.Stream, c.Name)
		}
		delete(s.Groups[c.Stream], c.Name)
		if len(s.Groups[c.Stream]) == 0 {
			delete(s.Groups, c.Stream)
		}
		return nil, nil
	case *BumpACLVersion:
		s.ACLVersion++
		return s.ACLVersion, nil
	}
	return nil, fmt.Errorf("%w: operation %s has no apply", ErrMalformed, cmd.Op())
}

func applyRegister(s *State, n Node) (any, error) {
	n.State = NodeActive
	for _, id := range s.NodeIDs() {
		if other := s.Nodes[id]; id != n.ID && other.ClusterAddr == n.ClusterAddr {
			return nil, fmt.Errorf("%w: %s is node %d's", ErrAddressInUse, n.ClusterAddr, id)
		}
	}
	old, known := s.Nodes[n.ID]
	if known && old.State == NodeRemoving {
		return nil, fmt.Errorf("%w: node %d", ErrNodeRemoving, n.ID)
	}
	s.Nodes[n.ID] = n
	if known && old.Incarnation != n.Incarnation {
		// The node came back with another data directory: its old
		// replicas are gone with it. The new identity takes their places
		// as a new member of each set.
		was, now := old.ReplicaID(), n.ReplicaID()
		for _, name := range s.StreamNames() {
			stream := s.Streams[name]
			for p := range stream.Partitions {
				part := &stream.Partitions[p]
				if i := slices.Index(part.Replicas, was); i >= 0 {
					part.Replicas[i] = now
					part.ConfigVersion++
				}
			}
		}
	}
	return n, nil
}

func applyRemove(s *State, id uint32) error {
	n, ok := s.Nodes[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	n.State = NodeRemoving
	s.Nodes[id] = n
	for _, name := range s.StreamNames() {
		stream := s.Streams[name]
		for p := range stream.Partitions {
			part := &stream.Partitions[p]
			i := slices.IndexFunc(part.Replicas, func(r replica.ReplicaID) bool { return r.Node() == id })
			if i < 0 {
				continue
			}
			// Without a free node the replica stays until one joins: a
			// set is never shrunk below its factor behind the user's back.
			if to, ok := replacement(s, part.Replicas, id); ok {
				part.Replicas[i] = to.ReplicaID()
				part.ConfigVersion++
			}
		}
	}
	return nil
}

func applyCreateStream(s *State, c *CreateStream) (any, error) {
	if _, ok := s.Streams[c.Name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrStreamExists, c.Name)
	}
	sets, err := place(s, c.Partitions, c.ReplicationFactor)
	if err != nil {
		return nil, err
	}
	stream := Stream{Name: c.Name, ReplicationFactor: c.ReplicationFactor, Settings: slices.Clone(c.Settings),
		Partitions: make([]Partition, c.Partitions)}
	for p, set := range sets {
		s.LastGroup++
		stream.Partitions[p] = Partition{Group: s.LastGroup, Replicas: set, ConfigVersion: 1}
	}
	s.Streams[c.Name] = stream
	return stream.clone(), nil
}

func applySetReplicaSet(s *State, c *SetReplicaSet) (any, error) {
	stream, ok := s.Streams[c.Stream]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoSuchStream, c.Stream)
	}
	if int(c.Partition) >= len(stream.Partitions) {
		return nil, fmt.Errorf("%w: %s/%d", ErrNoSuchPartition, c.Stream, c.Partition)
	}
	part := &stream.Partitions[c.Partition]
	if part.ConfigVersion != c.ExpectVersion {
		return nil, fmt.Errorf("%w: %s/%d is at %d, not %d", ErrVersionMismatch, c.Stream, c.Partition, part.ConfigVersion, c.ExpectVersion)
	}
	for _, r := range c.Replicas {
		n, ok := s.Nodes[r.Node()]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %d", ErrUnknownNode, r.Node())
		case n.Incarnation != r.Incarnation():
			return nil, fmt.Errorf("%w: replica %d/%08x, node %d is at %08x", ErrStaleIncarnation, r.Node(), r.Incarnation(), n.ID, n.Incarnation)
		case n.State != NodeActive && !slices.Contains(part.Replicas, r):
			return nil, fmt.Errorf("%w: node %d takes no new replica", ErrNodeRemoving, n.ID)
		}
	}
	part.Replicas = slices.Clone(c.Replicas)
	part.ConfigVersion++
	return *part, nil
}

type fsmSnapshot struct {
	state *State
}

// Snapshot captures the published state; Persist runs concurrently with
// later Applies, which publish new states and never touch this one.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return fsmSnapshot{state: f.current.Load()}, nil
}

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	err := w.WriteByte(snapshotVersion)
	if err == nil {
		err = json.NewEncoder(w).Encode(s.state)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftmeta: writing a snapshot: %w", err)
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(source io.ReadCloser) error {
	defer source.Close()
	s, err := decodeSnapshot(io.LimitReader(source, maxSnapshotBytes))
	if err != nil {
		return err
	}
	f.stalled.Store(nil)
	f.publish(s)
	return nil
}

func decodeSnapshot(r io.Reader) (*State, error) {
	br := bufio.NewReader(r)
	version, err := br.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot: %w", ErrMalformed, err)
	}
	if version > snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d, this binary reads up to %d", ErrNewerVersion, version, snapshotVersion)
	}
	if version == 0 {
		return nil, fmt.Errorf("%w: snapshot version 0", ErrMalformed)
	}
	s := newState()
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %w", ErrMalformed, err)
	}
	if s.Nodes == nil || s.Streams == nil || s.Groups == nil {
		return nil, fmt.Errorf("%w: snapshot without nodes, streams or groups", ErrMalformed)
	}
	for id, n := range s.Nodes {
		if id != n.ID {
			return nil, fmt.Errorf("%w: snapshot names node %d under id %d", ErrMalformed, n.ID, id)
		}
	}
	return s, nil
}
