package raftmeta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Status is a member's view of the group, for `cluster status` and
// /metrics.
type Status struct {
	Node        uint32
	Incarnation uint32
	ClusterID   uint64
	// Role is "Leader", "Follower", "Candidate" or "Shutdown".
	Role       string
	Leader     uint32
	LeaderAddr string
	Term       uint64
	LastIndex  uint64
	Applied    uint64
	Voters     []uint32
	Nonvoters  []uint32
	// Latched is the storage failure that stopped this member, if any.
	Latched error
	// Stalled is the command this member's state machine could not
	// decode, if any.
	Stalled error
	// Refused are peers turned away because their incarnation is not the
	// registered one (until the leader registers it).
	Refused []Identity
}

// Status returns the member's view of the group.
func (m *Meta) Status() Status {
	state := m.fsm.current.Load()
	addr, id := m.raft.LeaderWithID()
	st := Status{Node: m.cfg.NodeID, Incarnation: m.cfg.Incarnation, ClusterID: state.ClusterID,
		Role: m.raft.State().String(), Leader: nodeOf(id), LeaderAddr: string(addr),
		Term: m.raft.CurrentTerm(), LastIndex: m.raft.LastIndex(), Applied: m.raft.AppliedIndex(),
		Latched: m.latch.latched(), Stalled: m.fsm.stallError()}
	if future := m.raft.GetConfiguration(); future.Error() == nil {
		for _, server := range future.Configuration().Servers {
			if server.Suffrage == raft.Voter {
				st.Voters = append(st.Voters, nodeOf(server.ID))
			} else {
				st.Nonvoters = append(st.Nonvoters, nodeOf(server.ID))
			}
		}
	}
	m.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(m.mu.refused)) {
		st.Refused = append(st.Refused, m.mu.refused[id].peer)
	}
	m.mu.Unlock()
	return st
}

// Leader returns the leader's node id and cluster address (0 and "" when
// none is known).
func (m *Meta) Leader() (uint32, string) {
	addr, id := m.raft.LeaderWithID()
	return nodeOf(id), string(addr)
}

// IsLeader reports whether this member leads the group.
func (m *Meta) IsLeader() bool { return m.raft.State() == raft.Leader }

// State returns this member's copy of the metadata: what it has applied,
// possibly behind the leader. Enough for everything off the admin path.
func (m *Meta) State() State { return m.fsm.current.Load().Clone() }

// Watch returns the state and a channel closed once a later state is
// applied. The broker reconciles its local replicas against each state it
// reads, so a change it was too slow to see is never missed: it sees the
// newer state instead.
func (m *Meta) Watch() (State, <-chan struct{}) {
	s, changed := m.fsm.watch()
	return s.Clone(), changed
}

// ReadState returns the state as of a moment inside the call (a
// linearizable read, for admin verbs): only the leader answers, after a
// barrier that a majority acknowledged.
func (m *Meta) ReadState(ctx context.Context) (State, error) {
	if err := m.usable(); err != nil {
		return State{}, err
	}
	if !m.IsLeader() {
		return State{}, m.notLeader()
	}
	ctx, cancel := m.requestContext(ctx)
	defer cancel()
	if err := wait(ctx, m.raft.Barrier(m.timeouts.Request)); err != nil {
		return State{}, m.mapError(err)
	}
	return m.State(), nil
}

// Apply proposes a command on the leader and returns its result (the
// typed calls below wrap it) or its refusal.
func (m *Meta) Apply(ctx context.Context, cmd Command) (any, error) {
	data, err := EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	if err := m.usable(); err != nil {
		return nil, err
	}
	if !m.IsLeader() {
		return nil, m.notLeader()
	}
	ctx, cancel := m.requestContext(ctx)
	defer cancel()
	future := m.raft.Apply(data, m.timeouts.Request)
	if err := wait(ctx, future); err != nil {
		return nil, m.mapError(err)
	}
	if err, ok := future.Response().(error); ok {
		return nil, err
	}
	return future.Response(), nil
}

// CreateStream creates a stream and places its replicas.
func (m *Meta) CreateStream(ctx context.Context, c CreateStream) (Stream, error) {
	v, err := m.Apply(ctx, &c)
	s, _ := v.(Stream)
	return s, err
}

// DeleteStream deletes a stream and its consumer groups.
func (m *Meta) DeleteStream(ctx context.Context, name string) error {
	_, err := m.Apply(ctx, &DeleteStream{Name: name})
	return err
}

// RegisterNode registers a node or updates it (RegisterNode command).
// The leader registers the group's members itself from their handshakes;
// this call is for nodes outside the group and for tags.
func (m *Meta) RegisterNode(ctx context.Context, n Node) (Node, error) {
	v, err := m.Apply(ctx, &RegisterNode{Node: n})
	out, _ := v.(Node)
	return out, err
}

// RemoveNode starts a node's removal (RemoveNode command).
func (m *Meta) RemoveNode(ctx context.Context, id uint32) error {
	_, err := m.Apply(ctx, &RemoveNode{Node: id})
	return err
}

// ForgetNode deletes a node no replica set names and takes it out of the
// group's membership.
func (m *Meta) ForgetNode(ctx context.Context, id uint32) error {
	if _, err := m.Apply(ctx, &ForgetNode{Node: id}); err != nil {
		return err
	}
	ctx, cancel := m.requestContext(ctx)
	defer cancel()
	if err := wait(ctx, m.raft.RemoveServer(serverID(id), 0, m.timeouts.Request)); err != nil {
		return m.mapError(err)
	}
	return nil
}

// SetReplicaSet replaces a partition's desired replica set
// (compare-and-set on its config version).
func (m *Meta) SetReplicaSet(ctx context.Context, c SetReplicaSet) (Partition, error) {
	v, err := m.Apply(ctx, &c)
	p, _ := v.(Partition)
	return p, err
}

// CreateGroup defines a consumer group.
func (m *Meta) CreateGroup(ctx context.Context, g Group) error {
	_, err := m.Apply(ctx, &CreateGroup{Group: g})
	return err
}

// DeleteGroup deletes a consumer-group definition.
func (m *Meta) DeleteGroup(ctx context.Context, stream, name string) error {
	_, err := m.Apply(ctx, &DeleteGroup{Stream: stream, Name: name})
	return err
}

// BumpACLVersion raises the account/ACL version and returns it.
func (m *Meta) BumpACLVersion(ctx context.Context) (uint64, error) {
	v, err := m.Apply(ctx, &BumpACLVersion{})
	n, _ := v.(uint64)
	return n, err
}

// AddMember adds a node to the group's membership at its cluster
// address: as a voter, or as a non-voting member that receives the log
// (a node beyond the 3 or 5 voters).
func (m *Meta) AddMember(ctx context.Context, node uint32, addr string, voter bool) error {
	if node == 0 || addr == "" {
		return fmt.Errorf("%w: member %d at %q", ErrInvalid, node, addr)
	}
	if err := m.usable(); err != nil {
		return err
	}
	ctx, cancel := m.requestContext(ctx)
	defer cancel()
	var future raft.IndexFuture
	if voter {
		future = m.raft.AddVoter(serverID(node), raft.ServerAddress(addr), 0, m.timeouts.Request)
	} else {
		future = m.raft.AddNonvoter(serverID(node), raft.ServerAddress(addr), 0, m.timeouts.Request)
	}
	if err := wait(ctx, future); err != nil {
		return m.mapError(err)
	}
	return nil
}

// LeadershipTransfer hands the leadership to the most caught-up voter
// before a planned stop, so the group does not wait out an election.
func (m *Meta) LeadershipTransfer(ctx context.Context) error {
	if err := m.usable(); err != nil {
		return err
	}
	if !m.IsLeader() {
		return m.notLeader()
	}
	ctx, cancel := m.requestContext(ctx)
	defer cancel()
	if err := wait(ctx, m.raft.LeadershipTransfer()); err != nil {
		return m.mapError(err)
	}
	return nil
}

// Close stops the member: it leaves the group's leadership to an
// election (call LeadershipTransfer first for a planned stop), closes
// the transport and the store.
func (m *Meta) Close() error {
	var err error
	m.closed.Do(func() {
		close(m.stop)
		<-m.done
		err = m.raft.Shutdown().Error()
		err = errors.Join(err, m.transport.Close(), m.store.Close())
	})
	return err
}

// usable fails when the member can serve nothing.
func (m *Meta) usable() error {
	if err := m.latch.latched(); err != nil {
		return err
	}
	if m.raft.State() == raft.Shutdown {
		return ErrClosed
	}
	return nil
}

func (m *Meta) notLeader() error {
	id, addr := m.Leader()
	return &NotLeaderError{Leader: id, LeaderAddr: addr, LeaderClientAddr: m.fsm.current.Load().Nodes[id].ClientAddr}
}

// mapError turns the library's errors into the package's.
func (m *Meta) mapError(err error) error {
	if latched := m.latch.latched(); latched != nil {
		return latched
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return m.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrIndeterminate, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("raftmeta: %w", err)
}

func (m *Meta) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, m.timeouts.Request)
}

// wait waits for a future or the context.
func wait(ctx context.Context, future raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- future.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reconcile runs on every member and acts while it leads: it sets the
// cluster id once, and registers the group's members (itself included)
// as their handshakes show them, a member back with a new incarnation as
// a new replica identity.
func (m *Meta) reconcile() {
	defer close(m.done)
	ticker := time.NewTicker(max(m.timeouts.Heartbeat/4, 10*time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-m.wake:
		case <-ticker.C:
		}
		if m.IsLeader() && m.usable() == nil {
			m.reconcileOnce()
		}
	}
}

func (m *Meta) reconcileOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeouts.Request)
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	state := m.fsm.current.Load()
	if state.ClusterID == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := binary.LittleEndian.Uint64(b[:]) | 1
		if _, err := m.Apply(ctx, &InitCluster{ClusterID: id}); err != nil && !errors.Is(err, ErrClusterInitialized) {
			m.logger.Warn("could not set the cluster id", "error", err)
			return
		}
	}
	for _, node := range m.registrations() {
		if _, err := m.Apply(ctx, &RegisterNode{Node: node}); err != nil {
			m.logger.Warn("could not register node", "peer", node.ID, "error", err)
		}
	}
}

// registrations are the RegisterNode changes the leader owes: itself and
// each member of the group whose handshake shows it unregistered or at
// other addresses. A member at another incarnation than registered is
// taken only from a recent refusal, the sign of a live process claiming
// that identity now; an identity remembered from an older handshake may
// be of a process long gone, and registering it back would undo the
// newer registration.
func (m *Meta) registrations() []Node {
	state := m.fsm.current.Load()
	members := map[uint32]bool{}
	if future := m.raft.GetConfiguration(); future.Error() == nil {
		for _, server := range future.Configuration().Servers {
			members[nodeOf(server.ID)] = true
		}
	}
	self := m.identity()
	candidates := []Identity{self}
	fresh := 2 * m.timeouts.Heartbeat
	m.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(m.mu.seen)) {
		peer := m.mu.seen[id]
		known, ok := state.Nodes[id]
		if r, refused := m.mu.refused[id]; refused && time.Since(r.at) < fresh {
			peer = r.peer
		} else if ok && known.Incarnation != peer.Incarnation {
			continue
		}
		if members[id] {
			candidates = append(candidates, peer)
		}
	}
	m.mu.Unlock()
	var out []Node
	for _, id := range candidates {
		known, ok := state.Nodes[id.Node]
		if ok && known.State != NodeActive {
			continue
		}
		tags := known.Tags
		if id.Node == self.Node {
			tags = m.cfg.Tags
		}
		if ok && known.Incarnation == id.Incarnation && known.ClusterAddr == id.ClusterAddr &&
			known.ClientAddr == id.ClientAddr && maps.Equal(known.Tags, tags) {
			continue
		}
		if ok && known.Incarnation != id.Incarnation {
			m.logger.Warn("node is back with another data directory; registering it as a new replica identity",
				"peer", id.Node, "old_incarnation", hex8(known.Incarnation), "incarnation", hex8(id.Incarnation))
		}
		out = append(out, Node{ID: id.Node, Incarnation: id.Incarnation, ClusterAddr: id.ClusterAddr, ClientAddr: id.ClientAddr, Tags: tags})
	}
	return out
}
