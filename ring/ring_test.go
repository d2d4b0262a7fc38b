package ring_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/ring"
)

// queue is the surface both rings share; the conformance tests below run
// against every implementation through it.
type queue interface {
	TryPush(value int) bool
	TryPop() (int, bool)
	PopBatch(destination []int) []int
	Len() int
	Cap() int
}

var (
	_ queue = (*ring.SPSC[int])(nil)
	_ queue = (*ring.MPSC[int])(nil)
)

// forEachRing runs test once per ring implementation.
func forEachRing(t *testing.T, test func(t *testing.T, newQueue func(capacity int) queue)) {
	implementations := []struct {
		name     string
		newQueue func(capacity int) queue
	}{
		{"SPSC", func(capacity int) queue { return ring.NewSPSC[int](capacity) }},
		{"MPSC", func(capacity int) queue { return ring.NewMPSC[int](capacity) }},
	}
	for _, implementation := range implementations {
		t.Run(implementation.name, func(t *testing.T) { test(t, implementation.newQueue) })
	}
}

func TestCapacityRounding(t *testing.T) {
	cases := []struct{ requested, spsc, mpsc int }{
		{1, 1, 2}, // MPSC needs two slots to tell "published" from "free"
		{2, 2, 2},
		{3, 4, 4},
		{4, 4, 4},
		{5, 8, 8},
		{1000, 1024, 1024},
		{1024, 1024, 1024},
		{1025, 2048, 2048},
	}
	for _, c := range cases {
		if got := ring.NewSPSC[int](c.requested).Cap(); got != c.spsc {
			t.Errorf("NewSPSC(%d).Cap() = %d, want %d", c.requested, got, c.spsc)
		}
		if got := ring.NewMPSC[int](c.requested).Cap(); got != c.mpsc {
			t.Errorf("NewMPSC(%d).Cap() = %d, want %d", c.requested, got, c.mpsc)
		}
	}
}

func TestCapacityOutOfRangePanics(t *testing.T) {
	forEachRing(t, func(t *testing.T, newQueue func(int) queue) {
		for _, capacity := range []int{0, -1, 1<<30 + 1} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("capacity %d: no panic", capacity)
					}
				}()
				newQueue(capacity)
			}()
		}
	})
}

func TestFIFOFullAndEmpty(t *testing.T) {
	forEachRing(t, func(t *testing.T, newQueue func(int) queue) {
		for _, requested := range []int{1, 2, 3, 8} {
			ring := newQueue(requested)
			if value, ok := ring.TryPop(); ok || value != 0 || ring.Len() != 0 {
				t.Fatalf("cap %d: empty ring popped (%d, %v), Len %d", ring.Cap(), value, ok, ring.Len())
			}
			for value := range ring.Cap() {
				if !ring.TryPush(value) {
					t.Fatalf("cap %d: push %d refused before full", ring.Cap(), value)
				}
			}
			if ring.TryPush(-1) || ring.Len() != ring.Cap() {
				t.Fatalf("cap %d: full ring accepted a push or Len %d", ring.Cap(), ring.Len())
			}
			// One pop frees exactly one slot.
			if value, ok := ring.TryPop(); !ok || value != 0 {
				t.Fatalf("cap %d: first pop (%d, %v), want (0, true)", ring.Cap(), value, ok)
			}
			if !ring.TryPush(ring.Cap()) || ring.TryPush(-1) {
				t.Fatalf("cap %d: after one pop, want exactly one more push", ring.Cap())
			}
			for want := 1; want <= ring.Cap(); want++ {
				if value, ok := ring.TryPop(); !ok || value != want {
					t.Fatalf("cap %d: pop (%d, %v), want (%d, true)", ring.Cap(), value, ok, want)
				}
			}
			if _, ok := ring.TryPop(); ok || ring.Len() != 0 {
				t.Fatalf("cap %d: drained ring popped or Len %d", ring.Cap(), ring.Len())
			}
		}
	})
}

// TestWraparound runs the positions through tens of thousands of laps of a
// small ring, in bursts of every length from 1 to the capacity, popping
// alternately one by one and in batches.
func TestWraparound(t *testing.T) {
	forEachRing(t, func(t *testing.T, newQueue func(int) queue) {
		ring := newQueue(4)
		batch := make([]int, 0, ring.Cap())
		next, expected := 0, 0
		for burst := range 40_000 {
			length := burst%ring.Cap() + 1
			for range length {
				if !ring.TryPush(next) {
					t.Fatalf("burst %d: push %d refused", burst, next)
				}
				next++
			}
			if burst%2 == 0 {
				batch = ring.PopBatch(batch[:0])
			} else {
				batch = batch[:0]
				for value, ok := ring.TryPop(); ok; value, ok = ring.TryPop() {
					batch = append(batch, value)
				}
			}
			for _, value := range batch {
				if value != expected {
					t.Fatalf("burst %d: popped %d, want %d", burst, value, expected)
				}
				expected++
			}
			if expected != next {
				t.Fatalf("burst %d: popped up to %d, pushed up to %d", burst, expected, next)
			}
		}
	})
}

func TestPopBatch(t *testing.T) {
	forEachRing(t, func(t *testing.T, newQueue func(int) queue) {
		ring := newQueue(8)
		for value := range 8 {
			ring.TryPush(value)
		}
		for range 3 {
			ring.TryPop()
		}
		for value := 8; value < 11; value++ {
			ring.TryPush(value) // these wrap to the start of the slot array
		}
		// Appends after the existing prefix, up to the spare capacity.
		got := ring.PopBatch(append(make([]int, 0, 5), -1))
		if want := []int{-1, 3, 4, 5, 6}; !slices.Equal(got, want) {
			t.Fatalf("PopBatch = %v, want %v", got, want)
		}
		// A destination with no spare capacity pops nothing.
		if got := ring.PopBatch(make([]int, 2)); len(got) != 2 || ring.Len() != 4 {
			t.Fatalf("full destination: got %v, Len %d", got, ring.Len())
		}
		// More room than values: everything, across the wrap.
		if got, want := ring.PopBatch(make([]int, 0, 100)), []int{7, 8, 9, 10}; !slices.Equal(got, want) {
			t.Fatalf("PopBatch = %v, want %v", got, want)
		}
		if got := ring.PopBatch(make([]int, 0, 4)); len(got) != 0 {
			t.Fatalf("PopBatch on empty ring = %v", got)
		}
	})
}

// TestNoAllocations checks the invariant that a ring allocates only at
// construction.
func TestNoAllocations(t *testing.T) {
	forEachRing(t, func(t *testing.T, newQueue func(int) queue) {
		ring := newQueue(16)
		batch := make([]int, 0, 8)
		allocations := testing.AllocsPerRun(1000, func() {
			for value := range 12 {
				ring.TryPush(value)
			}
			ring.TryPop()
			batch = ring.PopBatch(batch[:0])
			ring.TryPop()
			ring.PopBatch(batch[:0])
			_ = ring.Len() + ring.Cap()
		})
		if allocations != 0 {
			t.Fatalf("%v allocations per run, want 0", allocations)
		}
	})
}

// TestMatchesSliceModel drives each ring with a seeded random mix of
// operations and checks every result against a plain slice.
func TestMatchesSliceModel(t *testing.T) {
	const seed = 20260611
	forEachRing(t, func(t *testing.T, newQueue func(int) queue) {
		random := rand.New(rand.NewPCG(seed, seed))
		for _, requested := range []int{1, 2, 3, 7, 16} {
			ring := newQueue(requested)
			var model []int
			next := 0
			for step := range 20_000 {
				where := func() string { return describeStep(seed, requested, step) }
				switch choice := random.IntN(100); {
				case choice < 45:
					accepted := ring.TryPush(next)
					if accepted != (len(model) < ring.Cap()) {
						t.Fatalf("%s: TryPush = %v with %d of %d queued", where(), accepted, len(model), ring.Cap())
					}
					if accepted {
						model = append(model, next)
					}
					next++
				case choice < 80:
					value, ok := ring.TryPop()
					if ok != (len(model) > 0) || (ok && value != model[0]) {
						t.Fatalf("%s: TryPop = (%d, %v), model %v", where(), value, ok, model)
					}
					if ok {
						model = model[1:]
					}
				default:
					prefix := random.IntN(3)
					destination := make([]int, prefix, prefix+random.IntN(ring.Cap()+3))
					got := ring.PopBatch(destination)
					count := min(len(model), cap(destination)-prefix)
					if !slices.Equal(got[prefix:], model[:count]) || len(got) != prefix+count {
						t.Fatalf("%s: PopBatch = %v, want %v after %d zeros", where(), got, model[:count], prefix)
					}
					model = model[count:]
				}
				if ring.Len() != len(model) {
					t.Fatalf("%s: Len = %d, model has %d", where(), ring.Len(), len(model))
				}
			}
		}
	})
}

func describeStep(seed uint64, capacity, step int) string {
	return fmt.Sprintf("seed %d, capacity %d, step %d", seed, capacity, step)
}
