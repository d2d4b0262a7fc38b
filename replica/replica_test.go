package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/record"
)

// testGroup is a small in-memory cluster: messages queue in a mailbox and
// are delivered by settle, which runs until nothing moves.
type testGroup struct {
	t        *testing.T
	ids      []ReplicaID
	replicas map[ReplicaID]*Replica
	journals map[ReplicaID]*MemoryJournal
	applied  map[ReplicaID][]Entry
	mailbox  []envelope
	down     map[ReplicaID]bool
}

type envelope struct {
	to      ReplicaID
	message []byte
}

func newTestGroup(t *testing.T, n int) *testGroup {
	t.Helper()
	g := &testGroup{t: t, replicas: map[ReplicaID]*Replica{}, journals: map[ReplicaID]*MemoryJournal{},
		applied: map[ReplicaID][]Entry{}, down: map[ReplicaID]bool{}}
	for i := 1; i <= n; i++ {
		g.ids = append(g.ids, NewReplicaID(uint32(i), 7))
	}
	for _, id := range g.ids {
		g.journals[id] = NewMemoryJournal()
		g.start(id)
		if err := g.replicas[id].Bootstrap(g.ids); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func (g *testGroup) start(id ReplicaID) {
	g.t.Helper()
	r, err := New(Config{ID: id, Group: 1, Journal: g.journals[id],
		Send: func(to ReplicaID, message []byte) {
			g.mailbox = append(g.mailbox, envelope{to: to, message: message})
		},
		Apply: func(entries []Entry) error {
			g.applied[id] = append(g.applied[id], entries...)
			return nil
		}})
	if err != nil {
		g.t.Fatal(err)
	}
	g.replicas[id] = r
	delete(g.down, id)
}

func (g *testGroup) settle() {
	for range 10000 {
		moved := false
		for _, id := range g.ids {
			if g.down[id] {
				continue
			}
			r := g.replicas[id]
			for r.HasReady() {
				moved = true
				if err := r.Process(); err != nil && !errors.Is(err, ErrLatched) && !errors.Is(err, ErrDamaged) {
					g.t.Fatalf("process %d: %v", id.Node(), err)
				}
			}
		}
		box := g.mailbox
		g.mailbox = nil
		for _, m := range box {
			moved = true
			if g.down[m.to] {
				continue
			}
			if err := g.replicas[m.to].Step(m.message); err != nil {
				g.t.Fatalf("step %d: %v", m.to.Node(), err)
			}
		}
		if !moved {
			return
		}
	}
	g.t.Fatal("the group never settled")
}

func (g *testGroup) tick(n int) {
	for range n {
		for _, id := range g.ids {
			if !g.down[id] {
				g.replicas[id].Tick()
			}
		}
		g.settle()
	}
}

func (g *testGroup) leader() *Replica {
	g.t.Helper()
	for range 100 {
		for _, id := range g.ids {
			if !g.down[id] && g.replicas[id].Status().Role == RoleLeader {
				return g.replicas[id]
			}
		}
		g.tick(1)
	}
	g.t.Fatal("no leader")
	return nil
}

func testRecords(values ...string) []Record {
	out := make([]Record, len(values))
	for i, v := range values {
		body := []byte(v)
		out[i] = Record{Body: body, BodyCRC: record.Checksum(body), Timestamp: int64(i)}
	}
	return out
}

func TestReplicatedProposalCommitsEverywhere(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	p, err := leader.ProposeRecords(testRecords("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	g.settle()
	g.tick(2) // followers learn the commit index with the next heartbeat
	select {
	case <-p.Done():
	default:
		t.Fatal("proposal not completed")
	}
	if p.Err() != nil || p.BaseOffset != 0 || p.Count != 2 {
		t.Fatalf("proposal = %+v, err %v", p, p.Err())
	}
	for _, id := range g.ids {
		if w := g.replicas[id].Status().Watermark; w != 2 {
			t.Fatalf("replica %d watermark %d, want 2", id.Node(), w)
		}
	}
	p2, err := leader.ProposeRecords(testRecords("c"))
	if err != nil {
		t.Fatal(err)
	}
	g.settle()
	if p2.Err() != nil || p2.BaseOffset != 2 {
		t.Fatalf("second proposal = %+v, err %v", p2, p2.Err())
	}
}

func TestFollowerRefusesProposals(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	for _, id := range g.ids {
		if id == leader.config.ID {
			continue
		}
		_, err := g.replicas[id].ProposeRecords(testRecords("x"))
		var notLeader *NotLeaderError
		if !errors.As(err, &notLeader) || notLeader.Leader != leader.config.ID {
			t.Fatalf("follower proposal: %v", err)
		}
	}
}

func TestOffsetsStayDenseAcrossFailover(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	if _, err := leader.ProposeRecords(testRecords("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	g.settle()
	g.down[leader.config.ID] = true
	g.mailbox = nil
	next := g.leader()
	if next == leader {
		t.Fatal("the stopped leader still leads")
	}
	p, err := next.ProposeRecords(testRecords("d"))
	if err != nil {
		t.Fatal(err)
	}
	g.settle()
	if p.Err() != nil || p.BaseOffset != 3 {
		t.Fatalf("after failover: %+v err %v", p, p.Err())
	}
}

func TestCrashLosesNoAcknowledgedEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := newTestGroup(t, 3)
	acked := 0
	for round := range 30 {
		leader := g.leader()
		p, err := leader.ProposeRecords(testRecords(fmt.Sprint(round)))
		if err != nil {
			t.Fatal(err)
		}
		g.settle()
		if p.Err() == nil {
			acked = int(p.BaseOffset) + 1
		}
		victim := g.ids[rng.IntN(len(g.ids))]
		g.journals[victim].Crash(rng)
		g.start(victim)
		g.settle()
	}
	g.tick(5)
	for _, id := range g.ids {
		if w := g.replicas[id].Status().Watermark; w < uint64(acked) {
			t.Fatalf("replica %d watermark %d below acked %d", id.Node(), w, acked)
		}
	}
}

func TestFailedSyncLatches(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	g.journals[leader.config.ID].FailSync(errors.New("EIO"))
	p, err := leader.ProposeRecords(testRecords("a"))
	if err != nil {
		t.Fatal(err)
	}
	g.settle()
	if !errors.Is(p.Err(), ErrLatched) {
		t.Fatalf("proposal on a failed disk: %v", p.Err())
	}
	if !errors.Is(leader.Status().Latched, ErrLatched) {
		t.Fatal("leader did not latch")
	}
	if _, err := leader.ProposeRecords(testRecords("b")); !errors.Is(err, ErrLatched) {
		t.Fatalf("propose after latch: %v", err)
	}
	g.down[leader.config.ID] = true
	next := g.leader()
	if _, err := next.ProposeRecords(testRecords("c")); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedReplicaStopsVoting(t *testing.T) {
	g := newTestGroup(t, 5)
	leader := g.leader()
	for i := range 5 {
		if _, err := leader.ProposeRecords(testRecords(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		g.settle()
	}
	var victim ReplicaID
	for _, id := range g.ids {
		if id != leader.config.ID {
			victim = id
			break
		}
	}
	g.journals[victim].Corrupt(3)
	// Restarting re-reads the committed entries above the restart point.
	g.start(victim)
	g.settle()
	g.tick(3)
	if g.replicas[victim].Status().Damaged == nil {
		t.Fatal("damage not noticed")
	}
	before := g.replicas[victim].Status()
	g.down[leader.config.ID] = true
	next := g.leader()
	if next.config.ID == victim {
		t.Fatal("a damaged replica became leader")
	}
	if g.replicas[victim].Status().Term != before.Term {
		t.Fatal("a damaged replica took part in an election")
	}
}

func TestJointChangeThenProposals(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	learner := NewReplicaID(4, 9)
	g.ids = append(g.ids, learner)
	g.journals[learner] = NewMemoryJournal()
	g.start(learner)
	p, err := leader.ChangeMembership(MembershipChange{AddLearners: []ReplicaID{learner}})
	if err != nil {
		t.Fatal(err)
	}
	g.settle()
	if p.Err() != nil {
		t.Fatalf("add learner: %v", p.Err())
	}
	if _, err := leader.ProposeRecords(testRecords("a")); err != nil {
		t.Fatal(err)
	}
	g.settle()
	g.tick(3)
	if w := g.replicas[learner].Status().Watermark; w != 1 {
		t.Fatalf("learner watermark %d, want 1", w)
	}
	// Promote the learner and remove a follower in one joint change, left
	// automatically: Raft appends the leaving entry itself, between the
	// proposals below.
	var removed ReplicaID
	for _, id := range g.ids[:3] {
		if id != leader.config.ID {
			removed = id
			break
		}
	}
	joint, err := leader.ChangeMembership(MembershipChange{Promote: []ReplicaID{learner}, Remove: []ReplicaID{removed}})
	if err != nil {
		t.Fatal(err)
	}
	var proposals []*Proposal
	for i := range 3 {
		p, err := leader.ProposeRecords(testRecords(fmt.Sprint("b", i)))
		if err != nil {
			t.Fatal(err)
		}
		proposals = append(proposals, p)
		g.settle()
	}
	g.tick(3)
	if joint.Err() != nil {
		t.Fatalf("joint change: %v", joint.Err())
	}
	for i, p := range proposals {
		if p.Err() != nil || p.BaseOffset != uint64(1+i) {
			t.Fatalf("proposal %d: %+v err %v", i, p, p.Err())
		}
	}
	config := leader.Status().Config
	if len(config.VotersOutgoing) != 0 || !slices.Contains(config.Voters, learner) || slices.Contains(config.Voters, removed) {
		t.Fatalf("configuration after the joint change: %+v", config)
	}
}

func TestLearnerBelowRetentionStartsFromSnapshot(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	for i := range 5 {
		if _, err := leader.ProposeRecords(testRecords(fmt.Sprint(i), fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		g.settle()
	}
	g.tick(2)
	for _, id := range g.ids {
		if _, err := g.replicas[id].Compact(g.replicas[id].Status().Applied); err != nil {
			t.Fatal(err)
		}
	}
	if first := g.journals[leader.config.ID].FirstIndex(); first <= 4 {
		t.Fatalf("leader journal still starts at %d", first)
	}
	learner := NewReplicaID(4, 1)
	g.ids = append(g.ids, learner)
	g.journals[learner] = NewMemoryJournal()
	g.start(learner)
	if _, err := leader.ChangeMembership(MembershipChange{AddLearners: []ReplicaID{learner}}); err != nil {
		t.Fatal(err)
	}
	g.settle()
	g.tick(3)
	if w := g.replicas[learner].Status().Watermark; w != 10 {
		t.Fatalf("learner watermark after the snapshot %d, want 10", w)
	}
	p, err := leader.ProposeRecords(testRecords("after"))
	if err != nil {
		t.Fatal(err)
	}
	g.settle()
	g.tick(2)
	if p.Err() != nil || p.BaseOffset != 10 {
		t.Fatalf("proposal after the snapshot: %+v err %v", p, p.Err())
	}
	if w := g.replicas[learner].Status().Watermark; w != 11 {
		t.Fatalf("learner watermark %d, want 11", w)
	}
}

// TestProposalDroppedDuringTransferIsRetryable: a leader handing over
// drops proposals itself; the caller is told to retry, not sent back to
// the same node as its leader.
func TestProposalDroppedDuringTransferIsRetryable(t *testing.T) {
	g := newTestGroup(t, 3)
	leader := g.leader()
	if _, err := leader.ProposeRecords(testRecords("a")); err != nil {
		t.Fatal(err)
	}
	g.settle()
	var to ReplicaID
	for _, id := range g.ids {
		if id != leader.config.ID {
			to = id
			break
		}
	}
	leader.TransferLeadership(to)
	_, err := leader.ProposeRecords(testRecords("b"))
	var notLeader *NotLeaderError
	if errors.As(err, &notLeader) && notLeader.Leader == leader.config.ID {
		t.Fatalf("a dropped proposal named its own node as the leader: %v", err)
	}
	if !errors.Is(err, ErrLeaderNotReady) {
		t.Fatalf("proposal during a transfer: %v, want ErrLeaderNotReady", err)
	}
}
