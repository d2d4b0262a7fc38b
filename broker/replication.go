package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/segment"
)

// Errors of replicated partitions.
var (
	// ErrNotLeader: another node leads the partition; the error is a
	// *NotLeaderError naming it when it is known.
	ErrNotLeader = errors.New("broker: this node does not lead the partition")
	// ErrNoLeader: the partition has no leader now (an election, no
	// majority reachable, or its replication not attached yet); a
	// RetryableError.
	ErrNoLeader = errors.New("broker: the partition has no leader now")
)

// noLeaderRetry is the hint sent with ErrNoLeader: about one election.
const noLeaderRetry = 200 * time.Millisecond

// NotLeaderError names the node that leads a partition. Node 0 when no
// leader is known.
type NotLeaderError struct {
	Stream     string
	Partition  uint32
	Node       uint32
	ClientAddr string
}

func (e *NotLeaderError) Error() string {
	if e.Node == 0 {
		return fmt.Sprintf("broker: this node does not lead %s/%d, and no leader is known", e.Stream, e.Partition)
	}
	return fmt.Sprintf("broker: this node does not lead %s/%d; node %d at %s does", e.Stream, e.Partition, e.Node, e.ClientAddr)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// NoLeader is the retryable ErrNoLeader for a partition.
func NoLeader(stream string, partition uint32, why string) error {
	return &RetryableError{Err: withKind(ErrNoLeader, fmt.Errorf("broker: %s/%d has no leader now: %s", stream, partition, why)),
		RetryAfter: noLeaderRetry}
}

// Replication carries a replicated partition's appends through its
// replication group; the server's cluster door implements it over the
// partition's replica. The partition's log is then written by the
// replica alone, and an append is acknowledged once a majority of the
// replicas hold it durably, in the leader's term.
type Replication interface {
	// Propose proposes the records as one entry (so a batch is stored
	// whole or not at all) and returns at once: the ticket completes when
	// the entry is committed; First is the records' first offset. Errors:
	// *NotLeaderError, or a RetryableError wrapping ErrNoLeader.
	Propose(bodies [][]byte, crcs []uint32) (segment.Ticket, error)
	// NextOffset is the head of the partition as its leader assigns it:
	// every offset below is proposed, committed or not.
	NextOffset() uint64
	// TicketFor returns a ticket that completes once the record at
	// offset, already proposed, is committed (or fails if it is not).
	TicketFor(offset uint64) segment.Ticket
	// Term is the leadership term this node serves appends in; 0 when it
	// does not lead. A new term means the partition's state (its producer
	// table) must be read again from the log before the first append.
	Term() uint64
	// Ready waits while this node has just won the leadership and is
	// still applying its log (bounded by ctx), then returns Term.
	Ready(ctx context.Context) uint64
	// NotServing is what an append meets while Term is 0: a
	// *NotLeaderError naming the leader, or a RetryableError wrapping
	// ErrNoLeader while none is known or the leader is not ready.
	NotServing() error
}

// replicationBox holds a partition's Replication for an atomic pointer.
type replicationBox struct{ r Replication }

// Replicate attaches the replication of one partition of a replicated
// stream: from then on its appends are proposals. Before it, the
// partition refuses appends with ErrNoLeader.
func (b *Broker) Replicate(stream string, partition uint32, r Replication) error {
	served, ok := b.existingStream(stream)
	if !ok {
		return noSuchStream(stream)
	}
	if !served.settings.Replicated() {
		return fmt.Errorf("%w: stream %q is not replicated", ErrInvalidArgument, stream)
	}
	if partition >= uint32(len(served.partitions)) {
		return fmt.Errorf("%w: stream %q has no partition %d", ErrNoSuchPartition, stream, partition)
	}
	served.partitions[partition].replication.Store(&replicationBox{r: r})
	return nil
}

// refreshLocked prepares a replicated partition for a run of appends,
// or refuses it where this node does not serve the partition: at the
// start of a new term of this node's leadership it waits until the
// replica has applied every entry of earlier terms, then reads the
// producer table again from the log, before any check runs against it:
// the log then holds every acknowledged record, whichever leader stored
// it. REQUIRES: checkMu held.
func (p *Partition) refreshLocked() error {
	box := p.replication.Load()
	if box == nil {
		return NoLeader(p.stream, p.index, "its replica is not open yet")
	}
	term := box.r.Term()
	if term == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), leaderReadyWait)
		term = box.r.Ready(ctx)
		cancel()
	}
	if term == 0 {
		// Refused before any check: a follower's table stopped at its
		// last leadership, and a check against it (a gap, a duplicate)
		// would keep the client from the leader.
		return box.r.NotServing()
	}
	if term != p.servedTerm {
		if p.producers != nil {
			p.producers = p.broker.producerTable(p.log)
		}
		p.servedTerm = term
	}
	return nil
}

// currentTermLocked reports whether p's producer table describes its
// log: always on a single node; on a replicated partition only on the
// leader serving appends, with its table read in this term (term). A
// follower's table stopped at its last leadership.
// REQUIRES: checkMu held.
func (p *Partition) currentTermLocked() (term uint64, current bool) {
	if !p.replicated {
		return 0, true
	}
	if err := p.refreshLocked(); err != nil {
		return 0, false
	}
	term = p.servingTerm()
	return term, term != 0 && term == p.servedTerm
}

// servingTerm is the term this node serves p's appends in, 0 when it
// does not.
func (p *Partition) servingTerm() uint64 {
	if box := p.replication.Load(); box != nil {
		return box.r.Term()
	}
	return 0
}

// leaderReadyWait bounds how long an append waits for a new leader to
// finish applying its log: about one round trip to its followers and a
// sync. The wait holds the caller (a reactor, for an inline produce), so
// it stays short; a producer refused after it retries.
const leaderReadyWait = 250 * time.Millisecond

// proposeLocked is stageLocked for a replicated partition.
// REQUIRES: checkMu held, refreshLocked called under it.
func (p *Partition) proposeLocked(bodies [][]byte, crcs []uint32) (segment.Ticket, error) {
	box := p.replication.Load()
	if box == nil {
		return segment.Ticket{}, NoLeader(p.stream, p.index, "its replica is not open yet")
	}
	return box.r.Propose(bodies, crcs)
}

// head is the offset the next record of the partition gets.
// REQUIRES: checkMu held.
func (p *Partition) head() uint64 {
	if p.replicated {
		if box := p.replication.Load(); box != nil {
			return box.r.NextOffset()
		}
	}
	return p.log.NextOffset()
}

// ticketFor is a ticket that completes once the record at offset may be
// named in an answer: durable on a single node, committed when replicated.
func (p *Partition) ticketFor(offset uint64) segment.Ticket {
	if p.replicated {
		if box := p.replication.Load(); box != nil {
			return box.r.TicketFor(offset)
		}
	}
	return p.log.TicketFor(offset)
}

// LeadingPartition returns a partition of a replicated stream that this
// node leads, trying from, from+1, … in turn: where a record that may go
// to any partition is stored without a hop. ok is false when this node
// leads none (the caller uses from, which answers not_leader).
func (s *Stream) LeadingPartition(from uint32) (partition uint32, ok bool) {
	count := uint32(len(s.partitions))
	for i := range count {
		p := (from + i) % count
		if box := s.partitions[p].replication.Load(); box != nil && box.r.Term() != 0 {
			return p, true
		}
	}
	return from % count, false
}

// Replicated reports whether the stream's partitions replicate.
func (s *Stream) Replicated() bool { return s.settings.Replicated() }
