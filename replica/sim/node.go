package sim

import (
	"errors"
	"slices"

	"github.com/ironbus/ironbus/replica"
)

// node is one machine: its disk outlives its replica, which is nil while
// the node is down.
type node struct {
	number      uint32
	incarnation uint32
	id          replica.ReplicaID
	disk        *disk
	replica     *replica.Replica

	// restartAt is the step a down node comes back at.
	restartAt int64
	// joining: a new incarnation the operator has not yet made a voter
	// in place of the old one.
	joining bool
	// syncFailing: this node's fsync was made to fail.
	syncFailing bool
	// stop is the latch or damage the replica reported, and recoverAt the
	// step its operator acts on it (a restart, or a rebuild).
	stop      error
	recoverAt int64

	// maxTerm is the highest term the replica reported in this process
	// lifetime; verifiedTo the index up to which its journal was checked
	// against the committed log.
	maxTerm    uint64
	verifiedTo uint64
	// dataEntries indexes the data entries of its log up to scannedTo,
	// for reads.
	dataEntries []dataEntry
	scannedTo   uint64
}

type dataEntry struct {
	base  uint64
	count uint32
	index uint64
}

func (c *cluster) ids() []replica.ReplicaID {
	ids := make([]replica.ReplicaID, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.id
	}
	return ids
}

func (c *cluster) bootstrap() {
	for _, n := range c.nodes {
		c.start(n)
		if n.replica == nil {
			return
		}
		if err := n.replica.Bootstrap(c.ids()); err != nil {
			c.violation("node %d: bootstrap: %v", n.number, err)
		}
	}
	c.event("bootstrap %d nodes, faults %s", len(c.nodes), c.config.Faults)
}

// start opens the node's replica on its disk.
func (c *cluster) start(n *node) {
	id := n.id
	r, err := replica.New(replica.Config{
		ID: id, Group: 1, Journal: n.disk,
		Send: func(to replica.ReplicaID, message []byte) { c.send(id, to, message) },
		Apply: func(entries []replica.Entry) error {
			for _, e := range entries {
				c.applied(n, e)
			}
			return nil
		},
		ElectionTicks: electionTicks, HeartbeatTicks: 1,
	})
	if err != nil {
		c.violation("node %d.%d does not open on its journal (%s): %v", n.number, n.incarnation, n.disk, err)
		return
	}
	n.replica, n.restartAt, n.stop, n.recoverAt = r, 0, nil, 0
	n.maxTerm, n.verifiedTo, n.dataEntries, n.scannedTo = n.disk.durableState.Term, 0, nil, 0
	if s := r.Status(); s.Damaged != nil {
		c.stopped(n, s.Damaged)
	}
}

// crash cuts the node's power: its replica is gone, its unsynced writes
// are lost, and it restarts after downFor steps.
func (c *cluster) crash(n *node, downFor int64) {
	if n.replica != nil {
		n.replica.Close()
		c.pollClients(n)
		n.replica = nil
	}
	n.disk.crash(c.rng)
	n.syncFailing = false
	n.restartAt = c.now + downFor
}

// call runs a replica call that may write the node's journal; a power cut
// in the middle of one of its writes crashes the node there (what the
// call sent before the cut is on the network already).
func (c *cluster) call(n *node, f func()) (cut bool) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(powerCut); !ok {
				panic(p)
			}
			c.crash(n, c.downtime())
			c.fault("power cut mid-write", "power cut node %d in the middle of a write, down until %d", n.number, n.restartAt)
			cut = true
		}
	}()
	f()
	return false
}

// wipe brings the node back with an empty disk: a new incarnation, which
// the operator adds as a learner and promotes in place of the old one.
func (c *cluster) wipe(n *node, downFor int64) {
	c.crash(n, downFor)
	if c.config.reuseIdentity {
		n.disk = newDisk(c.violation)
		return
	}
	c.retired[n.id] = n.disk
	n.incarnation++
	n.id = replica.NewReplicaID(n.number, n.incarnation)
	n.disk = newDisk(c.violation)
	n.joining = true
}

// stopped notes a latch or damage a replica reported, and schedules its
// operator: a latched node restarts (its disk works again), a damaged one
// is rebuilt from an empty disk.
func (c *cluster) stopped(n *node, err error) {
	if n.stop != nil {
		return
	}
	switch {
	case errors.Is(err, replica.ErrLatched):
		if !n.syncFailing {
			c.violation("node %d latched without a failed sync: %v", n.number, err)
		}
	case errors.Is(err, replica.ErrDamaged):
		if len(n.disk.corrupted) == 0 {
			c.violation("node %d found damage nobody planted: %v", n.number, err)
		}
	default:
		c.violation("node %d: %v", n.number, err)
	}
	n.stop = err
	n.disk.stopped = true
	n.recoverAt = c.now + 50 + c.rng.Int64N(200)
	if c.healed > 0 {
		n.recoverAt = c.now + 1
	}
	kind := "latched"
	if errors.Is(err, replica.ErrDamaged) {
		kind = "damage found"
	}
	c.fault(kind, "node %d.%d stopped: %v", n.number, n.incarnation, err)
}

// recover restarts the nodes that are due, heals a partition that is
// due, and lets operators act on stopped replicas.
func (c *cluster) recover() {
	if c.net.healAt != 0 && c.now >= c.net.healAt {
		c.net.heal()
		c.event("partition healed")
	}
	for _, n := range c.nodes {
		switch {
		case n.replica == nil && n.restartAt != 0 && c.now >= n.restartAt:
			c.start(n)
			c.event("node %d.%d restarted (%s)", n.number, n.incarnation, n.disk)
			c.process(n)
		case n.stop != nil && c.now >= n.recoverAt && errors.Is(n.stop, replica.ErrLatched):
			c.crash(n, 1)
			c.event("operator restarts latched node %d", n.number)
		case n.stop != nil && c.now >= n.recoverAt:
			c.wipe(n, 1)
			c.fault("rebuild", "operator rebuilds damaged node %d as %d.%d", n.number, n.number, n.incarnation)
		}
	}
}

// heal ends the nemeses: links whole, no message faults, every node up,
// no fsync failing.
func (c *cluster) heal() {
	c.healed = c.now
	c.net.heal()
	c.net.calm()
	for _, n := range c.nodes {
		if n.syncFailing && n.stop == nil {
			n.disk.FailSync(nil)
			n.syncFailing = false
		}
		if n.replica == nil {
			n.restartAt = c.now + 1
		}
		if n.stop != nil {
			n.recoverAt = c.now + 1
		}
	}
	c.event("heal")
}

// leader is the node whose running replica leads, if any.
func (c *cluster) leader() *node {
	for _, n := range c.nodes {
		if n.replica != nil && n.stop == nil && n.replica.Status().Role == replica.RoleLeader {
			return n
		}
	}
	return nil
}

// operate is the cluster's operator: it makes each new incarnation a
// learner, promotes it once caught up and removes the identity it
// replaces, one membership change at a time: the promotion and the
// removal as two simple changes, or as one joint change when
// Config.JointMembership says so.
func (c *cluster) operate() {
	if c.change != nil {
		select {
		case <-c.change.Done():
			c.change = nil
		default:
			if c.now < c.changeDeadline {
				return
			}
			c.change = nil
		}
	}
	leader := c.leader()
	if leader == nil {
		return
	}
	status := leader.replica.Status()
	config := status.Config
	if len(config.VotersOutgoing) > 0 {
		return // a joint configuration leaves by itself
	}
	for _, n := range c.nodes {
		var old []replica.ReplicaID
		for _, id := range slices.Concat(config.Voters, config.Learners) {
			if id.Node() == n.number && id != n.id {
				old = append(old, id)
			}
		}
		voter, learner := slices.Contains(config.Voters, n.id), slices.Contains(config.Learners, n.id)
		var change replica.MembershipChange
		switch {
		case voter && len(old) == 0:
			n.joining = false
			continue
		case n.replica == nil || n.stop != nil:
			continue
		case !voter && !learner:
			change.AddLearners = []replica.ReplicaID{n.id}
		case learner && status.Match[n.id] >= status.Commit && c.config.JointMembership:
			change.Promote, change.Remove = []replica.ReplicaID{n.id}, old
		case learner && status.Match[n.id] >= status.Commit:
			change.Promote = []replica.ReplicaID{n.id}
		case voter:
			change.Remove = old
		default:
			continue // a learner catching up
		}
		var p *replica.Proposal
		var err error
		if c.call(leader, func() { p, err = leader.replica.ChangeMembership(change) }) {
			return
		}
		c.process(leader)
		if err != nil {
			return
		}
		c.fault("membership change", "operator proposes %+v for node %d", change, n.number)
		c.change, c.changeDeadline = p, c.now+clientTimeout
		return
	}
}

// converged: a leader leads a configuration of exactly the current
// incarnations, all voters, and every node has applied its commit.
func (c *cluster) converged() bool {
	leader := c.leader()
	if leader == nil {
		return false
	}
	status := leader.replica.Status()
	if status.LastIndex != status.Commit {
		return false
	}
	ids := c.ids()
	slices.Sort(ids)
	if !slices.Equal(status.Config.Voters, ids) || len(status.Config.Learners) > 0 ||
		len(status.Config.VotersOutgoing) > 0 {
		return false
	}
	for _, n := range c.nodes {
		if n.replica == nil || n.stop != nil {
			return false
		}
		if s := n.replica.Status(); s.Applied < status.Commit || s.Commit < status.Commit {
			return false
		}
	}
	return uint64(len(c.committed)) >= status.Commit
}
