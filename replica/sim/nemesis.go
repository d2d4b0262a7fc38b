package sim

import (
	"errors"

	"github.com/ironbus/ironbus/replica"
)

// errInjectedSync is the fsync failure the nemesis plants.
var errInjectedSync = errors.New("sim: injected fsync failure (EIO)")

// chooseNetwork draws the run's message faults.
func (c *cluster) chooseNetwork() {
	n := &c.net
	n.minDelay, n.maxDelay = 1, 1+c.rng.Int64N(5)
	if c.config.Faults&FaultMessages == 0 {
		return
	}
	n.dropPerMille = c.rng.IntN(60)
	n.duplicatePerMille = c.rng.IntN(30)
	n.slowPerMille = c.rng.IntN(50)
	n.slowDelay = 20 + c.rng.Int64N(100)
	c.event("network: latency %d-%d steps, drop %d‰, duplicate %d‰, slow %d‰ (+%d steps)",
		n.minDelay, n.maxDelay, n.dropPerMille, n.duplicatePerMille, n.slowPerMille, n.slowDelay)
}

// nemesis plants one fault of the kinds the run enables.
func (c *cluster) nemesis() {
	var kinds []Faults
	for f := FaultPartition; f <= FaultTransfer; f <<= 1 {
		if c.config.Faults&f != 0 {
			kinds = append(kinds, f)
		}
	}
	if len(kinds) == 0 {
		return
	}
	switch kinds[c.rng.IntN(len(kinds))] {
	case FaultPartition:
		c.partition()
	case FaultCrash:
		n := c.pickNode(func(n *node) bool { return n.replica != nil })
		switch {
		case n == nil:
		case c.rng.IntN(3) == 0:
			n.disk.cutAfterVote = true
			c.event("node %d will crash after its next vote", n.number)
		case c.rng.IntN(2) == 0:
			n.disk.cutAt = 1 + c.rng.IntN(6)
			c.event("power cut node %d at its %d-th journal write from now", n.number, n.disk.cutAt)
		default:
			c.crash(n, c.downtime())
			c.fault("crash", "crash node %d (%s), down until %d", n.number, n.disk, n.restartAt)
		}
	case FaultCrashAll:
		for _, n := range c.nodes {
			if n.replica != nil {
				c.crash(n, c.downtime())
			}
		}
		c.fault("power cut of every node", "power cut of every node")
	case FaultSyncFailure:
		c.failSync()
	case FaultCorruption:
		c.corrupt()
	case FaultRetention:
		c.retain()
	case FaultTransfer:
		c.transfer()
	case FaultWipe:
		if c.diskFaults() < (len(c.nodes)-1)/2 {
			n := c.pickNode(func(n *node) bool { return !n.joining })
			if n != nil {
				c.wipe(n, 20+c.rng.Int64N(300))
				c.fault("wipe", "wipe node %d: back as %d.%d at %d", n.number, n.number, n.incarnation, n.restartAt)
			}
		}
	}
}

// downtime draws how long a crashed node stays down: half the time a
// quick restart (within an election, while votes of the term it forgot
// may still be in flight), otherwise up to a few seconds.
func (c *cluster) downtime() int64 {
	if c.rng.IntN(2) == 0 {
		return 1 + c.rng.Int64N(20)
	}
	return 20 + c.rng.Int64N(300)
}

// pickNode picks a random node that satisfies ok, or nil.
func (c *cluster) pickNode(ok func(*node) bool) *node {
	var candidates []*node
	for _, n := range c.nodes {
		if ok(n) {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[c.rng.IntN(len(candidates))]
}

// partition cuts links until a random step: the leader isolated, a
// symmetric split into a minority and a majority, or one node deaf or
// mute (an asymmetric cut).
func (c *cluster) partition() {
	if c.net.healAt != 0 {
		return
	}
	nodes := len(c.nodes)
	cut := func(from, to int) { c.net.cut[from][to] = true }
	switch c.rng.IntN(4) {
	case 0:
		leader := c.leader()
		if leader == nil {
			return
		}
		for other := 1; other <= nodes; other++ {
			if other != int(leader.number) {
				cut(int(leader.number), other)
				cut(other, int(leader.number))
			}
		}
		c.fault("leader isolated", "isolate leader node %d", leader.number)
	case 1:
		side := make([]bool, nodes+1)
		for _, i := range c.rng.Perm(nodes)[:1+c.rng.IntN((nodes-1)/2)] {
			side[i+1] = true
		}
		for a := 1; a <= nodes; a++ {
			for b := 1; b <= nodes; b++ {
				if side[a] != side[b] {
					cut(a, b)
				}
			}
		}
		c.fault("split", "split %v from the rest", side)
	default:
		victim, inbound := 1+c.rng.IntN(nodes), c.rng.IntN(2) == 0
		for other := 1; other <= nodes; other++ {
			switch {
			case other == victim:
			case inbound:
				cut(other, victim)
			default:
				cut(victim, other)
			}
		}
		c.fault("one-way cut", "one-way cut of node %d (it hears nothing: %v)", victim, inbound)
	}
	c.net.healAt = c.now + 50 + c.rng.Int64N(400)
}

// failSync makes one running node's fsync fail from now on; it must latch
// at its next sync.
func (c *cluster) failSync() {
	for _, n := range c.nodes {
		if n.syncFailing || (n.stop != nil && errors.Is(n.stop, errInjectedSync)) {
			return // one at a time
		}
	}
	n := c.pickNode(func(n *node) bool { return n.replica != nil && n.stop == nil })
	if n == nil {
		return
	}
	n.disk.FailSync(errInjectedSync)
	n.syncFailing = true
	c.fault("fsync failure", "fsync fails on node %d from now on", n.number)
}

// corrupt flips a bit in a committed entry of a minority node's journal.
func (c *cluster) corrupt() {
	if c.diskFaults() >= (len(c.nodes)-1)/2 {
		return
	}
	n := c.pickNode(func(n *node) bool { return n.replica != nil && n.stop == nil && !n.joining })
	if n == nil {
		return
	}
	commit := min(n.replica.Status().Commit, n.disk.LastIndex())
	first := n.disk.FirstIndex()
	if commit < first {
		return
	}
	index := first + c.rng.Uint64N(commit-first+1)
	n.disk.corrupt(index)
	c.fault("corruption", "corrupt committed entry %d on node %d (commit %d)", index, n.number, commit)
}

// retain compacts one running node's journal, or every one's, to a random
// distance below its applied index.
func (c *cluster) retain() {
	every := c.rng.IntN(2) == 0
	for _, n := range c.nodes {
		if n.replica == nil || n.stop != nil || (!every && c.rng.IntN(len(c.nodes)) != 0) {
			continue
		}
		applied, keep := n.replica.Status().Applied, c.rng.Uint64N(40)
		if applied <= keep {
			continue
		}
		var start uint64
		var err error
		if c.call(n, func() { start, err = n.replica.Compact(applied - keep) }) {
			continue
		}
		switch {
		case err != nil && errors.Is(err, replica.ErrDamaged) && n.replica.Status().Damaged == nil:
			c.violation("node %d read a damaged entry to compact and did not mark itself damaged: %v", n.number, err)
			return
		case err != nil:
			c.stopped(n, err)
			continue
		}
		c.fault("retention", "node %d compacts to %d: its journal starts after %d", n.number, applied-keep, start)
	}
}

// transfer asks the leader to hand over to another member.
func (c *cluster) transfer() {
	leader := c.leader()
	if leader == nil {
		return
	}
	voters := leader.replica.Status().Config.Voters
	to := voters[c.rng.IntN(len(voters))]
	if to == leader.id {
		return
	}
	leader.replica.TransferLeadership(to)
	c.process(leader)
	c.fault("transfer", "leader node %d hands over to %d.%d", leader.number, to.Node(), to.Incarnation())
}

// diskFaults counts the nodes whose disk lost or damaged committed data
// and that are not yet rebuilt: the group survives (nodes-1)/2 of them.
func (c *cluster) diskFaults() int {
	faults := 0
	for _, n := range c.nodes {
		if n.joining || len(n.disk.corrupted) > 0 {
			faults++
		}
	}
	return faults
}
