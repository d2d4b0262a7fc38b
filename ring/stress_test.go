package ring_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/ring"
)

// stressDeadline fails a stress test that stops making progress (a lost
// value would otherwise hang it until the package timeout).
const stressDeadline = 2 * time.Minute

// watchLen calls length from its own goroutine until stop is set, failing
// the test if it ever leaves [0, capacity]: Len is documented as safe from
// any goroutine while both sides run.
func watchLen(t *testing.T, length func() int, capacity int, stop *atomic.Bool, group *sync.WaitGroup) {
	group.Go(func() {
		for !stop.Load() {
			if observed := length(); observed < 0 || observed > capacity {
				t.Errorf("Len = %d outside [0, %d]", observed, capacity)
				return
			}
			runtime.Gosched()
		}
	})
}

// TestSPSCStress passes a million sequence numbers from one producer
// goroutine to one consumer through a small ring, so it runs through
// thousands of full and empty transitions, and checks that they arrive in
// order with none lost or repeated.
func TestSPSCStress(t *testing.T) {
	const count = 1_000_000
	queue := ring.NewSPSC[int](64)
	var stop atomic.Bool
	var group sync.WaitGroup
	defer group.Wait()
	defer stop.Store(true) // releases the producer if the consumer fails
	group.Go(func() {
		for value := 0; value < count; {
			if queue.TryPush(value) {
				value++
			} else if stop.Load() {
				return
			} else {
				runtime.Gosched()
			}
		}
	})
	watchLen(t, queue.Len, queue.Cap(), &stop, &group)

	batch := make([]int, 0, 16)
	deadline := time.Now().Add(stressDeadline)
	for expected, turn := 0, 0; expected < count; turn++ {
		// Alternate the two ways to pop so both see the concurrency.
		batch = batch[:0]
		if turn%2 == 0 {
			batch = queue.PopBatch(batch)
		} else if value, ok := queue.TryPop(); ok {
			batch = append(batch, value)
		}
		if len(batch) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("stalled after %d of %d values", expected, count)
			}
			runtime.Gosched()
		}
		for _, value := range batch {
			if value != expected {
				t.Fatalf("popped %d, want %d", value, expected)
			}
			expected++
		}
	}
	if value, ok := queue.TryPop(); ok {
		t.Fatalf("extra value %d after all %d", value, count)
	}
}

// TestMPSCStress has eight producers push tagged sequence numbers through
// a small ring at once, and checks that each producer's values arrive in
// the order it pushed them, with none lost or repeated.
func TestMPSCStress(t *testing.T) {
	const producers, perProducer = 8, 100_000
	queue := ring.NewMPSC[uint64](64)
	var stop atomic.Bool
	var group sync.WaitGroup
	defer group.Wait()
	defer stop.Store(true)
	for producer := range uint64(producers) {
		group.Go(func() {
			for sequence := uint64(0); sequence < perProducer; {
				if queue.TryPush(producer<<32 | sequence) {
					sequence++
				} else if stop.Load() {
					return
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	watchLen(t, queue.Len, queue.Cap(), &stop, &group)

	var nextSequence [producers]uint64
	batch := make([]uint64, 0, 16)
	deadline := time.Now().Add(stressDeadline)
	for received, turn := 0, 0; received < producers*perProducer; turn++ {
		batch = batch[:0]
		if turn%2 == 0 {
			batch = queue.PopBatch(batch)
		} else if value, ok := queue.TryPop(); ok {
			batch = append(batch, value)
		}
		if len(batch) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("stalled after %d of %d values", received, producers*perProducer)
			}
			runtime.Gosched()
		}
		for _, value := range batch {
			producer, sequence := value>>32, value&(1<<32-1)
			if producer >= producers || sequence != nextSequence[producer] {
				t.Fatalf("popped producer %d sequence %d, want sequence %d",
					producer, sequence, nextSequence[min(producer, producers-1)])
			}
			nextSequence[producer]++
			received++
		}
	}
	if value, ok := queue.TryPop(); ok {
		t.Fatalf("extra value %#x after all %d", value, producers*perProducer)
	}
}
