package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/raftmeta"
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
	journal   *replica.SegmentJournal
	// term is the term this node serves proposals in, 0 when it does
	// not (the replica's OnServing); leading says it won the leadership,
	// serving or not yet (OnLeading).
	term    atomic.Uint64
	leading atomic.Bool

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
		return segment.Ticket{}, p.refused(err)
	}
	ticket, complete := segment.ExternalTicket(proposal.BaseOffset, uint64(proposal.Count))
	proposal.OnDone(func() { complete(p.cluster.outcomeError(p.stream, p.partition, p.group, proposal.Err())) })
	return ticket, nil
}

func (p *partitionReplica) NextOffset() uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	var next uint64
	_ = p.cluster.host.Do(ctx, p.group, func(r *replica.Replica) error {
		_, next, _ = r.Serving()
		return nil
	})
	return next
}

func (p *partitionReplica) Term() uint64 { return p.term.Load() }

// Ready waits while this node leads but does not serve yet (it is
// applying the entries of earlier terms), until ctx ends.
func (p *partitionReplica) Ready(ctx context.Context) uint64 {
	for {
		if term := p.term.Load(); term != 0 || !p.leading.Load() {
			return term
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// NotServing names the leader this node's replica knows, if any.
func (p *partitionReplica) NotServing() error {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	var leader replica.ReplicaID
	err := p.cluster.host.Do(ctx, p.group, func(r *replica.Replica) error {
		leader = r.Leader()
		return nil
	})
	switch {
	case err != nil:
		return p.cluster.engineError(p.stream, p.partition, p.group, err)
	case leader == 0:
		return broker.NoLeader(p.stream, p.partition, "no leader is elected yet")
	case leader.Node() == p.cluster.config.NodeID:
		return broker.NoLeader(p.stream, p.partition, "this node was just elected and is still applying its log")
	}
	return p.cluster.notLeader(p.stream, p.partition, leader.Node())
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
	if !p.leading.Load() {
		// onLeading fails the waiters when the leadership goes; one added
		// after that would wait for nothing.
		p.mu.Unlock()
		complete(broker.NoLeader(p.stream, p.partition, "this node does not lead the partition"))
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
	p.journal.SetVisible(watermark)
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

// onLeading is the replica's OnLeading. Losing the leadership fails the
// answers still waiting for an offset to commit: it may never commit
// now (a new leader can cut it), and a connection's answers wait in
// order behind them.
func (p *partitionReplica) onLeading(leading bool) {
	p.leading.Store(leading)
	if leading {
		return
	}
	p.mu.Lock()
	waiting := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	for _, w := range waiting {
		w.complete(broker.NoLeader(p.stream, p.partition, "this node stopped leading before the record was committed"))
	}
}

// restore is the replica's Restore: a snapshot moves the watermark.
func (p *partitionReplica) restore(s replica.Snapshot) error {
	p.journal.SetVisible(s.NextOffset)
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

func (p *remotePartition) NotServing() error {
	return p.cluster.notLeader(p.stream, p.partition, p.preferred)
}

func (p *remotePartition) NextOffset() uint64           { return 0 }
func (p *remotePartition) Term() uint64                 { return 0 }
func (p *remotePartition) Ready(context.Context) uint64 { return 0 }
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

// reconcileLoop creates, on this node, the replicated streams the
// metadata group holds, and opens this node's replica of each partition
// placed on it, each time the metadata changes.
func (c *clusterListener) reconcileLoop() {
	defer close(c.reconciled)
	for {
		state, changed := c.meta.Watch()
		c.reconcile(state)
		select {
		case <-changed:
		case <-c.stopping:
			return
		}
	}
}

// openMissing opens a stream the metadata holds and this node does not
// serve yet, for the engine's lookups that come before the reconcile
// loop's pass; false when the metadata does not hold it.
func (c *clusterListener) openMissing(name string) bool {
	state, changed := c.meta.Watch()
	if _, ok := state.Streams[name]; !ok {
		// This member's metadata may lag its leader's by a heartbeat (a
		// client sent here right after the create): wait a moment.
		deadline := time.NewTimer(missingStreamWait)
		defer deadline.Stop()
		for !ok {
			select {
			case <-changed:
				state, changed = c.meta.Watch()
				_, ok = state.Streams[name]
			case <-deadline.C:
				return false
			}
		}
	}
	c.reconcile(state)
	return true
}

// missingStreamWait bounds how long a lookup of a stream this node does
// not know waits for its metadata to catch up.
const missingStreamWait = 100 * time.Millisecond

// reconcile brings this node in line with one metadata state. A stream
// or partition that fails to open is logged and tried again at the next
// change. The loop and the engine's lookups (openMissing) call it.
func (c *clusterListener) reconcile(state raftmeta.State) {
	c.reconcileMu.Lock()
	defer c.reconcileMu.Unlock()
	me := replica.NewReplicaID(c.config.NodeID, c.incarnation)
	for _, name := range slices.Sorted(maps.Keys(state.Streams)) {
		stream := state.Streams[name]
		if c.attached[name] == len(stream.Partitions) {
			continue
		}
		settings := broker.StreamSettings{Name: name, Partitions: uint32(len(stream.Partitions)),
			Replicas: stream.ReplicationFactor, DedupWindow: -1}
		if _, _, err := c.engine.CreateStream(settings); err != nil {
			c.logger.Error("a replicated stream did not open on this node", "stream", name, "error", err)
			continue
		}
		attached := 0
		for index, part := range stream.Partitions {
			if err := c.attach(name, uint32(index), part, me); err != nil {
				c.logger.Error("a replicated partition did not open on this node", "stream", name, "partition", index, "error", err)
				continue
			}
			attached++
		}
		c.attached[name] = attached
	}
}

// attach opens this node's replica of one partition (or, where it holds
// none, sends appends to the partition's preferred leader) and gives it
// to the engine.
func (c *clusterListener) attach(stream string, index uint32, part raftmeta.Partition, me replica.ReplicaID) error {
	if !slices.Contains(part.Replicas, me) {
		preferred := uint32(0)
		if len(part.Replicas) > 0 {
			preferred = part.Replicas[0].Node()
		}
		return c.engine.Replicate(stream, index, &remotePartition{cluster: c, stream: stream, partition: index,
			group: part.Group, preferred: preferred})
	}
	served, err := c.engine.Stream([]byte(stream))
	if err != nil {
		return err
	}
	partition, err := served.Partition(index)
	if err != nil {
		return err
	}
	journal, err := replica.OpenSegmentJournal(partition.Log())
	if err != nil {
		return err
	}
	adapter := &partitionReplica{cluster: c, stream: stream, partition: index, group: part.Group, journal: journal}
	// The founding members of a new group bootstrap it with the same
	// list; a replica added later (a changed set) joins as a learner.
	var bootstrap []replica.ReplicaID
	if part.ConfigVersion == 1 {
		bootstrap = part.Replicas
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	err = c.host.Add(ctx, replica.Config{ID: me, Group: part.Group, Journal: journal, Apply: adapter.apply,
		Restore: adapter.restore, OnServing: adapter.term.Store, OnLeading: adapter.onLeading}, bootstrap)
	if err != nil {
		return err
	}
	if bootstrap != nil && part.Replicas[0] == me {
		// The preferred leader of a new group stands at once rather than
		// after an election timeout; pre-vote keeps this harmless when
		// the group already has a leader.
		if err := c.host.Do(ctx, part.Group, func(r *replica.Replica) error { return r.Campaign() }); err != nil {
			c.logger.Warn("the preferred leader of a new partition could not stand for election", "stream", stream,
				"partition", index, "error", err)
		}
	}
	return c.engine.Replicate(stream, index, adapter)
}

// CreateStream creates a replicated stream through the metadata group
// (only its leader can: another node answers not_leader naming it) and
// waits until this node serves the stream.
func (c *clusterListener) CreateStream(ctx context.Context, name string, partitions uint32, replicas int) error {
	if existing, ok := c.meta.State().Streams[name]; ok {
		if len(existing.Partitions) != int(partitions) || existing.ReplicationFactor != replicas {
			return fmt.Errorf("%w: stream %q exists with %d partitions and %d replicas", broker.ErrConflict, name,
				len(existing.Partitions), existing.ReplicationFactor)
		}
		return c.awaitStream(ctx, name)
	}
	_, err := c.meta.CreateStream(ctx, raftmeta.CreateStream{Name: name, Partitions: int(partitions), ReplicationFactor: replicas})
	var notLeader *raftmeta.NotLeaderError
	switch {
	case errors.As(err, &notLeader):
		return &broker.NotLeaderError{Stream: name, Node: notLeader.Leader, ClientAddr: notLeader.LeaderClientAddr}
	case errors.Is(err, raftmeta.ErrNotLeader):
		return broker.NoLeader(name, 0, "the metadata group has no leader now")
	case errors.Is(err, raftmeta.ErrNotEnoughNodes):
		return fmt.Errorf("%w: %d replicas need %d active nodes: %w", broker.ErrInvalidArgument, replicas, replicas, err)
	case errors.Is(err, raftmeta.ErrStreamExists):
		return c.CreateStream(ctx, name, partitions, replicas)
	case err != nil:
		return fmt.Errorf("%w: creating stream %q in the metadata group: %w", broker.ErrBusy, name, err)
	}
	return c.awaitStream(ctx, name)
}

// awaitStream waits until the reconcile loop has opened the stream here
// and each partition whose replica this node runs knows its leader, so a
// publish right after the create finds one.
func (c *clusterListener) awaitStream(ctx context.Context, name string) error {
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		if _, err := c.engine.Stream([]byte(name)); err == nil && c.leadersKnown(ctx, name) {
			return nil
		}
		select {
		case <-ctx.Done():
			return broker.NoLeader(name, 0, "the stream is created but not open on this node yet")
		case <-ticker.C:
		}
	}
}

// leadersKnown reports whether every partition of stream whose replica
// runs here has a known leader.
func (c *clusterListener) leadersKnown(ctx context.Context, name string) bool {
	stream, ok := c.meta.State().Streams[name]
	if !ok {
		return false
	}
	for _, part := range stream.Partitions {
		status, err := c.host.Status(ctx, part.Group)
		if err == nil && status.Leader == 0 {
			return false
		}
	}
	return true
}
