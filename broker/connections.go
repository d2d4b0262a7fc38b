package broker

import (
	"fmt"
	"sync/atomic"
)

// Connection is one client attached to the engine through any adapter. It
// counts against Config.MaxConnections, names the client as a member of
// the groups it consumes (ID), and gives its keyless records a partition
// of their own (Sticky).
type Connection struct {
	broker *Broker
	id     uint64
	closed atomic.Bool
}

// Connect attaches a client. It fails with ErrShuttingDown while the
// broker drains and ErrTooManyConnections at the limit; both are counted
// as refused connections in the metrics.
func (b *Broker) Connect() (*Connection, error) {
	if b.draining.Load() {
		b.rejected[rejectDraining].Add(1)
		return nil, ErrShuttingDown
	}
	if n := b.connections.Add(1); n > int64(b.cfg.MaxConnections) {
		b.connections.Add(-1)
		b.rejected[rejectLimit].Add(1)
		return nil, fmt.Errorf("%w: the broker serves at most %d connections", ErrTooManyConnections, b.cfg.MaxConnections)
	}
	b.accepted.Add(1)
	return &Connection{broker: b, id: b.connectionSeq.Add(1)}, nil
}

// ID is the connection's member id in groups: unique in this broker's
// lifetime.
func (c *Connection) ID() uint64 { return c.id }

// Sticky is the connection's own number for placing keyless records: a
// stream of n partitions takes them on partition Sticky() % n.
func (c *Connection) Sticky() uint32 { return uint32(c.id - 1) }

// Close detaches the client; a second Close does nothing. The groups it
// consumed are released by the adapter (Group.Release) before.
func (c *Connection) Close() {
	if c.closed.CompareAndSwap(false, true) {
		c.broker.connections.Add(-1)
	}
}
