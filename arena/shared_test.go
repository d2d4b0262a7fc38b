package arena_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/arena"
)

func newTestPool(t *testing.T, capacity int64) *arena.SharedPool {
	t.Helper()
	pool, err := arena.NewSharedPool(arena.NewBudget(), "large frames", "--large-frame-pool", capacity)
	if err != nil {
		t.Fatalf("NewSharedPool: %v", err)
	}
	return pool
}

// waitUntil polls condition for up to five seconds: a goroutine reaching a
// blocked Acquire has no other observable event.
func waitUntil(t *testing.T, what string, condition func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !condition(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// acquireAsync starts Acquire in a goroutine and returns where its result
// arrives.
func acquireAsync(ctx context.Context, pool *arena.SharedPool, n int) <-chan acquired {
	result := make(chan acquired, 1)
	go func() {
		lease, err := pool.Acquire(ctx, n)
		result <- acquired{lease, err}
	}()
	return result
}

type acquired struct {
	lease arena.Lease
	err   error
}

// receive waits for an async Acquire to finish successfully.
func receive(t *testing.T, result <-chan acquired, what string) arena.Lease {
	t.Helper()
	select {
	case got := <-result:
		if got.err != nil {
			t.Fatalf("%s: Acquire: %v", what, got.err)
		}
		return got.lease
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Acquire still blocked", what)
		return arena.Lease{}
	}
}

// assertBlocked checks that an async Acquire has not finished.
func assertBlocked(t *testing.T, result <-chan acquired, what string) {
	t.Helper()
	select {
	case got := <-result:
		t.Fatalf("%s: Acquire returned (err %v) but should still wait", what, got.err)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestSharedPoolRegistersAndValidates(t *testing.T) {
	budget := arena.NewBudget()
	if _, err := arena.NewSharedPool(budget, "large frames", "--large-frame-pool", 8<<20); err != nil {
		t.Fatal(err)
	}
	lines := budget.Lines()
	if len(lines) != 1 || lines[0] != (arena.Line{Name: "large frames", Knob: "--large-frame-pool", Bytes: 8 << 20}) {
		t.Errorf("budget lines = %+v", lines)
	}
	if _, err := arena.NewSharedPool(nil, "x", "", 1); !errors.Is(err, arena.ErrInvalidArgument) {
		t.Errorf("nil budget: %v", err)
	}
	if _, err := arena.NewSharedPool(budget, "x", "", 0); !errors.Is(err, arena.ErrInvalidArgument) {
		t.Errorf("zero capacity: %v", err)
	}
}

func TestSharedPoolTryAcquireAndRelease(t *testing.T) {
	pool := newTestPool(t, 100)
	first, ok := pool.TryAcquire(60)
	if !ok || len(first.Bytes()) != 60 || pool.InUse() != 60 {
		t.Fatalf("TryAcquire(60): ok %v, %d bytes, in use %d", ok, len(first.Bytes()), pool.InUse())
	}
	if _, ok := pool.TryAcquire(50); ok {
		t.Fatalf("TryAcquire(50) succeeded with 40 free")
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if first.Bytes() != nil {
		t.Errorf("Bytes of a released lease is not nil")
	}
	if err := first.Release(); !errors.Is(err, arena.ErrStaleRelease) {
		t.Errorf("second Release = %v, want ErrStaleRelease", err)
	}
	if pool.InUse() != 0 || pool.StaleReleases() != 1 {
		t.Errorf("in use %d, stale releases %d; want 0 and 1", pool.InUse(), pool.StaleReleases())
	}
	empty, ok := pool.TryAcquire(0)
	if !ok || len(empty.Bytes()) != 0 || empty.Release() != nil {
		t.Errorf("zero-byte lease: ok %v", ok)
	}
	var zero arena.Lease
	if err := zero.Release(); !errors.Is(err, arena.ErrStaleRelease) {
		t.Errorf("zero Lease Release = %v", err)
	}
}

func TestSharedPoolTooLarge(t *testing.T) {
	pool := newTestPool(t, 100)
	if _, err := pool.Acquire(context.Background(), 101); !errors.Is(err, arena.ErrTooLarge) {
		t.Errorf("Acquire(101) = %v, want ErrTooLarge", err)
	}
	if _, ok := pool.TryAcquire(101); ok {
		t.Errorf("TryAcquire(101) succeeded")
	}
	if _, err := pool.Acquire(context.Background(), -1); !errors.Is(err, arena.ErrInvalidArgument) {
		t.Errorf("Acquire(-1) = %v, want ErrInvalidArgument", err)
	}
	if pool.InUse() != 0 || pool.Waiting() != 0 {
		t.Errorf("rejected requests changed the pool: in use %d, waiting %d", pool.InUse(), pool.Waiting())
	}
}

func TestSharedPoolAcquireBlocksUntilReleased(t *testing.T) {
	pool := newTestPool(t, 100)
	first, err := pool.Acquire(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	result := acquireAsync(context.Background(), pool, 60)
	waitUntil(t, "the second Acquire queues", func() bool { return pool.Waiting() == 1 })
	assertBlocked(t, result, "second")
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	second := receive(t, result, "second")
	if len(second.Bytes()) != 60 || pool.InUse() != 60 {
		t.Errorf("second lease: %d bytes, in use %d", len(second.Bytes()), pool.InUse())
	}
	_ = second.Release()
}

func TestSharedPoolAcquireCancelled(t *testing.T) {
	pool := newTestPool(t, 100)
	held, _ := pool.TryAcquire(60)
	ctx, cancel := context.WithCancel(context.Background())
	result := acquireAsync(ctx, pool, 60)
	waitUntil(t, "Acquire queues", func() bool { return pool.Waiting() == 1 })
	cancel()
	got := <-result
	if !errors.Is(got.err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v, want context.Canceled", got.err)
	}
	if pool.Waiting() != 0 || pool.InUse() != 60 {
		t.Errorf("after cancel: waiting %d, in use %d; want 0 and 60", pool.Waiting(), pool.InUse())
	}
	timeout, cancelTimeout := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelTimeout()
	if _, err := pool.Acquire(timeout, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire past its deadline = %v, want DeadlineExceeded", err)
	}
	_ = held.Release()
	if pool.InUse() != 0 {
		t.Errorf("in use %d after releasing everything", pool.InUse())
	}
}

// A large waiter at the head blocks later small ones; when it gives up,
// the small ones behind it must be served at once.
func TestSharedPoolCancelledHeadUnblocksQueue(t *testing.T) {
	pool := newTestPool(t, 100)
	held, _ := pool.TryAcquire(60)
	ctx, cancel := context.WithCancel(context.Background())
	large := acquireAsync(ctx, pool, 100)
	waitUntil(t, "the large Acquire queues", func() bool { return pool.Waiting() == 1 })
	small := acquireAsync(context.Background(), pool, 30)
	waitUntil(t, "the small Acquire queues", func() bool { return pool.Waiting() == 2 })
	assertBlocked(t, small, "small behind large")
	cancel()
	if got := <-large; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("large Acquire = %v, want context.Canceled", got.err)
	}
	lease := receive(t, small, "small after the head gave up")
	_ = lease.Release()
	_ = held.Release()
}

// FIFO: a large waiter is served before small requests that arrived after
// it, even though each small one would fit right away.
func TestSharedPoolFIFOFairness(t *testing.T) {
	pool := newTestPool(t, 100)
	held, _ := pool.TryAcquire(90)
	large := acquireAsync(context.Background(), pool, 100)
	waitUntil(t, "the large Acquire queues", func() bool { return pool.Waiting() == 1 })
	small := acquireAsync(context.Background(), pool, 5)
	waitUntil(t, "the small Acquire queues", func() bool { return pool.Waiting() == 2 })
	if _, ok := pool.TryAcquire(5); ok {
		t.Fatalf("TryAcquire(5) jumped the queue ahead of the large waiter")
	}
	assertBlocked(t, small, "small (10 bytes free, but a large waiter is first)")

	_ = held.Release()
	largeLease := receive(t, large, "large")
	if len(largeLease.Bytes()) != 100 {
		t.Fatalf("large lease has %d bytes", len(largeLease.Bytes()))
	}
	assertBlocked(t, small, "small while the large lease holds everything")
	_ = largeLease.Release()
	smallLease := receive(t, small, "small")
	_ = smallLease.Release()
	if pool.InUse() != 0 || pool.Waiting() != 0 {
		t.Errorf("in use %d, waiting %d at the end", pool.InUse(), pool.Waiting())
	}
}

// Many goroutines lease random sizes; the bytes they hold together never
// exceed the capacity and everything is returned.
func TestSharedPoolConcurrentNeverExceedsCapacity(t *testing.T) {
	const capacity = 1 << 16
	pool := newTestPool(t, capacity)
	var held atomic.Int64
	var group sync.WaitGroup
	for worker := range 8 {
		group.Go(func() {
			random := rand.New(rand.NewPCG(uint64(worker), 1))
			for range 300 {
				n := 1 + random.IntN(capacity)
				lease, err := pool.Acquire(context.Background(), n)
				if err != nil {
					t.Errorf("Acquire(%d): %v", n, err)
					return
				}
				if total := held.Add(int64(n)); total > capacity {
					t.Errorf("%d bytes leased at once, capacity %d", total, capacity)
				}
				lease.Bytes()[n-1] = 1
				held.Add(-int64(n))
				_ = lease.Release()
			}
		})
	}
	group.Wait()
	if pool.InUse() != 0 || pool.Waiting() != 0 {
		t.Errorf("in use %d, waiting %d at the end", pool.InUse(), pool.Waiting())
	}
}

// Waiters whose contexts end at random moments, some just as their bytes
// are granted, must neither leak capacity nor strand the waiters behind
// them.
func TestSharedPoolCancellationRaceLeaksNothing(t *testing.T) {
	const capacity = 1 << 12
	pool := newTestPool(t, capacity)
	var group sync.WaitGroup
	for worker := range 8 {
		group.Go(func() {
			random := rand.New(rand.NewPCG(uint64(worker), 2))
			for range 300 {
				timeout := time.Duration(random.IntN(50)) * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				lease, err := pool.Acquire(ctx, 1+random.IntN(capacity))
				cancel()
				if err == nil {
					_ = lease.Release()
				} else if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Acquire: %v", err)
					return
				}
			}
		})
	}
	group.Wait()
	if pool.InUse() != 0 || pool.Waiting() != 0 {
		t.Errorf("in use %d, waiting %d at the end", pool.InUse(), pool.Waiting())
	}
	if lease, ok := pool.TryAcquire(capacity); !ok {
		t.Errorf("the whole capacity is not available at the end")
	} else {
		_ = lease.Release()
	}
}

func BenchmarkSharedPoolTryAcquireRelease64KiB(b *testing.B) {
	pool, err := arena.NewSharedPool(arena.NewBudget(), "large frames", "", 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		lease, ok := pool.TryAcquire(64 << 10)
		if !ok {
			b.Fatal("pool exhausted")
		}
		_ = lease.Release()
	}
}

func TestAdmissionCountsWithoutBytes(t *testing.T) {
	budget := arena.NewBudget()
	pool, err := arena.NewAdmission(budget, "large records", "--large-frame-pool", 100)
	if err != nil {
		t.Fatal(err)
	}
	lease, ok := pool.TryAcquire(60)
	if !ok || lease.Bytes() != nil || pool.InUse() != 60 {
		t.Fatalf("admission lease: ok %v, bytes %v, in use %d", ok, lease.Bytes() != nil, pool.InUse())
	}
	if _, ok := pool.TryAcquire(50); ok {
		t.Fatal("admitted past the capacity")
	}
	if err := lease.Release(); err != nil || pool.InUse() != 0 {
		t.Fatalf("release: %v, in use %d", err, pool.InUse())
	}
	if budget.Total() != 100 {
		t.Fatalf("budget %d, want the capacity", budget.Total())
	}
}
