package sim

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// The few fields of a Raft message the persist-before-answer check reads,
// decoded from the protobuf wire format (go.etcd.io/raft/v3/raftpb's
// Message; only package replica imports the library itself).
const (
	fieldType   = 1
	fieldTo     = 2
	fieldTerm   = 4
	fieldIndex  = 6
	fieldReject = 10

	messageApp       = 3
	messageAppResp   = 4
	messageVoteResp  = 6
	messageSnapshot  = 7
	messageHeartbeat = 8
)

type wireMessage struct {
	kind, to, term, index uint64
	reject                bool
}

var errWire = errors.New("sim: message is not a protobuf Raft message")

func parseMessage(b []byte) (wireMessage, error) {
	var m wireMessage
	for len(b) > 0 {
		number, kind, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, errWire
		}
		b = b[n:]
		if kind != protowire.VarintType {
			if n = protowire.ConsumeFieldValue(number, kind, b); n < 0 {
				return m, errWire
			}
			b = b[n:]
			continue
		}
		value, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return m, errWire
		}
		b = b[n:]
		switch number {
		case fieldType:
			m.kind = value
		case fieldTo:
			m.to = value
		case fieldTerm:
			m.term = value
		case fieldIndex:
			m.index = value
		case fieldReject:
			m.reject = value != 0
		}
	}
	return m, nil
}

// checkPersisted holds a message against its sender's disk at the moment
// it leaves (invariant 1, persist before answer): a granted vote must be
// synced, an accepted append synced up to the index it reports, and a
// leader's appends and heartbeats may leave before its entries are synced
// but never before its term is. A message of an older term than the
// synced one is a late message, which Raft tolerates.
func (c *cluster) checkPersisted(n *node, message []byte) {
	m, err := parseMessage(message)
	if err != nil {
		c.violation("node %d sent %d bytes that do not decode: %v", n.number, len(message), err)
		return
	}
	if n.stop != nil {
		c.violation("node %d.%d sent a message of type %d after it stopped (%v)", n.number, n.incarnation, m.kind, n.stop)
	}
	d := n.disk
	switch {
	case m.kind == messageVoteResp && !m.reject:
		// A grant left in the Ready that moved on to a later term is
		// older than the synced state, which no longer shows it.
		if d.durableState.Term < m.term || (d.durableState.Term == m.term && uint64(d.durableState.Vote) != m.to) {
			c.violation("node %d.%d granted its vote in term %d to %d.%d before syncing it (durable term %d, vote %d.%d)",
				n.number, n.incarnation, m.term, m.to>>32, uint32(m.to), d.durableState.Term,
				d.durableState.Vote.Node(), d.durableState.Vote.Incarnation())
		}
	case m.kind == messageAppResp && !m.reject:
		if last := d.durableLast(); last < m.index {
			c.violation("node %d.%d acknowledged entries to index %d with its journal synced to %d",
				n.number, n.incarnation, m.index, last)
		}
	case m.kind == messageApp || m.kind == messageSnapshot || m.kind == messageHeartbeat:
		// A deposed leader's last appends may leave after the term that
		// deposed it is synced, as a delayed message would arrive.
		if d.durableState.Term < m.term {
			c.violation("node %d.%d sent term %d appends or heartbeats before syncing that term (durable term %d)",
				n.number, n.incarnation, m.term, d.durableState.Term)
		}
	}
}
