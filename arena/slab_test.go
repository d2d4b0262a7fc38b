package arena_test

import (
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/arena"
)

// newTestSlab builds a slab on a fresh budget and closes it at the end of
// the test (after the test released everything).
func newTestSlab(t testing.TB, bufferSize, count int, offHeap bool) *arena.Slab {
	t.Helper()
	slab, err := arena.NewSlab(arena.NewBudget(), "test buffers", "--test", bufferSize, count, offHeap)
	if err != nil {
		t.Fatalf("NewSlab: %v", err)
	}
	t.Cleanup(func() {
		if err := slab.Close(); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	return slab
}

// placement names a subtest after where its slab lives.
func placement(offHeap bool) string {
	if offHeap {
		return "offheap"
	}
	return "heap"
}

func TestSlabGetReleaseExhaustionReuse(t *testing.T) {
	for _, offHeap := range []bool{false, true} {
		t.Run(placement(offHeap), func(t *testing.T) {
			slab := newTestSlab(t, 4096, 4, offHeap)
			if slab.Capacity() != 4 || slab.BufferSize() != 4096 || slab.InUse() != 0 {
				t.Fatalf("capacity %d, size %d, in use %d", slab.Capacity(), slab.BufferSize(), slab.InUse())
			}
			var held []arena.Buffer
			seen := map[int]bool{}
			for range 4 {
				buffer, ok := slab.Get()
				if !ok {
					t.Fatalf("Get failed with %d of 4 held", len(held))
				}
				bytes := buffer.Bytes()
				if len(bytes) != 4096 || cap(bytes) != 4096 {
					t.Fatalf("Bytes: len %d cap %d, want 4096 and 4096", len(bytes), cap(bytes))
				}
				if seen[buffer.Index()] {
					t.Fatalf("index %d handed out twice", buffer.Index())
				}
				seen[buffer.Index()] = true
				bytes[0], bytes[4095] = byte(buffer.Index()), byte(buffer.Index())
				held = append(held, buffer)
			}
			if _, ok := slab.Get(); ok {
				t.Fatalf("Get succeeded on an exhausted slab")
			}
			if slab.Exhaustions() != 1 || slab.InUse() != 4 {
				t.Errorf("exhaustions %d, in use %d; want 1 and 4", slab.Exhaustions(), slab.InUse())
			}
			for _, buffer := range held {
				if bytes := buffer.Bytes(); bytes[0] != byte(buffer.Index()) || bytes[4095] != byte(buffer.Index()) {
					t.Errorf("buffer %d lost its contents (neighbour overlap?)", buffer.Index())
				}
			}
			released := held[2]
			if err := released.Release(); err != nil {
				t.Fatalf("Release: %v", err)
			}
			again, ok := slab.Get()
			if !ok || again.Index() != released.Index() {
				t.Fatalf("Get after Release = %d, %v; want the released index %d", again.Index(), ok, released.Index())
			}
			held[2] = again
			for _, buffer := range held {
				if err := buffer.Release(); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
			if slab.InUse() != 0 {
				t.Errorf("in use after releasing all: %d", slab.InUse())
			}
		})
	}
}

func TestSlabDoubleReleaseIsIgnoredAndCounted(t *testing.T) {
	slab := newTestSlab(t, 128, 2, false)
	first, _ := slab.Get()
	if err := first.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if first.Bytes() != nil {
		t.Errorf("Bytes of a released buffer is not nil")
	}
	// Someone else now holds the same memory; the stale copy must not free it.
	second, _ := slab.Get()
	if second.Index() != first.Index() {
		t.Fatalf("expected the released buffer to be reused")
	}
	if err := first.Release(); !errors.Is(err, arena.ErrStaleRelease) {
		t.Fatalf("second Release = %v, want ErrStaleRelease", err)
	}
	if slab.StaleReleases() != 1 || slab.InUse() != 1 {
		t.Errorf("stale releases %d, in use %d; want 1 and 1", slab.StaleReleases(), slab.InUse())
	}
	if second.Bytes() == nil {
		t.Errorf("the current holder lost its buffer to a stale release")
	}
	third, _ := slab.Get()
	if third.Index() == second.Index() {
		t.Fatalf("buffer %d handed out twice after a stale release", third.Index())
	}
	var zero arena.Buffer
	if err := zero.Release(); !errors.Is(err, arena.ErrStaleRelease) || zero.Bytes() != nil {
		t.Errorf("zero Buffer: Release = %v, Bytes = %v", err, zero.Bytes())
	}
	for _, buffer := range []arena.Buffer{second, third} {
		if err := buffer.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
}

func TestSlabRegistersWithBudget(t *testing.T) {
	budget := arena.NewBudget()
	page := os.Getpagesize()
	slab, err := arena.NewSlab(budget, "connection read buffers", "--max-connections × 64 KiB", 64<<10, 16, true)
	if err != nil {
		t.Fatal(err)
	}
	defer slab.Close()
	odd, err := arena.NewSlab(budget, "odd buffers", "--odd", 1000, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	defer odd.Close()
	lines := budget.Lines()
	want := []arena.Line{
		{Name: "connection read buffers", Knob: "--max-connections × 64 KiB", Bytes: 1 << 20},
		{Name: "odd buffers", Knob: "--odd", Bytes: int64((3000 + page - 1) / page * page)},
	}
	if len(lines) != 2 || lines[0] != want[0] || lines[1] != want[1] {
		t.Errorf("budget lines = %+v, want %+v (page-rounded)", lines, want)
	}
}

func TestNewSlabRejectsBadSizes(t *testing.T) {
	budget := arena.NewBudget()
	cases := []struct {
		name              string
		budget            *arena.Budget
		bufferSize, count int
	}{
		{"nil budget", nil, 64, 1},
		{"zero size", budget, 0, 1},
		{"negative size", budget, -1, 1},
		{"zero count", budget, 64, 0},
		{"overflow", budget, math.MaxInt, 2},
	}
	if strconv.IntSize == 64 {
		// Only a 64-bit int can hold a count past int32; the value is
		// built at run time so the file still compiles for armv7.
		overInt32 := int64(math.MaxInt32) + 1
		cases = append(cases, struct {
			name              string
			budget            *arena.Budget
			bufferSize, count int
		}{"count over int32", budget, 1, int(overInt32)})
	}
	for _, test := range cases {
		if _, err := arena.NewSlab(test.budget, test.name, "", test.bufferSize, test.count, true); !errors.Is(err, arena.ErrInvalidArgument) {
			t.Errorf("%s: NewSlab = %v, want ErrInvalidArgument", test.name, err)
		}
	}
	if budget.Total() != 0 {
		t.Errorf("rejected slabs registered %d bytes", budget.Total())
	}
}

func TestSlabCloseRefusesWhileHeld(t *testing.T) {
	for _, offHeap := range []bool{false, true} {
		slab, err := arena.NewSlab(arena.NewBudget(), "close test", "", 1<<16, 8, offHeap)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS == "linux" && offHeap && !slab.OffHeap() {
			t.Errorf("off-heap slab is on the heap on linux")
		}
		buffer, _ := slab.Get()
		clear(buffer.Bytes())
		if err := slab.Close(); !errors.Is(err, arena.ErrInUse) {
			t.Fatalf("Close with a held buffer = %v, want ErrInUse", err)
		}
		if buffer.Bytes() == nil {
			t.Fatalf("a refused Close took the buffer away")
		}
		if err := buffer.Release(); err != nil {
			t.Fatal(err)
		}
		if err := slab.Close(); err != nil {
			t.Fatalf("Close after release: %v", err)
		}
		if err := slab.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, ok := slab.Get(); ok {
			t.Errorf("Get succeeded on a closed slab")
		}
		if buffer.Bytes() != nil {
			t.Errorf("a released buffer of a closed slab still has bytes")
		}
	}
}

// Several goroutines share a small slab. Each claims a per-index holder
// slot on Get (a double hand-out fails the claim at once) and fills the
// whole buffer with its id, yields, and checks nobody overwrote it.
func TestSlabConcurrentHoldersNeverShare(t *testing.T) {
	for _, offHeap := range []bool{false, true} {
		t.Run(placement(offHeap), func(t *testing.T) {
			const goroutines, iterations, bufferSize, count = 8, 2000, 256, 4
			slab := newTestSlab(t, bufferSize, count, offHeap)
			var holders [count]atomic.Int32
			var group sync.WaitGroup
			for holder := int32(1); holder <= goroutines; holder++ {
				group.Go(func() { holdAndCheck(t, slab, holders[:], holder, iterations) })
			}
			group.Wait()
			if slab.InUse() != 0 || slab.StaleReleases() != 0 {
				t.Errorf("in use %d, stale releases %d; want 0 and 0", slab.InUse(), slab.StaleReleases())
			}
		})
	}
}

// holdAndCheck is one goroutine of TestSlabConcurrentHoldersNeverShare.
func holdAndCheck(t *testing.T, slab *arena.Slab, holders []atomic.Int32, holder int32, iterations int) {
	for done := 0; done < iterations; {
		buffer, ok := slab.Get()
		if !ok {
			runtime.Gosched() // exhausted: back off, as a reactor would
			continue
		}
		if previous := holders[buffer.Index()].Swap(holder); previous != 0 {
			t.Errorf("buffer %d handed to %d while %d held it", buffer.Index(), holder, previous)
			return
		}
		bytes := buffer.Bytes()
		for position := range bytes {
			bytes[position] = byte(holder)
		}
		runtime.Gosched()
		for position, value := range bytes {
			if value != byte(holder) {
				t.Errorf("holder %d: byte %d of buffer %d is %d", holder, position, buffer.Index(), value)
				return
			}
		}
		holders[buffer.Index()].Store(0)
		if err := buffer.Release(); err != nil {
			t.Errorf("Release: %v", err)
			return
		}
		done++
	}
}

func BenchmarkSlabGetRelease(b *testing.B) {
	slab := newTestSlab(b, 64<<10, 64, true)
	b.ReportAllocs()
	for b.Loop() {
		buffer, ok := slab.Get()
		if !ok {
			b.Fatal("exhausted")
		}
		_ = buffer.Release()
	}
}

func BenchmarkSlabGetReleaseParallel(b *testing.B) {
	slab := newTestSlab(b, 64<<10, 1024, true)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buffer, ok := slab.Get()
			if !ok {
				b.Error("exhausted")
				return
			}
			_ = buffer.Release()
		}
	})
}

// The hot path must not allocate: a reactor calls it for every read.
func TestSlabGetReleaseDoesNotAllocate(t *testing.T) {
	slab := newTestSlab(t, 4096, 4, true)
	allocations := testing.AllocsPerRun(1000, func() {
		buffer, _ := slab.Get()
		buffer.Bytes()[0] = 1
		_ = buffer.Release()
	})
	if allocations != 0 {
		t.Errorf("Get+Bytes+Release allocates %.1f times per call", allocations)
	}
}

func TestLazySlabMapsOnFirstGetAndReuses(t *testing.T) {
	budget := arena.NewBudget()
	slab, err := arena.NewLazySlab(budget, "staging", "--staging", 8192, 3)
	if err != nil {
		t.Fatalf("NewLazySlab: %v", err)
	}
	if budget.Total() != 3*8192 {
		t.Errorf("budget %d, want the worst case %d", budget.Total(), 3*8192)
	}
	first, ok := slab.Get()
	if !ok {
		t.Fatal("Get failed on an empty lazy slab")
	}
	bytes := first.Bytes()
	if len(bytes) != 8192 || cap(bytes) != 8192 {
		t.Fatalf("Bytes: len %d cap %d, want 8192", len(bytes), cap(bytes))
	}
	bytes[0], bytes[8191] = 7, 9
	if err := first.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if first.Bytes() != nil {
		t.Error("a released buffer still shows its bytes")
	}
	again, ok := slab.Get()
	if !ok || again.Index() != first.Index() {
		t.Fatalf("Get after release: ok %v index %d, want the warm buffer %d", ok, again.Index(), first.Index())
	}
	if got := again.Bytes(); got[0] != 7 || got[8191] != 9 {
		t.Error("the reused buffer is not the one mapped first")
	}
	var held []arena.Buffer
	for range 2 {
		buffer, ok := slab.Get()
		if !ok {
			t.Fatal("Get failed before the slab was exhausted")
		}
		held = append(held, buffer)
	}
	if _, ok := slab.Get(); ok || slab.Exhaustions() != 1 {
		t.Fatalf("Get past the count: ok %v, exhaustions %d", ok, slab.Exhaustions())
	}
	if err := slab.Close(); !errors.Is(err, arena.ErrInUse) {
		t.Fatalf("Close with buffers held: %v, want ErrInUse", err)
	}
	for _, buffer := range append(held, again) {
		if err := buffer.Release(); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if err := slab.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if slab.MapFailures() != 0 {
		t.Errorf("map failures %d", slab.MapFailures())
	}
}

func TestLazySlabConcurrentGetRelease(t *testing.T) {
	slab, err := arena.NewLazySlab(arena.NewBudget(), "staging", "--staging", 4096, 4)
	if err != nil {
		t.Fatalf("NewLazySlab: %v", err)
	}
	var wg sync.WaitGroup
	for worker := range 8 {
		wg.Go(func() {
			for range 500 {
				buffer, ok := slab.Get()
				if !ok {
					continue
				}
				bytes := buffer.Bytes()
				bytes[0] = byte(worker)
				if bytes[0] != byte(worker) {
					t.Errorf("buffer %d shared between holders", buffer.Index())
				}
				if err := buffer.Release(); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if err := slab.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
