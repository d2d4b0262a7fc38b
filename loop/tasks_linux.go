package loop

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
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

// taskQueue carries tasks from other goroutines to one reactor and wakes
// the reactor through an eventfd. The woken flag makes any number of posts
// between two passes of the loop cost one eventfd write: the loop clears it
// (rearm) when it consumes the wake-up, before it takes the tasks.
type taskQueue[T any] struct {
	wakefd int
	woken  atomic.Bool

	mu     sync.Mutex
	tasks  []T
	closed bool // set under mu before wakefd closes: no late wake writes to a reused descriptor
}

// post queues a task and wakes the reactor. Safe from any goroutine.
func (q *taskQueue[T]) post(t T) {
	q.mu.Lock()
	q.tasks = append(q.tasks, t)
	q.mu.Unlock()
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

// take returns the tasks posted so far, and gives the queue spare (the
// slice the previous take returned, cleared) to fill next. Reactor only.
func (q *taskQueue[T]) take(spare []T) []T {
	clear(spare)
	q.mu.Lock()
	tasks := q.tasks
	q.tasks = spare[:0]
	q.mu.Unlock()
	return tasks
}

// close closes the eventfd; later posts are queued but wake nobody.
func (q *taskQueue[T]) close() {
	q.mu.Lock()
	q.closed = true
	_ = unix.Close(q.wakefd)
	q.mu.Unlock()
}
