package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// fakeReplication stands for a partition's replica: proposals go straight
// to the partition's log, and the test sets the term this node leads in.
type fakeReplication struct {
	log  *segment.Log
	term atomic.Uint64
}

func (f *fakeReplication) Propose(bodies [][]byte, crcs []uint32) (segment.Ticket, error) {
	if f.term.Load() == 0 {
		return segment.Ticket{}, &NotLeaderError{Stream: "s", Node: 2, ClientAddr: "127.0.0.1:2"}
	}
	return f.log.AppendBatch(context.Background(), bodies, crcs)
}
func (f *fakeReplication) NextOffset() uint64                     { return f.log.NextOffset() }
func (f *fakeReplication) TicketFor(offset uint64) segment.Ticket { return f.log.TicketFor(offset) }
func (f *fakeReplication) Term() uint64                           { return f.term.Load() }
func (f *fakeReplication) Ready(context.Context) uint64           { return f.term.Load() }
func (f *fakeReplication) NotServing() error {
	return &NotLeaderError{Stream: "s", Node: 2, ClientAddr: "127.0.0.1:2"}
}

func replicatedPartition(t *testing.T) (*Broker, *Partition, *fakeReplication) {
	t.Helper()
	b := openProducerBroker(t, vfs.NewMemFS())
	t.Cleanup(func() { _ = b.Close() })
	if _, _, err := b.CreateStream(StreamSettings{Name: "s", Partitions: 1, Replicas: 3, DedupWindow: -1}); err != nil {
		t.Fatal(err)
	}
	served, err := b.Stream([]byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := served.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeReplication{log: p.Log()}
	if err := b.Replicate("s", 0, fake); err != nil {
		t.Fatal(err)
	}
	return b, p, fake
}

// TestReplicatedLeaderReadsItsTableBeforeChecking: records another leader
// stored while this node did not lead are in the log, not in this node's
// producer table; at the start of its next term the table is read again
// before any check, so their resend is a duplicate, not a second copy.
func TestReplicatedLeaderReadsItsTableBeforeChecking(t *testing.T) {
	b, p, fake := replicatedPartition(t)
	identity, _, err := b.InitProducer("a")
	if err != nil {
		t.Fatal(err)
	}
	fake.term.Store(1)
	if _, _, err := appendIdempotent(t, p, identity.ID, 0, 5, 10); err != nil {
		t.Fatal(err)
	}
	// Another leader's term: it stores sequences 5..9 in the log.
	fake.term.Store(0)
	var bodies [][]byte
	var crcs []uint32
	for seq := uint64(5); seq < 10; seq++ {
		body, err := record.AppendBody(nil, record.Body{HasProducer: true, ProducerID: identity.ID, Sequence: seq, Payload: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		bodies, crcs = append(bodies, body), append(crcs, record.Checksum(body))
	}
	ticket, err := p.Log().AppendBatch(context.Background(), bodies, crcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := ticket.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	fake.term.Store(3)
	offset, verdict, err := appendIdempotent(t, p, identity.ID, 5, 1, 10)
	if err != nil || !verdict.Duplicate || offset != 5 {
		t.Fatalf("resend of a record another leader stored: offset %d, %+v, %v; want a duplicate at 5", offset, verdict, err)
	}
}

// appendAsOtherLeader writes sequences [first, first+n) of producer id to
// p's log as another leader's committed records would arrive.
func appendAsOtherLeader(t *testing.T, p *Partition, id, first uint64, n int) {
	t.Helper()
	var bodies [][]byte
	var crcs []uint32
	for seq := first; seq < first+uint64(n); seq++ {
		body, err := record.AppendBody(nil, record.Body{HasProducer: true, ProducerID: id, Sequence: seq, Payload: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		bodies, crcs = append(bodies, body), append(crcs, record.Checksum(body))
	}
	ticket, err := p.Log().AppendBatch(context.Background(), bodies, crcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := ticket.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReplicatedSnapshotIsReadFromTheLog: a replicated partition's
// producer snapshot (written at every seal, on followers too) describes
// its committed records, not the node's table. The table is stale on a
// follower (it missed 5..9, which a snapshot written from it would
// hide from the next leader: a second copy of their resend) and a leader's
// may count proposals a new leader cut away (20 here, which a
// snapshot written from it would answer as duplicates, never stored).
func TestReplicatedSnapshotIsReadFromTheLog(t *testing.T) {
	b, p, fake := replicatedPartition(t)
	identity, _, err := b.InitProducer("a")
	if err != nil {
		t.Fatal(err)
	}
	fake.term.Store(1)
	if _, _, err := appendIdempotent(t, p, identity.ID, 0, 5, 10); err != nil {
		t.Fatal(err)
	}
	p.checkMu.Lock()
	p.producers.Record(identity.ID, 20, 9) // a proposal cut away later
	p.checkMu.Unlock()
	fake.term.Store(0)
	appendAsOtherLeader(t, p, identity.ID, 5, 5)
	if err := b.snapshotProducers(p, time.Second); err != nil {
		t.Fatal(err)
	}
	fake.term.Store(3)
	offset, verdict, err := appendIdempotent(t, p, identity.ID, 5, 1, 10)
	if err != nil || !verdict.Duplicate || offset != 5 {
		t.Fatalf("resend of a record another leader stored: offset %d, %+v, %v; want a duplicate at 5", offset, verdict, err)
	}
	offset, verdict, err = appendIdempotent(t, p, identity.ID, 10, 1, 10)
	if err != nil || verdict.Duplicate || offset != 10 {
		t.Fatalf("the next sequence after the log: offset %d, %+v, %v; want it stored at 10", offset, verdict, err)
	}
}

// TestReplicatedPositionsOnlyFromTheLeader: ProducerInit's positions seed
// a new producer's sequences, so a node reports a replicated partition's
// position only while it serves the partition, from the table it read in
// that term: a follower's would start the producer at a sequence the
// partition already holds, and its records would be answered as
// duplicates without being stored.
func TestReplicatedPositionsOnlyFromTheLeader(t *testing.T) {
	b, p, fake := replicatedPartition(t)
	identity, _, err := b.InitProducer("a")
	if err != nil {
		t.Fatal(err)
	}
	fake.term.Store(1)
	if _, _, err := appendIdempotent(t, p, identity.ID, 0, 5, 10); err != nil {
		t.Fatal(err)
	}
	fake.term.Store(0)
	appendAsOtherLeader(t, p, identity.ID, 5, 5)
	if _, positions, err := b.InitProducer("a"); err != nil || len(positions) != 0 {
		t.Fatalf("a follower's positions: %+v, %v; want none", positions, err)
	}
	fake.term.Store(3)
	_, positions, err := b.InitProducer("a")
	if err != nil || len(positions) != 1 || positions[0].NextSequence != 10 {
		t.Fatalf("the leader's positions: %+v, %v; want the next sequence 10", positions, err)
	}
}

// TestReplicatedGapAnswersNoLeader: on a replicated partition a sequence
// gap is what a pipelined producer meets while leadership moves; it is
// refused as no leader (retryable, the producer resends in order) and
// stores nothing.
func TestReplicatedGapAnswersNoLeader(t *testing.T) {
	b, p, fake := replicatedPartition(t)
	identity, _, err := b.InitProducer("a")
	if err != nil {
		t.Fatal(err)
	}
	fake.term.Store(1)
	if _, _, err := appendIdempotent(t, p, identity.ID, 0, 3, 10); err != nil {
		t.Fatal(err)
	}
	before := p.Log().NextOffset()
	_, _, err = appendIdempotent(t, p, identity.ID, 7, 1, 10)
	var retry *RetryableError
	if !errors.Is(err, ErrNoLeader) || !errors.As(err, &retry) {
		t.Fatalf("a gap on a replicated partition: %v; want a retryable no-leader", err)
	}
	if after := p.Log().NextOffset(); after != before {
		t.Fatalf("the refused record was stored (%d → %d)", before, after)
	}
}

// TestReplicatedFollowerRefusesBeforeChecking: a node that does not lead
// the partition sends the producer to the leader before it checks
// anything: against its stale table a resend looks like a gap, and a gap
// answered as no leader kept the producer away from the leader.
func TestReplicatedFollowerRefusesBeforeChecking(t *testing.T) {
	b, p, fake := replicatedPartition(t)
	identity, _, err := b.InitProducer("a")
	if err != nil {
		t.Fatal(err)
	}
	fake.term.Store(1)
	if _, _, err := appendIdempotent(t, p, identity.ID, 0, 5, 10); err != nil {
		t.Fatal(err)
	}
	fake.term.Store(0)
	appendAsOtherLeader(t, p, identity.ID, 5, 5)
	_, _, err = appendIdempotent(t, p, identity.ID, 10, 1, 10)
	var notLeader *NotLeaderError
	if !errors.As(err, &notLeader) || notLeader.Node != 2 {
		t.Fatalf("an append on a follower: %v; want not leader, naming node 2", err)
	}
}
