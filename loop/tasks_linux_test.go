package loop

import (
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ironbus/ironbus/ring"
)

// TestTaskQueueNeverLosesAWake drives a task queue the way a reactor does
// (consume the wake-up only when the eventfd polls readable, then take the
// tasks) against concurrent posters, and checks the state it ends in: a
// set woken flag must have a write behind it. A lost wake-up is
// absorbing (no later post writes while the flag is set), so a violation
// at any point of the run shows at the end, and every task must have been
// taken without the reactor's 100 ms sweep.
func TestTaskQueueNeverLosesAWake(t *testing.T) {
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	queue := &taskQueue[int]{wakefd: wakefd, ring: ring.NewMPSC[int](taskRingCapacity)}
	defer queue.close()
	const posters, perPoster = 4, 20_000
	var stop atomic.Bool
	var group sync.WaitGroup
	for range posters {
		group.Go(func() {
			for i := range perPoster {
				queue.post(i)
			}
		})
	}
	taken := 0
	var spare []int
	reactor := func() {
		poll := []unix.PollFd{{Fd: int32(wakefd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(poll, 1); n > 0 {
			queue.consumeWake()
			spare = queue.take(spare)
			taken += len(spare)
		}
	}
	go func() { group.Wait(); stop.Store(true) }()
	for !stop.Load() {
		reactor()
	}
	// Every post has finished: whatever is queued must be announced.
	for range 10 {
		reactor()
	}
	if taken != posters*perPoster {
		t.Fatalf("%d of %d tasks taken: a wake-up was lost (woken %v)", taken, posters*perPoster, queue.woken.Load())
	}
}

// TestTaskQueueOverflowKeepsOrder: past the ring's capacity posts spill
// to the overflow list, nothing is refused, and each poster's tasks come
// out in the order it posted them, also while the reactor takes between.
func TestTaskQueueOverflowKeepsOrder(t *testing.T) {
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	queue := &taskQueue[[2]int]{wakefd: wakefd, ring: ring.NewMPSC[[2]int](taskRingCapacity)}
	defer queue.close()
	// Alone first: three ringfuls with nobody taking.
	for i := range 3 * taskRingCapacity {
		queue.post([2]int{0, i})
	}
	if !queue.overflowing.Load() {
		t.Fatal("three ringfuls did not spill to the overflow list")
	}
	for i, task := range queue.take(nil) {
		if task != [2]int{0, i} {
			t.Fatalf("task %d came out as %v", i, task)
		}
	}
	const posters, each = 3, 5 * taskRingCapacity
	var group sync.WaitGroup
	for poster := range posters {
		group.Go(func() {
			for i := range each {
				queue.post([2]int{poster, i})
			}
		})
	}
	next := make([]int, posters)
	var spare [][2]int
	check := func() {
		spare = queue.take(spare)
		for _, task := range spare {
			if task[1] != next[task[0]] {
				t.Fatalf("poster %d: task %d came when %d was due", task[0], task[1], next[task[0]])
			}
			next[task[0]]++
		}
	}
	done := make(chan struct{})
	go func() { group.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		check()
	}
	check()
	for poster, got := range next {
		if got != each {
			t.Fatalf("poster %d: %d of %d tasks taken", poster, got, each)
		}
	}
}
