package peerlink

import (
	"cmp"
	"slices"
	"time"
)

// Status is a snapshot of the link for `cluster status` and metrics.
type Status struct {
	Node    NodeID
	Cluster string
	Address string // the listener's address
	TLS     bool
	// InboundRefused counts inbound connections turned away: failed or
	// refused handshakes, and connections beyond the handshake limit.
	InboundRefused uint64
	// DroppedUnknown counts messages sent to a node the link does not know.
	DroppedUnknown uint64
	Peers          []PeerStatus // by node id
}

// PeerStatus is one peer's state and counters. Counters only grow; bytes
// are wire bytes, frame headers included.
type PeerStatus struct {
	Node           NodeID
	Address        string // where this node dials it ("" for a lower peer)
	Dials          bool   // this node dials it (this node's id is lower)
	Connected      bool
	Remote         string    // the connection's remote address, when connected
	ConnectedSince time.Time // when the current connection was made
	// LastError is why the last dial, handshake or connection failed;
	// nil once a connection is made. errors.Is finds the sentinel.
	LastError error

	QueueMessages int // messages waiting for the writer
	QueueBytes    int

	MessagesSent, BytesSent         uint64
	MessagesReceived, BytesReceived uint64
	MessagesDropped, BytesDropped   uint64 // queue full, oversized, or lost with a failed connection
	Connects, Disconnects           uint64
	DialFailures                    uint64 // TCP connect failed
	HandshakeFailures               uint64 // connected, but the handshake failed or was refused (either side)
}

// Status returns a snapshot of the link and its peers.
func (l *Link) Status() Status {
	status := Status{
		Node: l.config.Node, Cluster: l.config.Cluster, Address: l.Addr().String(), TLS: l.config.TLS != nil,
		InboundRefused: l.inboundRefused.Load(), DroppedUnknown: l.droppedUnknown.Load(),
	}
	for _, p := range *l.peers.Load() {
		status.Peers = append(status.Peers, p.status())
	}
	slices.SortFunc(status.Peers, func(a, b PeerStatus) int { return cmp.Compare(a.Node, b.Node) })
	return status
}

func (p *peer) status() PeerStatus {
	p.mu.Lock()
	status := PeerStatus{
		Node: p.id, Address: p.mu.address, Dials: p.dials, Connected: p.mu.conn != nil,
		LastError: p.mu.lastError, QueueMessages: p.mu.pendingMessages, QueueBytes: len(p.mu.pending),
	}
	if p.mu.conn != nil {
		status.Remote = p.mu.conn.raw.RemoteAddr().String()
		status.ConnectedSince = p.mu.connectedSince
	}
	p.mu.Unlock()
	c := &p.counters
	status.MessagesSent, status.BytesSent = c.messagesSent.Load(), c.bytesSent.Load()
	status.MessagesReceived, status.BytesReceived = c.messagesReceived.Load(), c.bytesReceived.Load()
	status.MessagesDropped, status.BytesDropped = c.messagesDropped.Load(), c.bytesDropped.Load()
	status.Connects, status.Disconnects = c.connects.Load(), c.disconnects.Load()
	status.DialFailures, status.HandshakeFailures = c.dialFailures.Load(), c.handshakeFailures.Load()
	return status
}
