package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

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
