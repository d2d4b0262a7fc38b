package loop

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// outputQueue is the output side every reactor connection shares: bytes
// other goroutines queued with Write and the reactor has not taken yet.
// Writers block while more than the output limit waits, so a peer that
// stops reading costs at most the limit, and give up after the write
// timeout instead of blocking a session forever.
type outputQueue struct {
	mu       sync.Mutex // guards out, borrows, borrowedBytes, space, done
	out      []byte
	borrows  []borrowed    // sent from the writer's memory, between bytes of out
	space    chan struct{} // closed when out shrinks: blocked writers retry
	done     bool
	doneChan chan struct{}
	// borrowedBytes is what borrows hold: it counts against the limit
	// like out, though none of it was copied.
	borrowedBytes int
}

// borrowed is one WriteVectored's parts, sent from the caller's memory
// (a mapped segment) instead of being copied: they go out after the
// first at bytes of the queue's out and before the rest. done runs once,
// when the kernel has every byte or the connection closed.
type borrowed struct {
	at    int
	parts [][]byte
	size  int
	done  func()
}

func newOutputQueue() outputQueue {
	return outputQueue{space: make(chan struct{}), doneChan: make(chan struct{})}
}

// write appends b once no more than limit bytes wait, and fails after
// timeout (a peer that does not read) or once the connection is closed.
// remote names the peer in the timeout error.
func (q *outputQueue) write(b []byte, limit int, timeout time.Duration, remote string) error {
	return q.writeParts(b, nil, limit, timeout, remote)
}

// writeParts appends head and then each part, under one lock so no other
// write lands between them.
func (q *outputQueue) writeParts(head []byte, parts [][]byte, limit int, timeout time.Duration, remote string) error {
	if err := q.waitForSpace(limit, timeout, remote); err != nil {
		return err
	}
	q.out = append(q.out, head...)
	for _, part := range parts {
		q.out = append(q.out, part...)
	}
	q.mu.Unlock()
	return nil
}

// writeBorrowed queues head (copied) and parts (not copied: they must stay
// valid until done runs). On an error done has not run and will not.
func (q *outputQueue) writeBorrowed(head []byte, parts [][]byte, done func(), limit int, timeout time.Duration, remote string) error {
	if err := q.waitForSpace(limit, timeout, remote); err != nil {
		return err
	}
	q.out = append(q.out, head...)
	size := 0
	for _, part := range parts {
		size += len(part)
	}
	q.borrows = append(q.borrows, borrowed{at: len(q.out), parts: parts, size: size, done: done})
	q.borrowedBytes += size
	q.mu.Unlock()
	return nil
}

// waitForSpace returns with q.mu held once no more than limit bytes wait,
// or an error (q.mu released) after timeout or once the connection closed.
func (q *outputQueue) waitForSpace(limit int, timeout time.Duration, remote string) error {
	var timer *time.Timer
	q.mu.Lock()
	for len(q.out)+q.borrowedBytes > limit && !q.done {
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		space := q.space
		q.mu.Unlock()
		select {
		case <-space:
		case <-q.doneChan:
		case <-timer.C:
			return fmt.Errorf("loop: write to %s: %w", remote, errWriteTimeout)
		}
		q.mu.Lock()
	}
	if q.done {
		q.mu.Unlock()
		return net.ErrClosed
	}
	return nil
}

var errWriteTimeout = &timeoutError{}

// queued reports whether output waits to be taken.
func (q *outputQueue) queued() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.out) > 0 || len(q.borrows) > 0
}

// retainedOutput is the largest buffer a connection keeps for its next
// writes: one grown by a burst is let go, so an idle connection holds at
// most two of these, not two bursts.
const retainedOutput = 64 << 10

// take swaps the queued output with spare (emptied, its memory reused for
// the next writes unless a burst grew it past retainedOutput) and lets
// blocked writers go on. While busy a connection holds at most two
// buffers of the output limit plus one write: the one being sent and the
// one filling, which the RAM budget counts.
func (q *outputQueue) take(spare []byte) []byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takeLocked(spare)
}

// takeLocked is take with q.mu held.
func (q *outputQueue) takeLocked(spare []byte) []byte {
	if cap(spare) > retainedOutput {
		spare = nil
	}
	taken := q.out
	q.out = spare[:0]
	close(q.space)
	q.space = make(chan struct{})
	return taken
}

// takeAll is take for a backend that sends borrowed parts in place: it
// also hands over the borrows (and takes spareBorrows, emptied, to fill).
func (q *outputQueue) takeAll(spare []byte, spareBorrows []borrowed) ([]byte, []borrowed) {
	clear(spareBorrows)
	q.mu.Lock()
	defer q.mu.Unlock()
	borrows := q.borrows
	q.borrows, q.borrowedBytes = spareBorrows[:0], 0
	return q.takeLocked(spare), borrows
}

// finish fails every present and future write: the connection closed.
// Borrowed parts still queued will never be sent: their done runs now.
func (q *outputQueue) finish() {
	q.mu.Lock()
	q.done = true
	close(q.doneChan)
	borrows := q.borrows
	q.borrows, q.borrowedBytes = nil, 0
	q.mu.Unlock()
	for _, b := range borrows {
		b.done()
	}
}
