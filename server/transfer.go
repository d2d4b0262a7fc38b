package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/raftmeta"
	"github.com/ironbus/ironbus/replica"
	"github.com/ironbus/ironbus/wire"
)

// Leadership transfer on an operator's request (LeaderTransfer): the node
// leading a partition asks the target voter to take over (etcd-raft's
// transfer: the target is caught up, then told to campaign at once, so
// the partition pauses for a round trip and the new leader's first
// commit, not for an election timeout), and answers once it has seen the
// target lead in a newer term and commit in it.

// transferWait bounds how long a transfer waits for the target to take
// over. etcd-raft gives up a transfer after an election timeout (about a
// second here); the rest covers a loaded machine.
const transferWait = 5 * time.Second

// transferPoll is how often the waiting leader looks at its replica.
const transferPoll = 2 * time.Millisecond

func (v *clusterView) TransferLeadership(ctx context.Context, stream string, partition uint32, to uint32) (*wire.LeaderTransferred, error) {
	c := v.listener.Load()
	if c == nil {
		return nil, wire.NewError(wire.CodeShuttingDown, "the cluster door is not open yet")
	}
	return c.TransferLeadership(ctx, stream, partition, to)
}

// TransferLeadership moves the leadership of one replicated partition to
// node to. Only the node leading it does; another answers not_leader
// naming the leader it knows (or, without a replica, the partition's
// preferred leader, which knows).
func (c *clusterListener) TransferLeadership(ctx context.Context, stream string, partition uint32, to uint32) (*wire.LeaderTransferred, error) {
	part, err := c.transferPartition(stream, partition, to)
	if err != nil {
		return nil, err
	}
	me := replica.NewReplicaID(c.config.NodeID, c.incarnation)
	if !slices.Contains(part.Replicas, me) {
		return nil, c.notLeader(stream, partition, part.Replicas[0].Node())
	}
	done := make(chan struct{})
	if _, busy := c.transfers.LoadOrStore(part.Group, done); busy {
		return nil, fmt.Errorf("%w: a transfer of %s/%d's leadership is under way; ask again once it ends", broker.ErrBusy,
			stream, partition)
	}
	defer func() {
		c.transfers.Delete(part.Group)
		close(done)
	}()
	ctx, cancel := context.WithTimeout(ctx, transferWait)
	defer cancel()
	began := time.Now()
	start, err := c.startTransfer(ctx, stream, partition, part.Group, to)
	switch {
	case err != nil:
		return nil, err
	case start.done:
		return &wire.LeaderTransferred{Stream: []byte(stream), Partition: partition, From: to, Leader: to, Term: start.term}, nil
	}
	return c.awaitTransfer(ctx, stream, partition, part.Group, to, start, began)
}

// transferPartition checks the request against the metadata: a
// replicated stream, one of its partitions, a node holding a replica.
func (c *clusterListener) transferPartition(stream string, partition uint32, to uint32) (raftmeta.Partition, error) {
	described, ok := c.meta.State().Streams[stream]
	if !ok {
		if _, err := c.engine.Stream([]byte(stream)); err != nil {
			return raftmeta.Partition{}, err
		}
		return raftmeta.Partition{}, fmt.Errorf("%w: stream %q is not replicated: each of its partitions lives on one node, "+
			"with no leader to move (create a stream with --replicas 3 for that)", broker.ErrInvalidArgument, stream)
	}
	if int(partition) >= len(described.Partitions) {
		return raftmeta.Partition{}, fmt.Errorf("%w: stream %q has %d partitions (0 to %d), not partition %d",
			broker.ErrInvalidArgument, stream, len(described.Partitions), len(described.Partitions)-1, partition)
	}
	part := described.Partitions[partition]
	var nodes []uint32
	for _, id := range part.Replicas {
		if id.Node() == to {
			return part, nil
		}
		nodes = append(nodes, id.Node())
	}
	return raftmeta.Partition{}, fmt.Errorf("%w: node %d holds no replica of %s/%d; its replicas are on nodes %v",
		broker.ErrInvalidArgument, to, stream, partition, nodes)
}

// transferStart is the partition as the leader saw it when it asked for
// the transfer.
type transferStart struct {
	term      uint64
	lastIndex uint64
	// done: the target already led, nothing was asked.
	done bool
}

// startTransfer asks, on the replica host's loop, the leading replica to
// hand over to the voter on node to: an error when this node does not
// lead or to is no voter; done when to already leads.
func (c *clusterListener) startTransfer(ctx context.Context, stream string, partition uint32, group replica.GroupID, to uint32) (transferStart, error) {
	var start transferStart
	var refusal error
	err := c.host.Do(ctx, group, func(r *replica.Replica) error {
		status := r.Status()
		start.term, start.lastIndex = status.Term, status.LastIndex
		switch {
		case status.Role != replica.RoleLeader && status.Leader == 0:
			refusal = broker.NoLeader(stream, partition, "no leader is elected now")
			return nil
		case status.Role != replica.RoleLeader && status.Leader.Node() == to:
			start.done = true
			return nil
		case status.Role != replica.RoleLeader:
			refusal = c.notLeader(stream, partition, status.Leader.Node())
			return nil
		case c.config.NodeID == to:
			start.done = true
			return nil
		}
		target := replica.ReplicaID(0)
		for _, voter := range status.Config.Voters {
			if voter.Node() == to {
				target = voter
			}
		}
		if target == 0 {
			refusal = fmt.Errorf("%w: node %d is not a voter of %s/%d now (a learner still catching up, or leaving): "+
				"only a voter can lead", broker.ErrInvalidArgument, to, stream, partition)
			return nil
		}
		r.TransferLeadership(target)
		return nil
	})
	if err != nil {
		return start, c.engineError(stream, partition, group, err)
	}
	return start, refusal
}

// awaitTransfer polls the old leader's replica until it follows to in a
// newer term and its commit has passed both the entries it held when it
// asked and the first the new leader sent it: the new leader has then
// committed in its own term, which is when it takes appends.
func (c *clusterListener) awaitTransfer(ctx context.Context, stream string, partition uint32, group replica.GroupID, to uint32,
	start transferStart, began time.Time) (*wire.LeaderTransferred, error) {
	ticker := time.NewTicker(transferPoll)
	defer ticker.Stop()
	mark := start.lastIndex + 1
	seen := false
	for {
		status, err := c.host.Status(ctx, group)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return nil, c.transferTimedOut(stream, partition, to)
		case err != nil:
			return nil, c.engineError(stream, partition, group, err)
		}
		if status.Term > start.term && status.Leader != 0 {
			if status.Leader.Node() != to {
				return nil, fmt.Errorf("%w: node %d took the leadership of %s/%d instead of node %d; ask again",
					broker.ErrBusy, status.Leader.Node(), stream, partition, to)
			}
			if !seen {
				seen, mark = true, max(mark, status.LastIndex)
			}
			if status.Commit >= mark {
				elapsed := max(time.Since(began).Microseconds(), 1)
				return &wire.LeaderTransferred{Stream: []byte(stream), Partition: partition, From: c.config.NodeID,
					Leader: to, Term: status.Term, ElapsedUs: uint32(min(elapsed, 1<<32-1))}, nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, c.transferTimedOut(stream, partition, to)
			}
			return nil, ctx.Err()
		case <-ticker.C:
		}
	}
}

func (c *clusterListener) transferTimedOut(stream string, partition uint32, to uint32) error {
	return fmt.Errorf("%w: node %d did not take the leadership of %s/%d within %v (is it up and caught up? "+
		"`ironbus cluster status` shows its lag); node %d leads again, or an election picks a leader",
		broker.ErrBusy, to, stream, partition, transferWait, c.config.NodeID)
}

// refused is the engine's error for a proposal the replica refused. While
// this node hands the partition over, its leader drops proposals
// (ErrLeaderNotReady), and once it has stepped down it knows no leader
// until the new one's first message; an append that meets either waits
// for the transfer's outcome and is then sent to the new leader by a
// not_leader naming it: a no_leader would have the client wait out a
// retry hint many times longer than the transfer.
func (p *partitionReplica) refused(err error) error {
	var notLeader *replica.NotLeaderError
	if errors.Is(err, replica.ErrLeaderNotReady) || (errors.As(err, &notLeader) && notLeader.Leader == 0) {
		if done, ok := p.cluster.transfers.Load(p.group); ok {
			select {
			case <-done.(chan struct{}):
			case <-time.After(transferWait):
			}
			if !p.leading.Load() {
				return p.NotServing()
			}
		}
	}
	return p.cluster.engineError(p.stream, p.partition, p.group, err)
}
