package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Leader following of an idempotent Producer. Each partition's records
// go over one connection: the producer's home connection (the one it
// was made on, or the one it redialled through the seeds), or the
// connection to the node that said it leads the partition. When a member
// answers a kept record not_leader, nothing was stored, so the record
// keeps its sequence and waits (keptLost, as after a connection failure)
// while the resync moves its partition:
//
//  1. Send pauses, and the resync waits until every record in flight,
//     on every connection, has its answer or its connection has failed.
//  2. The partition's route is set to the leader named (a connection of
//     the producer's own pool, by address), or the leader ClusterInfo
//     names, or the next seed.
//  3. The producer announces itself (ProducerInit) again on every
//     connection it uses, so each epoch it sends is newer than any it
//     sent before, on every partition.
//  4. The waiting records are resent in send order, hence in sequence
//     order per partition, with their sequences unchanged: the leader
//     answers a record it already holds (replicated from the old leader)
//     as a duplicate, and stores the others once.
//
// The ordering rule: no record is sent to a partition's new leader while
// any record sent before it is unanswered on any connection. Step 1
// drains every connection rather than the partition's alone: moves are
// rare, and the simpler barrier also keeps a record that an old
// connection might still store from racing its resend. no_leader is
// handled the same way, without a move, after the broker's retry_after
// hint or a backoff growing with each consecutive refusal.

// producerRoutes is a Producer's leader-following state, guarded by
// Producer.mu; routed mirrors len(routes) > 0 for Send's fast path.
type producerRoutes struct {
	routed atomic.Bool
	routes map[uint32]*Client // partition → its leader's connection, when not the home one
	pool   map[string]*Client // the connections the producer opened to leaders, by address
	epochs map[*Client]uint32 // the epoch each pool connection announced
	moves  map[uint32]string  // partitions answered not_leader → the leader named ("": unknown)
	// redirected: a record was answered not_leader or no_leader since the
	// last pass; unsure: one of those answers brought no news (no_leader,
	// or not_leader naming no leader, the member that answered, or one
	// that cannot be reached). backoff grows with each unsure pass and is
	// reset by an ack: the first resend after a redirect goes at once (a
	// planned move), the following unsure ones wait longer and longer (an
	// election, a leader that cannot be reached). A pass that only moves
	// partitions to newly named, reachable leaders waits at most
	// redirectBackoffMin: the leader is known, and a long wait would spend
	// its term.
	redirected bool
	unsure     bool
	backoff    time.Duration
}

// connFor returns the connection a record goes to: its partition's
// leader's, else the home connection.
func (p *Producer) connFor(r *Record) *Client {
	home := p.conn.Load()
	if !p.idem.route.routed.Load() {
		return home
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	partition, ok := stampedPartition(p.target, r.Key, p.idem.partitions)
	if !ok || !p.idem.on.Load() {
		return home
	}
	return p.routeLocked(partition)
}

// routeLocked returns the connection of partition's records.
func (p *Producer) routeLocked(partition uint32) *Client {
	if c := p.idem.route.routes[partition]; c != nil {
		return c
	}
	return p.conn.Load()
}

// epochLocked returns the epoch announced on c.
func (p *Producer) epochLocked(c *Client) uint32 {
	if epoch, ok := p.idem.route.epochs[c]; ok && c != p.conn.Load() {
		return epoch
	}
	return p.idem.epoch
}

// redirectedLocked records a not_leader or no_leader answer to a kept
// record (not stored: it is resent as it is) and asks the resync to
// move its partition or wait out the election.
func (p *Producer) redirectedLocked(k *keptRecord, leaderAnswer bool, leader string, retryAfter time.Duration) {
	rt := &p.idem.route
	k.state, rt.redirected = keptLost, true
	// A member refuses before it appends anything. Should a leader that
	// steps down answer a record it had appended (which its successor
	// may commit), the resend still keeps the sequence, so the leader
	// answers that copy as a duplicate; marked uncertain, the record is
	// never renumbered nor reported unstored.
	k.uncertain = k.uncertain || leaderAnswer
	p.idem.retryAfter = max(p.idem.retryAfter, retryAfter)
	if !leaderAnswer || leader == "" || leader == p.routeLocked(k.partition).addr {
		rt.unsure = true
	}
	if leaderAnswer {
		if rt.moves == nil {
			rt.moves = map[uint32]string{}
		}
		rt.moves[k.partition] = leader
	}
	p.requestResyncLocked(resyncRepair)
}

// reroute applies the moves asked since the last pass, after the drain:
// failed connections lose their partitions (back to the home
// connection), and each moved partition gets the connection to its
// leader. It reports whether any route changed, which calls for a new
// announcement on every connection.
func (p *Producer) reroute() bool {
	home := p.conn.Load()
	rt := &p.idem.route
	p.mu.Lock()
	moves := rt.moves
	rt.moves = nil
	redirected := rt.redirected
	rt.redirected = false
	changed := false
	for partition, c := range rt.routes {
		if c.Err() != nil {
			delete(rt.routes, partition)
			changed = true
		}
	}
	var failed []*Client
	for addr, c := range rt.pool {
		if c.Err() != nil {
			delete(rt.pool, addr)
			delete(rt.epochs, c)
			failed = append(failed, c)
		}
	}
	p.mu.Unlock()
	for _, c := range failed {
		c.Close()
	}
	for partition, addr := range moves {
		if addr == "" {
			addr = home.leaderFromClusterInfo(context.Background(), streamPartition{stream: p.stream, partition: partition})
		}
		if addr == "" && p.origin.router != nil {
			addr = p.origin.router.nextSeedAfter(p.routeOf(partition).addr)
		}
		conn := p.poolConn(addr)
		p.mu.Lock()
		if conn == nil {
			rt.unsure = true
		}
		if conn == home || conn == nil {
			delete(rt.routes, partition)
		} else {
			if rt.routes == nil {
				rt.routes = map[uint32]*Client{}
			}
			rt.routes[partition] = conn
		}
		p.mu.Unlock()
		changed = true
	}
	p.mu.Lock()
	rt.routed.Store(len(rt.routes) > 0)
	switch {
	case redirected && rt.unsure:
		p.idem.retryAfter = max(p.idem.retryAfter, rt.backoff)
		rt.backoff = min(max(2*rt.backoff, redirectBackoffMin), redirectBackoffMax)
	case redirected && rt.backoff > 0:
		// Moved to a newly named leader after earlier unsure passes:
		// members that disagree could bounce the records between them,
		// so a short pause, never the grown backoff.
		p.idem.retryAfter = max(p.idem.retryAfter, redirectBackoffMin)
	}
	rt.unsure = false
	p.mu.Unlock()
	return changed
}

func (p *Producer) routeOf(partition uint32) *Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.routeLocked(partition)
}

// poolConn returns the producer's connection to addr, dialling it when
// it has none; nil when addr cannot be reached (the partition then goes
// to the home connection, which names the leader again).
func (p *Producer) poolConn(addr string) *Client {
	home := p.conn.Load()
	if addr == "" || addr == home.addr {
		return home
	}
	p.mu.Lock()
	c := p.idem.route.pool[addr]
	p.mu.Unlock()
	if c != nil {
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(p.opts.ReconnectTimeout, p.origin.opts.DialTimeout))
	defer cancel()
	c, err := dialOne(ctx, addr, p.origin.opts)
	if err != nil {
		return nil
	}
	if !c.producersServed() {
		c.Close()
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idem.route.pool == nil {
		p.idem.route.pool = map[string]*Client{}
	}
	p.idem.route.pool[addr] = c
	return c
}

// connsLocked lists the connections the producer sends on: home first.
func (p *Producer) connsLocked() []*Client {
	conns := []*Client{p.conn.Load()}
	for _, c := range p.idem.route.routes {
		known := false
		for _, seen := range conns {
			known = known || seen == c
		}
		if !known {
			conns = append(conns, c)
		}
	}
	return conns
}

// announceAll sends ProducerInit on every connection the producer uses,
// home first: the home answer sets the identity and the positions, the
// others their connection's epoch and the positions of the partitions
// they lead. ok is false when a connection failed meanwhile (a
// reconnect pass is requested).
func (p *Producer) announceAll() (ok bool, err error) {
	p.mu.Lock()
	conns := p.connsLocked()
	p.mu.Unlock()
	for i, c := range conns {
		info, err := p.announceOn(c)
		if errors.Is(err, ErrConnectionLost) {
			// The next pass drops or redials the failed connection and
			// announces again on all: none may carry records under an
			// epoch it did not announce.
			p.requestResync(resyncReinit)
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("ironbus client: announcing producer %q again to %s: %w", p.opts.Name, c.addr, err)
		}
		p.mu.Lock()
		if i == 0 {
			if p.applyIdentityLocked(info) {
				p.failLostLocked(fmt.Errorf("%w: the broker gave producer %q a new id", ErrProducerExpired, p.opts.Name))
			}
		} else {
			if info.ID != p.idem.id {
				p.mu.Unlock()
				return false, fmt.Errorf("%w: producer %q has id %d at %s and %d at %s: the cluster does not share producer ids",
					ErrProducerExpired, p.opts.Name, p.idem.id, conns[0].addr, info.ID, c.addr)
			}
			if p.idem.route.epochs == nil {
				p.idem.route.epochs = map[*Client]uint32{}
			}
			p.idem.route.epochs[c] = info.Epoch
			for _, position := range info.Positions {
				if string(position.Stream) == p.stream {
					p.idem.positions[position.Partition] = max(p.idem.positions[position.Partition], position.NextSequence)
				}
			}
		}
		p.mu.Unlock()
	}
	return true, nil
}

// announceOn sends ProducerInit on c, again after a retryable refusal
// (a member whose cluster is electing a leader answers no_leader), with
// backoff, for up to ReconnectTimeout.
func (p *Producer) announceOn(c *Client) (*wire.ProducerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.ReconnectTimeout)
	defer cancel()
	var wait time.Duration
	for {
		info, err := c.producerInit(ctx, p.opts.Name)
		var werr *wire.Error
		if err == nil || !errors.As(err, &werr) || !werr.Retryable || werr.Closes {
			return info, err
		}
		wait = min(max(2*wait, redirectBackoffMin), redirectBackoffMax)
		if sleepCtx(ctx, max(wait, min(werr.RetryAfter, maxRetryAfter))) != nil {
			return info, err
		}
	}
}

// closeRoutes closes the producer's pool connections.
func (p *Producer) closeRoutes() {
	p.mu.Lock()
	pool := p.idem.route.pool
	p.idem.route.pool, p.idem.route.routes = nil, nil
	p.idem.route.routed.Store(false)
	p.mu.Unlock()
	for _, c := range pool {
		c.Close()
	}
}
