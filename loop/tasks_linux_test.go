package loop

import (
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
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
	queue := &taskQueue[int]{wakefd: wakefd}
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
