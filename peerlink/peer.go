package peerlink

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// peer is one remote node: its address, its bounded queue of encoded
// frames (which outlives connections), its connection and its counters.
type peer struct {
	link  *Link
	id    NodeID
	dials bool // this node has the lower id of the pair, so it dials

	ctx    context.Context // canceled when the peer is removed or the link closed
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: frames became pending
	redial chan struct{} // capacity 1: the address changed

	mu struct {
		sync.Mutex
		address         string
		pending         []byte // encoded frames, in send order
		pendingMessages int
		conn            *connection
		connectedSince  time.Time
		lastError       error
		removed         bool
	}
	counters counters
}

type counters struct {
	messagesSent, bytesSent         atomic.Uint64
	messagesReceived, bytesReceived atomic.Uint64
	messagesDropped, bytesDropped   atomic.Uint64
	connects, disconnects           atomic.Uint64
	dialFailures, handshakeFailures atomic.Uint64
}

func newPeer(l *Link, id NodeID, address string) *peer {
	p := &peer{link: l, id: id, dials: l.config.Node < id,
		wake: make(chan struct{}, 1), redial: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(l.ctx)
	p.mu.address = address
	return p
}

// enqueue appends one frame to the queue. The queue takes a frame when it
// is empty or when the frame fits under QueueBytes, so a peer holds at
// most max(QueueBytes, one largest frame) of queued bytes.
func (p *peer) enqueue(channel uint64, payload []byte) bool {
	header := frameHeader(channel, payload) // checksummed outside the lock
	size := frameBytes(len(payload))
	p.mu.Lock()
	if p.mu.removed || (len(p.mu.pending) > 0 && len(p.mu.pending)+size > p.link.config.QueueBytes) {
		p.mu.Unlock()
		p.countDropped(1, size)
		return false
	}
	first := len(p.mu.pending) == 0
	p.mu.pending = append(append(p.mu.pending, header[:]...), payload...)
	p.mu.pendingMessages++
	p.mu.Unlock()
	if first {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// takePending hands the queued frames to a writer in exchange for its
// emptied buffer, so neither side copies or allocates.
func (p *peer) takePending(spare []byte) (batch []byte, messages int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	batch, messages = p.mu.pending, p.mu.pendingMessages
	p.mu.pending, p.mu.pendingMessages = spare[:0], 0
	return batch, messages
}

// dropPendingLocked discards the queue: its frames were meant for a
// connection that failed, and Raft resends what still matters.
// REQUIRES: p.mu held.
func (p *peer) dropPendingLocked() {
	p.countDropped(p.mu.pendingMessages, len(p.mu.pending))
	p.mu.pending, p.mu.pendingMessages = nil, 0
}

func (p *peer) countDropped(messages, bytes int) {
	if messages > 0 {
		p.counters.messagesDropped.Add(uint64(messages))
		p.counters.bytesDropped.Add(uint64(bytes))
	}
}

// install makes c the peer's connection and returns the one it replaces;
// false when the peer was removed.
func (p *peer) install(c *connection) (replaced *connection, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.removed {
		return nil, false
	}
	replaced, p.mu.conn = p.mu.conn, c
	p.mu.connectedSince = time.Now()
	p.mu.lastError = nil
	p.counters.connects.Add(1)
	return replaced, true
}

// detached is told by a closing connection why it closed. Losing the
// active connection drops the queue and reports the peer unreachable,
// unless the peer or the link is shutting down.
func (p *peer) detached(c *connection, reason error) {
	p.mu.Lock()
	active := p.mu.conn == c
	if active {
		p.mu.conn = nil
		p.dropPendingLocked()
		p.counters.disconnects.Add(1)
	}
	p.mu.Unlock()
	if !active || p.ctx.Err() != nil {
		return
	}
	p.noteFailure("peer link: connection lost", reason)
	p.link.reportUnreachable(p.id)
}

// failed records a dial or handshake that did not produce a connection.
func (p *peer) failed(err error, connected bool) {
	if connected {
		p.counters.handshakeFailures.Add(1)
	} else {
		p.counters.dialFailures.Add(1)
	}
	p.mu.Lock()
	p.dropPendingLocked()
	p.mu.Unlock()
	p.noteFailure("peer link: node unreachable", err)
	p.link.reportUnreachable(p.id)
}

// noteFailure keeps the last error for Status and logs it, loudly only
// when it differs from the previous one (a dead peer fails every backoff).
func (p *peer) noteFailure(message string, err error) {
	p.mu.Lock()
	repeated := p.mu.lastError != nil && p.mu.lastError.Error() == err.Error()
	p.mu.lastError = err
	p.mu.Unlock()
	level := p.link.logger.Warn
	if repeated {
		level = p.link.logger.Debug
	}
	level(message, "peer", p.id, "error", err)
}

// address returns the address to dial.
func (p *peer) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.address
}

// setAddress changes the address; a live connection is closed so that the
// next one goes to the new address, and a dial loop in backoff retries at
// once.
func (p *peer) setAddress(address string) {
	p.mu.Lock()
	changed := p.mu.address != address
	p.mu.address = address
	c := p.mu.conn
	p.mu.Unlock()
	if !changed || !p.dials {
		return
	}
	if c != nil {
		c.close(ErrPeerRemoved)
	}
	select {
	case p.redial <- struct{}{}:
	default:
	}
}

// shutdown stops the peer for good: dial loop, connection and queue.
func (p *peer) shutdown(reason error) {
	p.cancel()
	p.mu.Lock()
	p.mu.removed = true
	c := p.mu.conn
	p.mu.pending, p.mu.pendingMessages = nil, 0
	p.mu.Unlock()
	if c != nil {
		c.close(reason)
	}
}

// dialLoop keeps one connection to a higher peer: dial, hand the
// connection over, wait for it to end, back off, dial again. The backoff
// doubles up to BackoffMax (straight to it after a refusal, which a
// retry will not cure soon) and resets after a connection that lived
// at least BackoffMax.
func (p *peer) dialLoop() {
	config := &p.link.config
	backoff := config.BackoffMin
	for p.ctx.Err() == nil {
		c, connected, err := p.link.dial(p)
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			p.failed(err, connected)
			if errors.Is(err, ErrRefused) || errors.Is(err, ErrIdentity) || errors.Is(err, ErrWrongNode) ||
				errors.Is(err, ErrWrongCluster) || errors.Is(err, ErrNotLoopback) {
				backoff = config.BackoffMax
			}
		} else {
			began := time.Now()
			if !p.link.start(c) {
				return
			}
			select {
			case <-c.done:
			case <-p.ctx.Done():
				return
			}
			if time.Since(began) >= config.BackoffMax {
				backoff = config.BackoffMin
			}
		}
		if !p.sleep(jittered(backoff)) {
			return
		}
		backoff = min(2*backoff, config.BackoffMax)
	}
}

// sleep waits d, less if the address changes; false once the peer stops.
func (p *peer) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-p.redial:
	case <-p.ctx.Done():
		return false
	}
	return true
}

// jittered spreads redials over [d/2, d] so that peers that lost each
// other at the same moment do not redial in lockstep.
func jittered(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
