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
	mu       sync.Mutex // guards out, space, done
	out      []byte
	space    chan struct{} // closed when out shrinks: blocked writers retry
	done     bool
	doneChan chan struct{}
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
	var timer *time.Timer
	q.mu.Lock()
	for len(q.out) > limit && !q.done {
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
	q.out = append(q.out, head...)
	for _, part := range parts {
		q.out = append(q.out, part...)
	}
	q.mu.Unlock()
	return nil
}

var errWriteTimeout = &timeoutError{}

// queued reports whether output waits to be taken.
func (q *outputQueue) queued() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.out) > 0
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
	if cap(spare) > retainedOutput {
		spare = nil
	}
	q.mu.Lock()
	taken := q.out
	q.out = spare[:0]
	close(q.space)
	q.space = make(chan struct{})
	q.mu.Unlock()
	return taken
}

// finish fails every present and future write: the connection closed.
func (q *outputQueue) finish() {
	q.mu.Lock()
	q.done = true
	close(q.doneChan)
	q.mu.Unlock()
}
