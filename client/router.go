package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Leader following. In a replicated cluster only a partition's leader
// takes its produces, leases and acks; another member answers not_leader,
// naming the leader's client address when it knows it, and a partition
// in an election answers no_leader. The router of a Client sends such a
// request again where it belongs, and remembers where each partition's
// leader was last found, so the next request goes there at once:
//
//   - not_leader with an address: that address, over a connection of the
//     Client's pool (one per address, dialled on first need with the
//     Client's Options and reused; partitions led by different nodes each
//     go to their own leader);
//   - not_leader without one: the leader ClusterInfo names (when the
//     connection has the cluster capability), else the next seed;
//   - no_leader: the same node again, after its retry_after hint or a
//     growing backoff.
//
// A request is sent at most maxRedirects+1 times; then it fails with
// ErrNoLeader wrapping the last answer. A refused request was not
// performed (nothing stored, no lease taken), so sending it again is
// safe. Only the Client the caller dialled routes: its pool connections
// never redirect on their own.

// maxRedirects bounds how often one request is sent elsewhere after a
// not_leader or no_leader answer.
const maxRedirects = 5

// Backoff between the redirects of one request: a leader that moves
// again, or an election, needs time; retry_after hints win when longer.
const (
	redirectBackoffMin = 50 * time.Millisecond
	redirectBackoffMax = time.Second
)

// ErrNoLeader: a request was answered not_leader or no_leader more often
// than the client follows (maxRedirects), or the leader named could not
// be reached. It wraps the last *wire.Error (errors.Is(err,
// &wire.Error{Code: wire.CodeNoLeader})).
var ErrNoLeader = errors.New("ironbus client: no leader reached")

// adminRoute is the routing key of admin requests: the metadata
// leader's, since no stream is named "".
var adminRoute = streamPartition{}

// router holds a Client's seeds, its pool of connections to other
// members and the leader hints.
type router struct {
	origin *Client
	seeds  []string

	mu       sync.Mutex // guards what follows
	closed   bool
	conns    map[string]*Client         // by address; never the origin
	hints    map[streamPartition]string // partition → its leader's client address
	nextSeed int                        // the seed tried after the last one
}

func newRouter(origin *Client, seeds []string) *router {
	return &router{origin: origin, seeds: seeds, conns: map[string]*Client{}, hints: map[streamPartition]string{}}
}

// close closes the pool; the origin is its owner's to close.
func (r *router) close() {
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.conns = map[string]*Client{}
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// routeOf returns the connection a request for key goes to first: its
// leader hint's when that connection is open, else the origin. It never
// dials, so a steady-state request costs a map lookup.
func (c *Client) routeOf(key streamPartition) *Client {
	r := c.router
	if r == nil {
		return c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	addr, ok := r.hints[key]
	if !ok {
		return c
	}
	if conn := r.conns[addr]; conn != nil && conn.Err() == nil {
		return conn
	}
	return c
}

// connTo returns the pool's open connection to addr, dialling it when
// there is none (or the one there failed).
func (r *router) connTo(ctx context.Context, addr string) (*Client, error) {
	if addr == r.origin.addr {
		return r.origin, nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	if conn := r.conns[addr]; conn != nil && conn.Err() == nil {
		r.mu.Unlock()
		return conn, nil
	}
	r.mu.Unlock()
	fresh, err := dialOne(ctx, addr, r.origin.opts)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		fresh.Close()
		return nil, ErrClosed
	}
	stale := r.conns[addr]
	if stale != nil && stale.Err() == nil { // another caller dialled first
		r.mu.Unlock()
		fresh.Close()
		return stale, nil
	}
	r.conns[addr] = fresh
	r.mu.Unlock()
	if stale != nil {
		stale.Close()
	}
	return fresh, nil
}

func (r *router) hint(key streamPartition, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hints[key] = addr
}

func (r *router) forget(key streamPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.hints, key)
}

// nextSeedAfter returns the seed to try after a member that did not know
// the leader: the seeds in turn, skipping the one that answered.
func (r *router) nextSeedAfter(answered string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range r.seeds {
		seed := r.seeds[r.nextSeed%len(r.seeds)]
		r.nextSeed++
		if seed != answered {
			return seed
		}
	}
	return r.origin.addr
}

// redirect is one request's trip to its partition's leader.
type redirect struct {
	hops int
	wait time.Duration
}

// redirectable reports whether err asks for the request to go elsewhere.
// The answer to a request is the *wire.Error itself (never wrapped), and
// this runs on every call: a type assertion, which allocates nothing.
func redirectable(err error) bool {
	werr, ok := err.(*wire.Error)
	return ok && (werr.Code == wire.CodeNotLeader || werr.Code == wire.CodeNoLeader)
}

// follow decides where a request for key, answered by conn with err, is
// sent next. It returns the next connection, or nil and the error the
// request ends with: err itself when it is no redirect, ErrNoLeader when
// the redirects are exhausted, or ctx.Err().
func (c *Client) follow(ctx context.Context, conn *Client, key streamPartition, err error, rd *redirect) (*Client, error) {
	code, werr := wireCode(err)
	r := c.router
	if r == nil || (code != wire.CodeNotLeader && code != wire.CodeNoLeader) {
		return nil, err
	}
	if rd.hops++; rd.hops > maxRedirects {
		return nil, rd.exhausted(key, err)
	}
	r.forget(key)
	var pause time.Duration
	if rd.hops > 1 || code == wire.CodeNoLeader {
		// A second redirect means the leader moved again, or the members
		// disagree: give the cluster a moment.
		rd.wait = min(max(2*rd.wait, redirectBackoffMin), redirectBackoffMax)
		pause = rd.wait
	}
	if code == wire.CodeNoLeader {
		pause = max(pause, min(werr.RetryAfter, maxRetryAfter))
	}
	if err := sleepCtx(ctx, pause); err != nil {
		return nil, err
	}
	addr := ""
	switch {
	case code == wire.CodeNoLeader:
		addr = conn.addr // an election: the same member knows the outcome first
	case werr.Leader != "":
		addr = werr.Leader
	default:
		addr = conn.leaderFromClusterInfo(ctx, key)
	}
	if addr == "" {
		addr = r.nextSeedAfter(conn.addr)
	}
	next, dialErr := r.connTo(ctx, addr)
	if dialErr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(dialErr, ErrClosed) {
			return nil, dialErr
		}
		// The leader named is unreachable (it may have just died): ask
		// a seed next time round.
		if next, dialErr = r.connTo(ctx, r.nextSeedAfter(addr)); dialErr != nil {
			return nil, fmt.Errorf("%w: %s: %w (after %w)", ErrNoLeader, key, dialErr, err)
		}
		return next, nil
	}
	if code == wire.CodeNotLeader {
		r.hint(key, addr)
	}
	return next, nil
}

func (rd *redirect) exhausted(key streamPartition, err error) error {
	return fmt.Errorf("%w: %s answered not_leader or no_leader %d times: %w", ErrNoLeader, key, rd.hops, err)
}

func (k streamPartition) String() string {
	switch {
	case k == adminRoute:
		return "admin request"
	case k.partition == AnyPartition:
		return fmt.Sprintf("stream %q", k.stream)
	}
	return fmt.Sprintf("stream %q partition %d", k.stream, k.partition)
}

// leaderFromClusterInfo asks the member behind c who leads key, and
// returns the leader's client address; "" when it cannot tell.
func (c *Client) leaderFromClusterInfo(ctx context.Context, key streamPartition) string {
	if c.info.Capabilities&wire.CapCluster == 0 {
		return ""
	}
	state, err := c.ClusterInfo(ctx, ClusterInfoOptions{Partitions: key != adminRoute, Stream: key.stream})
	if err != nil {
		return ""
	}
	leader := state.MetaLeader
	if key != adminRoute {
		leader = 0
		for _, p := range state.Partitions {
			if p.Stream == key.stream && p.Partition == key.partition {
				leader = p.Leader
			}
		}
	}
	for _, n := range state.Nodes {
		if leader != 0 && n.ID == leader {
			return n.ClientAddr
		}
	}
	return ""
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
