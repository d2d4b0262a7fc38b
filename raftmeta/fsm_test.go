package raftmeta

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ironbus/ironbus/replica"
)

// testState is a state with nodes 1..3 active at incarnation 100+id.
func testState(t testing.TB) State {
	t.Helper()
	s := newState().Clone()
	for id := uint32(1); id <= 3; id++ {
		mustApply(t, &s, &RegisterNode{Node: Node{ID: id, Incarnation: 100 + id, ClusterAddr: "n" + string(rune('0'+id)) + ":1"}})
	}
	return s
}

func mustApply(t testing.TB, s *State, c Command) any {
	t.Helper()
	next := s.Clone()
	v, err := applyCommand(&next, c)
	if err != nil {
		t.Fatalf("%s: %v", c.Op(), err)
	}
	*s = next
	return v
}

func refuse(t *testing.T, s State, c Command, want error) {
	t.Helper()
	next := s.Clone()
	if _, err := applyCommand(&next, c); !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", c.Op(), err, want)
	}
}

func TestApplyRefusesTyped(t *testing.T) {
	s := testState(t)
	mustApply(t, &s, &CreateStream{Name: "orders", Partitions: 2, ReplicationFactor: 3})
	refuse(t, s, &CreateStream{Name: "orders", Partitions: 2, ReplicationFactor: 1}, ErrStreamExists)
	refuse(t, s, &CreateStream{Name: "big", Partitions: 1, ReplicationFactor: 4}, ErrNotEnoughNodes)
	refuse(t, s, &DeleteStream{Name: "none"}, ErrNoSuchStream)
	refuse(t, s, &RemoveNode{Node: 9}, ErrUnknownNode)
	refuse(t, s, &ForgetNode{Node: 1}, ErrNodeInUse)
	mustApply(t, &s, &InitCluster{ClusterID: 5})
	refuse(t, s, &InitCluster{ClusterID: 6}, ErrClusterInitialized)
	refuse(t, s, &RegisterNode{Node: Node{ID: 4, Incarnation: 1, ClusterAddr: "n1:1"}}, ErrAddressInUse)
	set := []replica.ReplicaID{replica.NewReplicaID(1, 101), replica.NewReplicaID(2, 102)}
	refuse(t, s, &SetReplicaSet{Stream: "orders", Partition: 0, Replicas: set, ExpectVersion: 7}, ErrVersionMismatch)
	refuse(t, s, &SetReplicaSet{Stream: "orders", Partition: 5, Replicas: set, ExpectVersion: 1}, ErrNoSuchPartition)
	refuse(t, s, &SetReplicaSet{Stream: "orders", Partition: 0, Replicas: []replica.ReplicaID{replica.NewReplicaID(1, 55)}, ExpectVersion: 1}, ErrStaleIncarnation)
	refuse(t, s, &SetReplicaSet{Stream: "orders", Partition: 0, Replicas: []replica.ReplicaID{replica.NewReplicaID(8, 1)}, ExpectVersion: 1}, ErrUnknownNode)
	p := mustApply(t, &s, &SetReplicaSet{Stream: "orders", Partition: 0, Replicas: set, ExpectVersion: 1}).(Partition)
	if p.ConfigVersion != 2 || !reflect.DeepEqual(p.Replicas, set) {
		t.Fatalf("after set: %+v", p)
	}
	refuse(t, s, &CreateGroup{Group: Group{Name: "g", Stream: "none", Kind: "work"}}, ErrNoSuchStream)
	mustApply(t, &s, &CreateGroup{Group: Group{Name: "g", Stream: "orders", Kind: "work"}})
	refuse(t, s, &CreateGroup{Group: Group{Name: "g", Stream: "orders", Kind: "work"}}, ErrGroupExists)
	refuse(t, s, &DeleteGroup{Stream: "orders", Name: "h"}, ErrNoSuchGroup)
	mustApply(t, &s, &DeleteStream{Name: "orders"})
	if len(s.Groups) != 0 {
		t.Fatalf("groups outlived their stream: %v", s.Groups)
	}
}

func TestApplyRefusedLeavesNoTrace(t *testing.T) {
	f := newFSM(slog.New(slog.DiscardHandler))
	apply := func(index uint64, c Command) any {
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	}
	apply(1, &RegisterNode{Node: Node{ID: 1, Incarnation: 1, ClusterAddr: "a:1"}})
	before := f.current.Load()
	if err, _ := apply(2, &CreateStream{Name: "s", Partitions: 1, ReplicationFactor: 2}).(error); !errors.Is(err, ErrNotEnoughNodes) {
		t.Fatalf("response %v", err)
	}
	if f.current.Load() != before {
		t.Fatal("a refused command published a state")
	}
	// An entry this binary cannot decode stalls the machine.
	if err, _ := f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: []byte{CommandVersion + 1}}).(error); !errors.Is(err, ErrStalled) {
		t.Fatalf("newer command: %v", err)
	}
	if err, _ := apply(4, &BumpACLVersion{}).(error); !errors.Is(err, ErrStalled) || f.current.Load().ACLVersion != 0 {
		t.Fatalf("applied after a stall: %v", err)
	}
}

// Placement: every partition gets distinct nodes, preferred leaders are
// spread evenly across streams, replicas too.
func TestPlacementSpreads(t *testing.T) {
	s := testState(t)
	mustApply(t, &s, &RegisterNode{Node: Node{ID: 4, Incarnation: 104, ClusterAddr: "n4:1"}})
	mustApply(t, &s, &CreateStream{Name: "a", Partitions: 6, ReplicationFactor: 3})
	mustApply(t, &s, &CreateStream{Name: "b", Partitions: 2, ReplicationFactor: 3})
	mustApply(t, &s, &CreateStream{Name: "c", Partitions: 5, ReplicationFactor: 1})
	leaders, replicas := map[uint32]int{}, map[uint32]int{}
	groups := map[replica.GroupID]bool{}
	for _, name := range s.StreamNames() {
		st := s.Streams[name]
		for p, part := range st.Partitions {
			if len(part.Replicas) != st.ReplicationFactor || part.ConfigVersion != 1 {
				t.Fatalf("%s/%d: %+v", name, p, part)
			}
			seen := map[uint32]bool{}
			for i, r := range part.Replicas {
				if seen[r.Node()] || r.Incarnation() != 100+r.Node() {
					t.Fatalf("%s/%d: replicas %v", name, p, part.Replicas)
				}
				seen[r.Node()] = true
				replicas[r.Node()]++
				if i == 0 {
					leaders[r.Node()]++
				}
			}
			if groups[part.Group] || part.Group == 0 {
				t.Fatalf("group id %d reused", part.Group)
			}
			groups[part.Group] = true
		}
	}
	// 13 partitions over 4 nodes: 3 or 4 preferred leaders each; 29
	// replicas: 7 or 8 each.
	for id := uint32(1); id <= 4; id++ {
		if leaders[id] < 3 || leaders[id] > 4 || replicas[id] < 7 || replicas[id] > 8 {
			t.Fatalf("uneven: leaders %v replicas %v", leaders, replicas)
		}
	}
	// Deterministic: the same state places the same way.
	again := testState(t)
	mustApply(t, &again, &RegisterNode{Node: Node{ID: 4, Incarnation: 104, ClusterAddr: "n4:1"}})
	mustApply(t, &again, &CreateStream{Name: "a", Partitions: 6, ReplicationFactor: 3})
	if !reflect.DeepEqual(again.Streams["a"], s.Streams["a"]) {
		t.Fatal("placement differs between two applies of the same history")
	}
	// Group ids are not reused after a delete.
	mustApply(t, &s, &DeleteStream{Name: "b"})
	recreated := mustApply(t, &s, &CreateStream{Name: "b", Partitions: 1, ReplicationFactor: 1}).(Stream)
	if groups[recreated.Partitions[0].Group] {
		t.Fatalf("recreated stream reuses group %d", recreated.Partitions[0].Group)
	}
}

func TestNewIncarnationRewritesReplicaSets(t *testing.T) {
	s := testState(t)
	mustApply(t, &s, &CreateStream{Name: "orders", Partitions: 3, ReplicationFactor: 3})
	mustApply(t, &s, &RegisterNode{Node: Node{ID: 2, Incarnation: 999, ClusterAddr: "n2:1"}})
	for p, part := range s.Streams["orders"].Partitions {
		if part.ConfigVersion != 2 {
			t.Fatalf("partition %d version %d", p, part.ConfigVersion)
		}
		for _, r := range part.Replicas {
			if r.Node() == 2 && r != replica.NewReplicaID(2, 999) {
				t.Fatalf("partition %d still names %x", p, uint64(r))
			}
		}
	}
	// Re-registering the same incarnation changes no set.
	mustApply(t, &s, &RegisterNode{Node: Node{ID: 2, Incarnation: 999, ClusterAddr: "n2:2"}})
	if v := s.Streams["orders"].Partitions[0].ConfigVersion; v != 2 {
		t.Fatalf("version %d after an address change", v)
	}
}

func TestRemoveNodeMovesReplicas(t *testing.T) {
	s := testState(t)
	mustApply(t, &s, &CreateStream{Name: "orders", Partitions: 4, ReplicationFactor: 2})
	mustApply(t, &s, &RegisterNode{Node: Node{ID: 4, Incarnation: 104, ClusterAddr: "n4:1"}})
	mustApply(t, &s, &RemoveNode{Node: 1})
	if refs := s.ReplicasOn(1); len(refs) != 0 {
		t.Fatalf("node 1 still holds %v", refs)
	}
	refuse(t, s, &CreateStream{Name: "x", Partitions: 1, ReplicationFactor: 4}, ErrNotEnoughNodes)
	refuse(t, s, &RegisterNode{Node: Node{ID: 1, Incarnation: 101, ClusterAddr: "n1:1"}}, ErrNodeRemoving)
	mustApply(t, &s, &ForgetNode{Node: 1})
	if _, ok := s.Nodes[1]; ok {
		t.Fatal("node 1 not forgotten")
	}
}

type memorySink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memorySink) ID() string    { return "test" }
func (s *memorySink) Cancel() error { s.cancelled = true; return nil }
func (s *memorySink) Close() error  { return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	f := newFSM(slog.New(slog.DiscardHandler))
	s := testState(t)
	mustApply(t, &s, &InitCluster{ClusterID: 77})
	mustApply(t, &s, &CreateStream{Name: "orders", Partitions: 3, ReplicationFactor: 2, Settings: []byte("opaque")})
	mustApply(t, &s, &CreateGroup{Group: Group{Name: "g", Stream: "orders", Kind: "work", Settings: []byte{0}}})
	mustApply(t, &s, &BumpACLVersion{})
	s.Index = 42
	f.publish(&s)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memorySink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	restored := newFSM(slog.New(slog.DiscardHandler))
	_, changed := restored.watch()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("restore did not wake watchers")
	}
	if got := restored.current.Load(); !reflect.DeepEqual(*got, s) {
		t.Fatalf("restored\n%+v\nwant\n%+v", *got, s)
	}
	// A damaged or newer snapshot is refused, typed.
	if err := restored.Restore(io.NopCloser(bytes.NewReader([]byte{snapshotVersion + 1, '{', '}'}))); !errors.Is(err, ErrNewerVersion) {
		t.Fatalf("newer snapshot: %v", err)
	}
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()[:20]))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("cut snapshot: %v", err)
	}
}
