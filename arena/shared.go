package arena

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// SharedPool admits large frames against one byte capacity shared by many
// connections, so that a rare 8 MiB frame does not force every connection
// to reserve 8 MiB (the per-connection worst case). A request waits until
// its bytes are free; waiters are served strictly in arrival order, so a
// large request is never starved by a stream of small ones that would
// each fit.
//
// The bytes of a Lease come from the Go heap, allocated on Acquire. That
// keeps the pool simple (no fragmentation to manage) and stays bounded: at
// most capacity bytes are leased at once, and the heap is governed by
// GOMEMLIMIT, which reclaims released leases. The price is that these
// bytes may serve only synchronous system calls (read, write), where the
// runtime keeps them alive for the call; memory the kernel writes into
// asynchronously belongs in an off-heap Slab.
//
// All methods are safe for concurrent use.
type SharedPool struct {
	name      string
	capacity  int64
	countOnly bool // leases carry no bytes: the memory lives elsewhere

	mu struct {
		sync.Mutex
		leased  int64
		waiters list.List // of *shareWaiter, oldest first
	}
	staleReleases atomic.Int64
}

// shareWaiter is one blocked Acquire. ready is closed, under the pool's
// lock, once its bytes have been counted as leased to it.
type shareWaiter struct {
	bytes int64
	ready chan struct{}
}

// Lease is a grant of bytes from a SharedPool, held until Release. Copies
// share one state, so only the first Release of any copy counts.
type Lease struct {
	state *leaseState
}

// leaseState is shared by the copies of one Lease.
type leaseState struct {
	pool     *SharedPool
	bytes    []byte
	size     int64
	released atomic.Bool
}

// NewSharedPool returns a pool of capacity bytes and registers them with
// budget under name and knob.
func NewSharedPool(budget *Budget, name, knob string, capacity int64) (*SharedPool, error) {
	if budget == nil {
		return nil, fmt.Errorf("%w: shared pool %q has no budget to register with", ErrInvalidArgument, name)
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: shared pool %q needs a positive capacity, got %d", ErrInvalidArgument, name, capacity)
	}
	budget.Register(name, knob, capacity)
	return &SharedPool{name: name, capacity: capacity}, nil
}

// NewAdmission returns a pool whose leases carry no bytes: it bounds memory
// that is allocated elsewhere (records staged for writing, say) with the
// same arrival-order admission, and registers capacity with budget.
func NewAdmission(budget *Budget, name, knob string, capacity int64) (*SharedPool, error) {
	pool, err := NewSharedPool(budget, name, knob, capacity)
	if err != nil {
		return nil, err
	}
	pool.countOnly = true
	return pool, nil
}

// Acquire waits until n bytes are free, then leases them. It returns at
// once with an error wrapping ErrTooLarge when n exceeds the capacity
// (waiting could never help), and with ctx's error, wrapped, when ctx ends
// first; nothing is leased then. A request that fits without overtaking a
// waiter succeeds at once, even if ctx is already done. A zero n leases
// nothing and never waits.
func (pool *SharedPool) Acquire(ctx context.Context, n int) (Lease, error) {
	if err := pool.validate(n); err != nil {
		return Lease{}, err
	}
	if n == 0 {
		return pool.newLease(0), nil
	}
	bytes := int64(n)
	pool.mu.Lock()
	if pool.fitsLocked(bytes) {
		pool.mu.leased += bytes
		pool.mu.Unlock()
		return pool.newLease(n), nil
	}
	waiter := &shareWaiter{bytes: bytes, ready: make(chan struct{})}
	element := pool.mu.waiters.PushBack(waiter)
	pool.mu.Unlock()

	select {
	case <-waiter.ready:
		return pool.newLease(n), nil
	case <-ctx.Done():
	}
	pool.mu.Lock()
	select {
	case <-waiter.ready:
		// Granted while ctx ended: give the bytes back, which also wakes
		// whoever can use them now.
		pool.mu.leased -= bytes
		pool.grantLocked()
	default:
		front := pool.mu.waiters.Front() == element
		pool.mu.waiters.Remove(element)
		if front {
			// We were blocking the queue; those behind may fit now.
			pool.grantLocked()
		}
	}
	pool.mu.Unlock()
	return Lease{}, fmt.Errorf("arena: acquire %s from %q: %w", FormatBytes(bytes), pool.name, ctx.Err())
}

// TryAcquire leases n bytes only if that needs no waiting: they are free
// and nobody is queued ahead (jumping the queue would starve a large
// waiter).
func (pool *SharedPool) TryAcquire(n int) (Lease, bool) {
	if pool.validate(n) != nil {
		return Lease{}, false
	}
	if n == 0 {
		return pool.newLease(0), true
	}
	bytes := int64(n)
	pool.mu.Lock()
	if !pool.fitsLocked(bytes) {
		pool.mu.Unlock()
		return Lease{}, false
	}
	pool.mu.leased += bytes
	pool.mu.Unlock()
	return pool.newLease(n), true
}

// validate rejects requests that no amount of waiting could satisfy.
func (pool *SharedPool) validate(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: acquire %d bytes from %q", ErrInvalidArgument, n, pool.name)
	}
	if int64(n) > pool.capacity {
		return fmt.Errorf("%w: %s requested from %q, which holds %s in all",
			ErrTooLarge, FormatBytes(int64(n)), pool.name, FormatBytes(pool.capacity))
	}
	return nil
}

// fitsLocked reports whether bytes can be leased now without overtaking a
// waiter.
// REQUIRES: pool.mu held.
func (pool *SharedPool) fitsLocked(bytes int64) bool {
	return pool.mu.waiters.Len() == 0 && pool.capacity-pool.mu.leased >= bytes
}

// grantLocked serves waiters in arrival order for as long as the oldest
// one fits. It stops at the first that does not, so later small requests
// wait behind a large one instead of starving it.
// REQUIRES: pool.mu held.
func (pool *SharedPool) grantLocked() {
	for {
		front := pool.mu.waiters.Front()
		if front == nil {
			return
		}
		waiter := front.Value.(*shareWaiter)
		if pool.capacity-pool.mu.leased < waiter.bytes {
			return
		}
		pool.mu.leased += waiter.bytes
		pool.mu.waiters.Remove(front)
		close(waiter.ready)
	}
}

// newLease allocates the bytes of a granted lease (see SharedPool on why
// the heap is acceptable here).
func (pool *SharedPool) newLease(n int) Lease {
	state := &leaseState{pool: pool, size: int64(n)}
	if !pool.countOnly {
		state.bytes = make([]byte, n)
	}
	return Lease{state: state}
}

// Bytes returns exactly the n bytes asked for (nil from an admission
// pool). They are valid until Release; after Release the lease's bytes are
// nil, so a late use fails loudly.
func (lease Lease) Bytes() []byte {
	if lease.state == nil || lease.state.released.Load() {
		return nil
	}
	return lease.state.bytes
}

// Size is the bytes the lease holds (0 for the zero Lease or once
// released).
func (lease Lease) Size() int64 {
	if lease.state == nil || lease.state.released.Load() {
		return 0
	}
	return lease.state.size
}

// Release returns the lease's bytes to the pool and wakes the waiters they
// admit. A second release (of this or any copy), or of the zero Lease, is
// ignored and returns an error wrapping ErrStaleRelease, for the same
// reason as Buffer.Release: counting capacity back twice would let the
// pool exceed its budget.
func (lease Lease) Release() error {
	state := lease.state
	if state == nil {
		return fmt.Errorf("%w: zero Lease", ErrStaleRelease)
	}
	pool := state.pool
	if !state.released.CompareAndSwap(false, true) {
		pool.staleReleases.Add(1)
		return fmt.Errorf("%w: lease of %s from %q was already released",
			ErrStaleRelease, FormatBytes(state.size), pool.name)
	}
	pool.mu.Lock()
	pool.mu.leased -= state.size
	pool.grantLocked()
	pool.mu.Unlock()
	return nil
}

// Capacity returns the pool's capacity in bytes.
func (pool *SharedPool) Capacity() int64 { return pool.capacity }

// InUse returns the bytes leased right now (granted waiters included).
func (pool *SharedPool) InUse() int64 {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.mu.leased
}

// Waiting returns how many Acquire calls are queued.
func (pool *SharedPool) Waiting() int {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.mu.waiters.Len()
}

// Name returns the name the pool registered with its budget.
func (pool *SharedPool) Name() string { return pool.name }

// StaleReleases counts the releases that were ignored because the lease
// was already released.
func (pool *SharedPool) StaleReleases() int64 { return pool.staleReleases.Load() }
