package loop

import (
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// outputQueue is the output side every reactor connection shares: bytes
// other goroutines queued with Write and the reactor has not taken yet.
// Writers block while more than the output limit waits, so a peer that
// stops reading costs at most the limit, and give up after the write
// timeout instead of blocking a session forever.
//
// Copied bytes live in chunks from a budgeted slab (chunks_linux.go), so
// queued output never grows the heap with traffic: a connection holds
// chunks only while it has output waiting, and gives them back once the
// kernel has the bytes.
type outputQueue struct {
	source chunkSource

	mu     sync.Mutex // guards chunks, queuedBytes, borrows, borrowedBytes, space, done
	chunks []outputChunk
	// queuedBytes is the copied bytes the chunks hold.
	queuedBytes int
	borrows     []borrowed    // sent from the writer's memory, between copied bytes
	space       chan struct{} // closed when the queue shrinks: blocked writers retry
	spaceWaited bool          // a writer holds space: the next take closes and renews it
	done        bool
	doneChan    chan struct{}
	// borrowedBytes is what borrows hold: it counts against the limit
	// like copied bytes, though none of it was copied.
	borrowedBytes int
	// direct is the socket a writer may write to from its own goroutine
	// (writeDirect), -1 for a backend that does not allow it. The reactor
	// finishes the queue (done) before it closes the socket, and a direct
	// write holds mu, so a direct write never meets a closed or reused
	// descriptor.
	direct int
	// sending is set while the reactor holds output it took and has not
	// written whole: a direct write then would overtake it.
	sending bool
}

// borrowed is one WriteVectored's parts, sent from the caller's memory
// (a mapped segment) instead of being copied: they go out after the
// first at copied bytes of the queue and before the rest. done runs once,
// when the kernel has every byte or the connection closed.
type borrowed struct {
	at    int
	parts [][]byte
	size  int
	done  func()
}

func newOutputQueue(source chunkSource) outputQueue {
	return outputQueue{source: source, space: make(chan struct{}), doneChan: make(chan struct{}), direct: -1}
}

// appendLocked copies b into the queue's chunks. REQUIRES: q.mu held.
func (q *outputQueue) appendLocked(b []byte) {
	for len(b) > 0 {
		last := len(q.chunks) - 1
		if last < 0 || q.chunks[last].filled == len(q.chunks[last].bytes) {
			q.chunks = append(q.chunks, q.source.get())
			last++
		}
		chunk := &q.chunks[last]
		copied := copy(chunk.bytes[chunk.filled:], b)
		chunk.filled += copied
		q.queuedBytes += copied
		b = b[copied:]
	}
}

// write appends b once no more than limit bytes wait, and fails after
// timeout (a peer that does not read) or once the connection is closed.
// remote names the peer in the timeout error.
func (q *outputQueue) write(b []byte, limit int, timeout time.Duration, remote string) error {
	return q.writeParts(b, nil, limit, timeout, remote)
}

// tryWrite appends b when no more than limit bytes wait and the queue is
// open, without waiting; it reports whether it did.
func (q *outputQueue) tryWrite(b []byte, limit int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done || q.queuedBytes+q.borrowedBytes > limit {
		return false
	}
	q.appendLocked(b)
	return true
}

// writeParts appends head and then each part, under one lock so no other
// write lands between them.
func (q *outputQueue) writeParts(head []byte, parts [][]byte, limit int, timeout time.Duration, remote string) error {
	if err := q.waitForSpace(limit, timeout, remote); err != nil {
		return err
	}
	q.appendLocked(head)
	for _, part := range parts {
		q.appendLocked(part)
	}
	q.mu.Unlock()
	return nil
}

// directWriteMax bounds what a writer writes itself: a few answers to
// awaited requests, where the reactor's wake-up is most of the cost. A
// bigger write is a busy pipelined connection's batch, which the reactor
// joins with whatever else was queued into fewer, larger writes
// (measured: eight pipelined producers lost about 9 % with every write
// direct).
const directWriteMax = 512

// writeDirect writes b to the socket on the caller's goroutine when the
// backend allows it and nothing else waits to be sent: an answer then
// reaches the peer without waking the reactor, which costs tens of
// microseconds on a small machine. written reports that b was taken
// (nothing to do when false: queue it as usual); queued, that part of it
// went into the queue instead (a full socket buffer, or a failure the
// reactor will meet and close on), so the reactor must flush.
func (q *outputQueue) writeDirect(b []byte) (written, queued bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.direct < 0 || len(b) > directWriteMax || q.done || q.sending || q.queuedBytes > 0 || len(q.borrows) > 0 {
		return false, false
	}
	n, err := unix.Write(q.direct, b)
	if err == nil && n == len(b) {
		return true, false
	}
	q.appendLocked(b[max(n, 0):])
	return true, true
}

// writeBorrowed queues head (copied) and parts (not copied: they must stay
// valid until done runs). On an error done has not run and will not.
func (q *outputQueue) writeBorrowed(head []byte, parts [][]byte, done func(), limit int, timeout time.Duration, remote string) error {
	if err := q.waitForSpace(limit, timeout, remote); err != nil {
		return err
	}
	q.appendLocked(head)
	size := 0
	for _, part := range parts {
		size += len(part)
	}
	q.borrows = append(q.borrows, borrowed{at: q.queuedBytes, parts: parts, size: size, done: done})
	q.borrowedBytes += size
	q.mu.Unlock()
	return nil
}

// waitForSpace returns with q.mu held once no more than limit bytes wait,
// or an error (q.mu released) after timeout or once the connection closed.
func (q *outputQueue) waitForSpace(limit int, timeout time.Duration, remote string) error {
	var timer *time.Timer
	q.mu.Lock()
	for q.queuedBytes+q.borrowedBytes > limit && !q.done {
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		space := q.space
		q.spaceWaited = true
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
	return q.queuedBytes > 0 || len(q.borrows) > 0
}

// take hands the queued chunks to the sender (who gives them back to the
// source once sent) and gives the queue spare, emptied, to fill; blocked
// writers go on. While busy a connection holds at most two output limits
// plus one write: the batch being sent and the one filling, which the RAM
// budget counts.
func (q *outputQueue) take(spare []outputChunk) []outputChunk {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takeLocked(spare)
}

// takeLocked is take with q.mu held.
func (q *outputQueue) takeLocked(spare []outputChunk) []outputChunk {
	taken := q.chunks
	q.chunks, q.queuedBytes = spare[:0], 0
	// Only a channel a writer holds needs closing: renewing it on every
	// take was an allocation per send.
	if q.spaceWaited {
		close(q.space)
		q.space, q.spaceWaited = make(chan struct{}), false
	}
	return taken
}

// takeAll is take for a backend that sends borrowed parts in place: it
// also hands over the borrows (and takes spareBorrows, emptied, to fill).
func (q *outputQueue) takeAll(spare []outputChunk, spareBorrows []borrowed) ([]outputChunk, []borrowed) {
	clear(spareBorrows)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sending = q.queuedBytes > 0 || len(q.borrows) > 0
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
	q.source.put(q.chunks)
	q.chunks, q.queuedBytes = nil, 0
	q.mu.Unlock()
	for _, b := range borrows {
		b.done()
	}
}
