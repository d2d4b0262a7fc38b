package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/replica"
)

// The cluster tests run 3 members in one process on real TCP loopback
// with short timeouts. hashicorp/raft's timers and the transport are real
// time, so testing/synctest cannot drive them.

var testTimeouts = Timeouts{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond,
	LeaderLease: 100 * time.Millisecond, Commit: 5 * time.Millisecond, Request: 5 * time.Second, Dial: time.Second}

type member struct {
	cfg  Config
	meta *Meta
	// fail, once set, fails this member's store writes.
	fail atomic.Bool
}

func testLogger() *slog.Logger {
	if os.Getenv("RAFTMETA_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startCluster opens and bootstraps n members with static peers; tune,
// when given, adjusts each member's configuration.
func startCluster(t *testing.T, n int, tune ...func(*Config)) []*member {
	t.Helper()
	peers := map[uint32]string{}
	layers := map[uint32]StreamLayer{}
	for id := uint32(1); id <= uint32(n); id++ {
		layer, err := ListenTCP("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		layers[id] = layer
		peers[id] = layer.Addr().String()
	}
	members := make([]*member, n)
	for i := range members {
		id := uint32(i + 1)
		m := &member{}
		m.cfg = Config{NodeID: id, Incarnation: 0x1000 + id, DataDir: t.TempDir(), ClusterAddr: peers[id],
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", 7000+id), Peers: peers, Logger: testLogger(), Timeouts: testTimeouts,
			storeFault: m.storeFault}
		m.cfg.Layer = layers[id]
		for _, f := range tune {
			f(&m.cfg)
		}
		members[i] = m
		m.open(t)
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.close(t)
		}
	})
	for _, m := range members {
		eventually(t, fmt.Sprintf("node %d to see everyone registered", m.cfg.NodeID), func() bool { return registered(members, m) })
	}
	return members
}

func (m *member) storeFault(string) error {
	if m.fail.Load() {
		return syscall.EIO
	}
	return nil
}

func (m *member) open(t *testing.T) {
	t.Helper()
	cfg := m.cfg
	if cfg.Layer == nil {
		layer, err := ListenTCP(cfg.ClusterAddr)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Layer = layer
	}
	meta, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	m.meta = meta
	m.cfg.Layer = nil // a reopen listens again
}

func (m *member) close(t *testing.T) {
	t.Helper()
	if m.meta != nil {
		if err := m.meta.Close(); err != nil {
			t.Errorf("closing node %d: %v", m.cfg.NodeID, err)
		}
		m.meta = nil
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leader waits for one open member to lead, and for the leader to have
// registered every open member.
func leader(t *testing.T, members []*member) *member {
	t.Helper()
	var found *member
	eventually(t, "a leader", func() bool {
		found = nil
		for _, m := range members {
			if m.meta != nil && m.meta.IsLeader() {
				found = m
			}
		}
		return found != nil
	})
	return found
}

// change runs a change on whoever leads, again after a lost leadership.
func change(t *testing.T, members []*member, do func(*Meta) error) error {
	t.Helper()
	var err error
	for range 20 {
		err = do(leader(t, members).meta)
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrIndeterminate) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func registered(members []*member, on *member) bool {
	s := on.meta.State()
	if s.ClusterID == 0 {
		return false
	}
	for _, m := range members {
		if n, ok := s.Nodes[m.cfg.NodeID]; !ok || n.Incarnation != m.cfg.Incarnation {
			return false
		}
	}
	return true
}

func converged(members []*member) bool {
	var index uint64
	for i, m := range members {
		if m.meta == nil {
			continue
		}
		s := m.meta.State()
		if i > 0 && s.Index != index || s.Index == 0 {
			return false
		}
		index = s.Index
	}
	return true
}

func TestClusterBootstrapCreateAndPlace(t *testing.T) {
	members := startCluster(t, 3)
	for _, m := range members {
		eventually(t, fmt.Sprintf("node %d sees everyone registered", m.cfg.NodeID), func() bool { return registered(members, m) })
	}
	lead := leader(t, members)
	for _, m := range members {
		if err := m.meta.Bootstrap(); err != nil {
			t.Fatalf("a second bootstrap of node %d: %v", m.cfg.NodeID, err)
		}
	}
	ctx := context.Background()
	var orders Stream
	if err := change(t, members, func(meta *Meta) (err error) {
		orders, err = meta.CreateStream(ctx, CreateStream{Name: "orders", Partitions: 6, ReplicationFactor: 3})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := change(t, members, func(meta *Meta) error {
		_, err := meta.CreateStream(ctx, CreateStream{Name: "orders", Partitions: 1, ReplicationFactor: 1})
		return err
	}); !errors.Is(err, ErrStreamExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if err := change(t, members, func(meta *Meta) error {
		_, err := meta.CreateStream(ctx, CreateStream{Name: "wide", Partitions: 1, ReplicationFactor: 5})
		return err
	}); !errors.Is(err, ErrNotEnoughNodes) {
		t.Fatalf("factor above the nodes: %v", err)
	}
	firsts := map[uint32]int{}
	for _, p := range orders.Partitions {
		firsts[p.Replicas[0].Node()]++
	}
	if len(firsts) != 3 || firsts[1] != 2 || firsts[2] != 2 || firsts[3] != 2 {
		t.Fatalf("preferred leaders not spread: %v", firsts)
	}
	// A follower is not the place for changes; it names the leader.
	for _, m := range members {
		if m == lead {
			continue
		}
		var notLeader *NotLeaderError
		if _, err := m.meta.CreateStream(ctx, CreateStream{Name: "x", Partitions: 1, ReplicationFactor: 1}); !errors.As(err, &notLeader) {
			t.Fatalf("change on a follower: %v", err)
		} else if notLeader.Leader != 0 && (notLeader.Leader != lead.cfg.NodeID || notLeader.LeaderClientAddr != lead.cfg.ClientAddr) {
			t.Fatalf("follower names leader %d at %s, not %d at %s", notLeader.Leader, notLeader.LeaderClientAddr, lead.cfg.NodeID, lead.cfg.ClientAddr)
		}
		if _, err := m.meta.ReadState(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("linearizable read on a follower: %v", err)
		}
	}
	if s, err := lead.meta.ReadState(ctx); err == nil && !reflect2(s.Streams["orders"], orders) {
		t.Fatalf("linearizable read: %+v", s.Streams["orders"])
	}
	eventually(t, "the members to converge", func() bool { return converged(members) })
	st := lead.meta.Status()
	if st.Role != "Leader" || len(st.Voters) != 3 || st.ClusterID == 0 || st.Latched != nil {
		t.Fatalf("leader status %+v", st)
	}
}

func reflect2(a, b Stream) bool {
	if a.Name != b.Name || len(a.Partitions) != len(b.Partitions) {
		return false
	}
	for i := range a.Partitions {
		if !slices.Equal(a.Partitions[i].Replicas, b.Partitions[i].Replicas) {
			return false
		}
	}
	return true
}

func TestLeaderLossAndFollowerCatchUp(t *testing.T) {
	members := startCluster(t, 3)
	ctx := context.Background()
	first := leader(t, members)
	eventually(t, "registration", func() bool { return registered(members, first) })

	// Leadership transfer for a planned stop.
	if err := first.meta.LeadershipTransfer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "another leader", func() bool {
		l := leader(t, members)
		return l != first
	})

	// Kill the leader: the two others elect one and go on.
	old := leader(t, members)
	old.close(t)
	if err := change(t, members, func(meta *Meta) error {
		_, err := meta.CreateStream(ctx, CreateStream{Name: "after", Partitions: 2, ReplicationFactor: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	next := leader(t, members)
	if next == old {
		t.Fatal("a closed member leads")
	}
	// The old leader restarts on its store and catches up.
	old.open(t)
	state, changed := old.meta.Watch()
	for {
		if _, ok := state.Streams["after"]; ok {
			break
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("the restarted member never saw the stream")
		}
		state, changed = old.meta.Watch()
	}
	eventually(t, "the members to converge", func() bool { return converged(members) })
}

// A member restarted from a snapshot has the state the snapshot held plus
// what came after.
func TestRestartFromSnapshot(t *testing.T) {
	members := startCluster(t, 3)
	ctx := context.Background()
	for i := range 3 {
		if err := change(t, members, func(meta *Meta) error {
			_, err := meta.CreateStream(ctx, CreateStream{Name: fmt.Sprintf("s%d", i), Partitions: 1, ReplicationFactor: 3})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the members to converge", func() bool { return converged(members) })
	var follower *member
	for _, m := range members {
		if !m.meta.IsLeader() {
			follower = m
		}
	}
	if err := follower.meta.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	want := follower.meta.State()
	follower.close(t)
	follower.open(t)
	if got := follower.meta.State(); got.Index < want.Index || len(got.Streams) != 3 {
		t.Fatalf("restored at %d with %d streams, want %d and 3", got.Index, len(got.Streams), want.Index)
	}
}

// A member back with a new incarnation is not its old self: its old meta
// store is moved aside, peers refuse its replies until the leader
// registers the new incarnation, and the replica sets name the new
// identity.
func TestNewIncarnationIsNewIdentity(t *testing.T) {
	members := startCluster(t, 3)
	ctx := context.Background()
	var stream Stream
	if err := change(t, members, func(meta *Meta) (err error) {
		stream, err = meta.CreateStream(ctx, CreateStream{Name: "orders", Partitions: 3, ReplicationFactor: 3})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Restart a follower with another incarnation.
	var back *member
	for _, m := range members {
		if !m.meta.IsLeader() {
			back = m
		}
	}
	oldID := replica.NewReplicaID(back.cfg.NodeID, back.cfg.Incarnation)
	back.close(t)
	back.cfg.Incarnation = 0x7777
	newID := replica.NewReplicaID(back.cfg.NodeID, back.cfg.Incarnation)
	back.open(t)
	if _, err := os.Stat(back.cfg.DataDir + "/meta.foreign-" + hex8(oldID.Incarnation())); err != nil {
		t.Fatalf("old store not moved aside: %v", err)
	}
	for _, m := range members {
		eventually(t, fmt.Sprintf("node %d to see the new identity in every set", m.cfg.NodeID), func() bool {
			s := m.meta.State()
			if s.Nodes[back.cfg.NodeID].Incarnation != back.cfg.Incarnation {
				return false
			}
			for _, p := range s.Streams["orders"].Partitions {
				if slices.Contains(p.Replicas, oldID) || !slices.Contains(p.Replicas, newID) {
					return false
				}
			}
			return true
		})
	}
	s := back.meta.State()
	for i, p := range s.Streams["orders"].Partitions {
		if p.ConfigVersion <= stream.Partitions[i].ConfigVersion {
			t.Fatalf("partition %d version %d, was %d", i, p.ConfigVersion, stream.Partitions[i].ConfigVersion)
		}
	}
	if refused := leader(t, members).meta.Status().Refused; len(refused) != 0 {
		t.Fatalf("still refused after registration: %+v", refused)
	}
}

// The dialing side refuses a peer whose incarnation the metadata
// contradicts, and remembers it for the leader.
func TestAdmitRefusesAnotherIncarnation(t *testing.T) {
	members := startCluster(t, 3)
	lead := leader(t, members)
	eventually(t, "registration", func() bool { return registered(members, lead) })
	impostor := Identity{Node: 2, Incarnation: 0xdead, ClusterAddr: "x:1"}
	if err := lead.meta.admit(impostor, true); !errors.Is(err, ErrRefused) {
		t.Fatalf("dialed impostor admitted: %v", err)
	}
	if err := lead.meta.admit(Identity{Node: 2, Incarnation: 0x1002, ClusterID: lead.meta.State().ClusterID + 1}, false); !errors.Is(err, ErrRefused) {
		t.Fatalf("another cluster admitted: %v", err)
	}
	if err := lead.meta.admit(Identity{Node: lead.cfg.NodeID, Incarnation: 1}, false); !errors.Is(err, ErrRefused) {
		t.Fatalf("a peer with this node's id admitted: %v", err)
	}
}

// A failed store write latches the member for good; the others go on.
func TestStoreFailureLatches(t *testing.T) {
	members := startCluster(t, 3)
	ctx := context.Background()
	lead := leader(t, members)
	eventually(t, "registration", func() bool { return registered(members, lead) })
	lead.fail.Store(true)
	_, err := lead.meta.CreateStream(ctx, CreateStream{Name: "lost", Partitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, ErrLatched) {
		t.Fatalf("change on a failing leader: %v", err)
	}
	lead.fail.Store(false) // the disk "recovers": the latch must hold anyway
	if st := lead.meta.Status(); !errors.Is(st.Latched, ErrLatched) {
		t.Fatalf("status after the failure: %+v", st)
	}
	if _, err := lead.meta.ReadState(ctx); !errors.Is(err, ErrLatched) {
		t.Fatalf("read on a latched member: %v", err)
	}
	others := slices.DeleteFunc(slices.Clone(members), func(m *member) bool { return m == lead })
	if err := change(t, others, func(meta *Meta) error {
		_, err := meta.CreateStream(ctx, CreateStream{Name: "kept", Partitions: 1, ReplicationFactor: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if lead.meta.IsLeader() {
		t.Fatal("a latched member leads")
	}
	if _, ok := lead.meta.State().Streams["kept"]; ok {
		t.Fatal("a latched member applied a later change")
	}
}

// An identity remembered from an old handshake (a process long gone) is
// never registered back over a newer registration; only a recent refusal,
// a live process claiming the node now, is.
func TestStaleIdentityIsNotRegistered(t *testing.T) {
	members := startCluster(t, 3)
	lead := leader(t, members)
	stale := Identity{Node: 2, Incarnation: 0x0bad, ClusterAddr: members[1].cfg.ClusterAddr}
	if lead.cfg.NodeID == 2 {
		stale = Identity{Node: 3, Incarnation: 0x0bad, ClusterAddr: members[2].cfg.ClusterAddr}
	}
	lead.meta.mu.Lock()
	lead.meta.mu.seen[stale.Node] = stale
	lead.meta.mu.refused[stale.Node] = refusal{peer: stale, at: time.Now().Add(-time.Hour)}
	lead.meta.mu.Unlock()
	for _, node := range lead.meta.registrations() {
		if node.ID == stale.Node {
			t.Fatalf("stale identity up for registration: %+v", node)
		}
	}
	time.Sleep(4 * testTimeouts.Heartbeat)
	if got := lead.meta.State().Nodes[stale.Node].Incarnation; got != 0x1000+stale.Node {
		t.Fatalf("node %d registered at %08x", stale.Node, got)
	}
}

// A follower whose store fails stops for good without taking the process
// down (hashicorp/raft panics on a failed term write), and the two others
// go on.
func TestFollowerStoreFailureLatches(t *testing.T) {
	members := startCluster(t, 3)
	ctx := context.Background()
	lead := leader(t, members)
	var follower *member
	for _, m := range members {
		if m != lead {
			follower = m
		}
	}
	follower.fail.Store(true)
	for i := range 3 {
		if err := change(t, members, func(meta *Meta) error {
			_, err := meta.CreateStream(ctx, CreateStream{Name: fmt.Sprintf("s%d", i), Partitions: 1, ReplicationFactor: 1})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the follower to latch", func() bool { return follower.meta.Status().Latched != nil })
	// Long enough for an election timeout: a latched member must not
	// campaign (and so must not panic writing its term).
	time.Sleep(3 * testTimeouts.Heartbeat)
	if st := follower.meta.Status(); st.Role != "Shutdown" || !errors.Is(st.Latched, ErrLatched) {
		t.Fatalf("latched follower: %+v", st)
	}
	if _, err := follower.meta.CreateStream(ctx, CreateStream{Name: "x", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrLatched) {
		t.Fatalf("change on a latched follower: %v", err)
	}
}

// A member that missed more than the leader keeps in its log catches up
// from the leader's snapshot (InstallSnapshot), the least travelled path.
func TestFarBehindFollowerInstallsSnapshot(t *testing.T) {
	members := startCluster(t, 3, func(c *Config) { c.TrailingLogs = 2 })
	ctx := context.Background()
	lead := leader(t, members)
	var behind *member
	for _, m := range members {
		if m != lead {
			behind = m
		}
	}
	behind.close(t)
	for i := range 8 {
		if err := change(t, members, func(meta *Meta) error {
			_, err := meta.CreateStream(ctx, CreateStream{Name: fmt.Sprintf("s%d", i), Partitions: 1, ReplicationFactor: 2})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	lead = leader(t, members)
	if err := lead.meta.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	behind.open(t)
	eventually(t, "the far-behind member to catch up", func() bool { return len(behind.meta.State().Streams) == 8 })
	if got := behind.meta.raft.Stats()["last_snapshot_index"]; got == "0" {
		t.Fatal("caught up without a snapshot: the test no longer reaches InstallSnapshot")
	}
	eventually(t, "the members to converge", func() bool { return converged(members) })
}
