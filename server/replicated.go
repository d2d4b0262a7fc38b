package server

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/replica"
	"github.com/ironbus/ironbus/segment"
)

// proposeTimeout bounds how long an append waits for the replica host's
// loop to take its proposal (not for the commit).
const proposeTimeout = 5 * time.Second

// partitionReplica is the broker.Replication of a partition this node
// holds a replica of: appends become proposals on the node's replica
// host, acknowledged when committed. It also watches the partition's
// watermark (the offset after the last committed record) for answers
// that name an earlier record.
type partitionReplica struct {
	cluster   *clusterListener
	stream    string
	partition uint32
	group     replica.GroupID

	mu        sync.Mutex
	watermark uint64
	waiters   []offsetWaiter // by offset
}

type offsetWaiter struct {
	offset   uint64
	complete func(error)
}

func (p *partitionReplica) Propose(bodies [][]byte, crcs []uint32) (segment.Ticket, error) {
	records := make([]replica.Record, len(bodies))
	now := time.Now().UnixNano()
	for i := range bodies {
		records[i] = replica.Record{Body: bodies[i], BodyCRC: crcs[i], Timestamp: now}
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	proposal, err := p.cluster.host.Propose(ctx, p.group, records)
	if err != nil {
		return segment.Ticket{}, p.cluster.engineError(p.stream, p.partition, p.group, err)
	}
	ticket, complete := segment.ExternalTicket(proposal.BaseOffset, uint64(proposal.Count))
	proposal.OnDone(func() { complete(p.cluster.outcomeError(p.stream, p.partition, p.group, proposal.Err())) })
	return ticket, nil
}

func (p *partitionReplica) serving() (term, next uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	_ = p.cluster.host.Do(ctx, p.group, func(r *replica.Replica) error {
		term, next, _ = r.Serving()
		return nil
	})
	return term, next
}

func (p *partitionReplica) NextOffset() uint64 {
	_, next := p.serving()
	return next
}

func (p *partitionReplica) Term() uint64 {
	term, _ := p.serving()
	return term
}

// TicketFor completes once the watermark passes offset.
func (p *partitionReplica) TicketFor(offset uint64) segment.Ticket {
	ticket, complete := segment.ExternalTicket(offset, 1)
	p.mu.Lock()
	if offset < p.watermark {
		p.mu.Unlock()
		complete(nil)
		return ticket
	}
	at := sort.Search(len(p.waiters), func(i int) bool { return p.waiters[i].offset > offset })
	p.waiters = append(p.waiters, offsetWaiter{})
	copy(p.waiters[at+1:], p.waiters[at:])
	p.waiters[at] = offsetWaiter{offset: offset, complete: complete}
	p.mu.Unlock()
	return ticket
}

// apply is the replica's Apply: committed entries advance the watermark
// and settle the answers waiting on it. On the replica host's loop.
func (p *partitionReplica) apply(entries []replica.Entry) error {
	watermark := uint64(0)
	for _, e := range entries {
		if e.Type != replica.EntryNormal {
			continue
		}
		if payload, err := replica.DecodePayload(e.Data); err == nil && payload.Kind == replica.PayloadData {
			watermark = payload.Data.BaseOffset + uint64(payload.Data.Count)
		}
	}
	if watermark == 0 {
		return nil
	}
	p.advance(watermark)
	return nil
}

func (p *partitionReplica) advance(watermark uint64) {
	p.mu.Lock()
	if watermark <= p.watermark {
		p.mu.Unlock()
		return
	}
	p.watermark = watermark
	n := sort.Search(len(p.waiters), func(i int) bool { return p.waiters[i].offset >= watermark })
	ready := append([]offsetWaiter(nil), p.waiters[:n]...)
	p.waiters = append(p.waiters[:0], p.waiters[n:]...)
	p.mu.Unlock()
	for _, w := range ready {
		w.complete(nil)
	}
}

// restore is the replica's Restore: a snapshot moves the watermark.
func (p *partitionReplica) restore(s replica.Snapshot) error {
	p.advance(s.NextOffset)
	return nil
}

// remotePartition is the broker.Replication of a partition this node
// holds no replica of: every append is sent to the node that leads it,
// or to its preferred leader when this node cannot know.
type remotePartition struct {
	cluster   *clusterListener
	stream    string
	partition uint32
	group     replica.GroupID
	preferred uint32
}

func (p *remotePartition) Propose([][]byte, []uint32) (segment.Ticket, error) {
	return segment.Ticket{}, p.cluster.notLeader(p.stream, p.partition, p.preferred)
}

func (p *remotePartition) NextOffset() uint64 { return 0 }
func (p *remotePartition) Term() uint64       { return 0 }
func (p *remotePartition) TicketFor(offset uint64) segment.Ticket {
	ticket, complete := segment.ExternalTicket(offset, 1)
	complete(p.cluster.notLeader(p.stream, p.partition, p.preferred))
	return ticket
}

// engineError turns a replica's refusal of a proposal into the engine's
// error: the leader's node and client address for NotLeader, a
// retryable no-leader otherwise.
func (c *clusterListener) engineError(stream string, partition uint32, group replica.GroupID, err error) error {
	var notLeader *replica.NotLeaderError
	switch {
	case errors.As(err, &notLeader) && notLeader.Leader != 0:
		return c.notLeader(stream, partition, notLeader.Leader.Node())
	case errors.As(err, &notLeader), errors.Is(err, replica.ErrLeaderNotReady), errors.Is(err, replica.ErrUnknownGroup):
		return broker.NoLeader(stream, partition, err.Error())
	case errors.Is(err, replica.ErrLatched), errors.Is(err, replica.ErrDamaged):
		return broker.NoLeader(stream, partition, "this node's replica stopped ("+err.Error()+"); another replica takes over")
	}
	return broker.NoLeader(stream, partition, err.Error())
}

// outcomeError is the error a proposal's records fail with, nil when
// committed.
func (c *clusterListener) outcomeError(stream string, partition uint32, group replica.GroupID, err error) error {
	if err == nil {
		return nil
	}
	return broker.NoLeader(stream, partition, "the leadership changed before the records were committed; "+
		"they may or may not be stored (an idempotent producer's resend is never stored twice): "+err.Error())
}

func (c *clusterListener) notLeader(stream string, partition uint32, node uint32) error {
	e := &broker.NotLeaderError{Stream: stream, Partition: partition, Node: node}
	if n, ok := c.meta.State().Nodes[node]; ok {
		e.ClientAddr = n.ClientAddr
	}
	return e
}
