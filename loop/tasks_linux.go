package loop

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ironbus/ironbus/ring"
)

// taskKind is what another goroutine asks a reactor to do.
type taskKind uint8

const (
	taskAdd         taskKind = iota // a new connection: open its session, watch it
	taskFlush                       // output was queued
	taskResume                      // the session resumed reading
	taskStopReading                 // the server drains
	taskClose                       // the session closed the connection
	taskMemory                      // a wait for the large-frame pool ended (err says how)
	taskListen                      // Serve began: start accepting (io_uring reactor)
)

// taskRingCapacity is how many tasks a reactor's ring holds between two
// passes before posts spill to the overflow list: far more than a pass
// sees (a flush per connection with replies, a few adds and resumes).
const taskRingCapacity = 1024

// taskQueue carries tasks from other goroutines to one reactor and wakes
// the reactor through an eventfd. The woken flag makes any number of posts
// between two passes of the loop cost one eventfd write: the loop clears it
// (rearm) when it consumes the wake-up, before it takes the tasks.
//
// Tasks travel on a bounded MPSC ring (a compare-and-swap per post, no
// lock). A task must never be refused (a lost flush strands a reply), so
// when the ring is full posts spill to a locked list, and keep spilling
// until the reactor has taken the list: a poster's tasks stay in the order
// it posted them.
type taskQueue[T any] struct {
	wakefd      int
	woken       atomic.Bool
	ring        *ring.MPSC[T]
	overflowing atomic.Bool // posts go to overflow until the reactor takes it

	mu       sync.Mutex
	overflow []T
	closed   bool // set under mu before wakefd closes: no late wake writes to a reused descriptor
}

// post queues a task and wakes the reactor. Safe from any goroutine.
func (q *taskQueue[T]) post(t T) {
	if q.overflowing.Load() || !q.ring.TryPush(t) {
		q.mu.Lock()
		q.overflow = append(q.overflow, t)
		q.overflowing.Store(true)
		q.mu.Unlock()
	}
	q.wake()
}

// wake makes the reactor's next wait return, unless a wake-up is pending.
func (q *taskQueue[T]) wake() {
	if !q.woken.CompareAndSwap(false, true) {
		return
	}
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	q.mu.Lock()
	if !q.closed {
		_, _ = unix.Write(q.wakefd, one[:])
	}
	q.mu.Unlock()
}

// consumeWake drains the eventfd, then rearms. The other order loses
// wake-ups for good: a post between the rearm and the read sets the flag
// and writes, the read swallows that write, and the flag stays set, so no
// later post writes again and the loop only wakes on its 100 ms sweep
// (seen as 100 ms acks under load). Tasks posted while the flag was still
// set are taken by the take that follows. Reactor only, when the eventfd
// polled readable.
func (q *taskQueue[T]) consumeWake() {
	var count [8]byte
	_, _ = unix.Read(q.wakefd, count[:])
	q.rearm()
}

// rearm says the reactor consumed the wake-up: a post after this wakes it
// again. Reactor only, and only after the eventfd was drained (read, or a
// READ completed), never before: see reactor.dispatch.
func (q *taskQueue[T]) rearm() { q.woken.Store(false) }

// take returns the tasks posted so far, the ring's first and then the
// overflow's, reusing spare (the slice the previous take returned, cleared).
// Reactor only.
func (q *taskQueue[T]) take(spare []T) []T {
	clear(spare)
	tasks := spare[:0]
	for {
		if len(tasks) == cap(tasks) {
			tasks = slices.Grow(tasks, 64)
		}
		before := len(tasks)
		if tasks = q.ring.PopBatch(tasks); len(tasks) == before {
			break
		}
	}
	// The overflow holds tasks posted after those still in the ring. The
	// ring can hold some the pop could not reach yet (a poster claimed a
	// slot and has not published it: PopBatch stops there), so the
	// overflow waits until the ring is empty; that poster's wake brings the
	// next pass. Meanwhile every post keeps spilling, so nothing overtakes.
	if q.overflowing.Load() && q.ring.Len() == 0 {
		q.mu.Lock()
		tasks = append(tasks, q.overflow...)
		clear(q.overflow)
		q.overflow = q.overflow[:0]
		q.overflowing.Store(false)
		q.mu.Unlock()
	}
	return tasks
}

// idle reports whether no task waits to be taken.
func (q *taskQueue[T]) idle() bool {
	return q.ring.Len() == 0 && !q.overflowing.Load()
}

// close closes the eventfd; later posts are queued but wake nobody.
func (q *taskQueue[T]) close() {
	q.mu.Lock()
	q.closed = true
	_ = unix.Close(q.wakefd)
	q.mu.Unlock()
}
