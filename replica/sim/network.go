package sim

import (
	"container/heap"

	"github.com/ironbus/ironbus/replica"
)

// envelope is one message in flight.
type envelope struct {
	from, to replica.ReplicaID
	at       int64  // the step it arrives at
	sequence uint64 // send order, to break ties deterministically
	message  []byte
}

type envelopeQueue []envelope

func (q envelopeQueue) Len() int { return len(q) }
func (q envelopeQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].sequence < q[j].sequence
}
func (q envelopeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *envelopeQueue) Push(x any)   { *q = append(*q, x.(envelope)) }
func (q *envelopeQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// network carries messages between nodes with the faults of a real one:
// each message may be dropped, duplicated, delayed (which reorders), and
// links may be cut in either direction.
type network struct {
	queue    envelopeQueue
	sequence uint64

	// Per-message faults, in parts per thousand.
	dropPerMille, duplicatePerMille, slowPerMille int
	minDelay, maxDelay                            int64 // steps
	slowDelay                                     int64 // extra steps of a slow message

	// cut[from][to]: messages between these node numbers are lost.
	cut    [][]bool
	healAt int64 // the step a partition heals at (0: none)

	sent, dropped, duplicated, cutOff int
}

func newNetwork(nodes int) network {
	cut := make([][]bool, nodes+1)
	for i := range cut {
		cut[i] = make([]bool, nodes+1)
	}
	return network{cut: cut, minDelay: 1, maxDelay: 1}
}

// send queues a copy of message, or drops it, from the cluster's random
// source.
func (c *cluster) send(from, to replica.ReplicaID, message []byte) {
	if sender := c.nodes[from.Node()-1]; sender.id == from {
		c.checkPersisted(sender, message)
	}
	n := &c.net
	n.sent++
	c.traceEvent(traceSend, uint64(from), uint64(to), hashBytes(message))
	if c.rng.IntN(1000) < n.dropPerMille {
		n.dropped++
		return
	}
	copies := 1
	if c.rng.IntN(1000) < n.duplicatePerMille {
		copies, n.duplicated = 2, n.duplicated+1
	}
	for range copies {
		delay := n.minDelay + c.rng.Int64N(n.maxDelay-n.minDelay+1)
		if c.rng.IntN(1000) < n.slowPerMille {
			delay += 1 + c.rng.Int64N(n.slowDelay+1)
		}
		n.sequence++
		heap.Push(&n.queue, envelope{from: from, to: to, at: c.now + delay, sequence: n.sequence,
			message: append([]byte(nil), message...)})
	}
}

// due pops the next message that arrives by now.
func (n *network) due(now int64) (envelope, bool) {
	if len(n.queue) == 0 || n.queue[0].at > now {
		return envelope{}, false
	}
	return heap.Pop(&n.queue).(envelope), true
}

func (n *network) isCut(from, to replica.ReplicaID) bool {
	return n.cut[from.Node()][to.Node()]
}

func (n *network) heal() {
	for _, row := range n.cut {
		clear(row)
	}
	n.healAt = 0
}

// calm turns off the per-message faults (drop, duplicate, slow messages);
// plain latency stays.
func (n *network) calm() {
	n.dropPerMille, n.duplicatePerMille, n.slowPerMille = 0, 0, 0
}
