package loop

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// connFront is the half of a reactor connection that other goroutines
// touch: the Conn methods a session calls, the flags they set and the
// output they queue, handed to the reactor through post. The epoll and
// io_uring connections embed it; their reactor-owned halves differ.
type connFront struct {
	id     uint64
	remote string
	// post hands a task for this connection to its reactor.
	post func(taskKind)
	// limits are the reactor server's output limit and write timeout.
	outputLimit  int
	writeTimeout time.Duration

	paused       atomic.Bool
	closing      atomic.Bool
	closeNow     atomic.Bool
	flushPending atomic.Bool
	readTimeout  atomic.Int64

	output outputQueue
}

func newConnFront(fd int, id uint64, cfg Config, post func(taskKind)) connFront {
	remote := "unknown"
	if sa, err := unix.Getpeername(fd); err == nil {
		remote = sockaddrToTCP(sa).String()
	}
	return connFront{id: id, remote: remote, post: post, outputLimit: cfg.OutputLimit,
		writeTimeout: cfg.WriteTimeout, output: newOutputQueue(chunkSource{slab: cfg.OutputBuffers})}
}

func (c *connFront) ID() uint64                     { return c.id }
func (c *connFront) RemoteAddr() string             { return c.remote }
func (c *connFront) SetReadTimeout(d time.Duration) { c.readTimeout.Store(int64(d)) }

// PauseReading implements Conn; the reactor stops reading the next time
// it looks at the connection.
func (c *connFront) PauseReading() { c.paused.Store(true) }

// ResumeReading implements Conn.
func (c *connFront) ResumeReading() {
	if c.paused.Swap(false) {
		c.post(taskResume)
	}
}

// Write implements Conn: it writes a small b itself when nothing else
// waits and the backend allows it (outputQueue.writeDirect), else queues b
// and wakes the reactor, which sends everything queued in one write per
// pass. It blocks while more than the output limit is waiting, up to the
// write timeout.
func (c *connFront) Write(b []byte) error {
	if written, queued := c.output.writeDirect(b); written {
		if queued {
			c.flushSoon()
		}
		return nil
	}
	if err := c.output.write(b, c.outputLimit, c.writeTimeout, c.remote); err != nil {
		return err
	}
	c.flushSoon()
	return nil
}

// TryWrite implements InlineConn for the reactor backends: b is queued
// only when the output limit leaves room now.
func (c *connFront) TryWrite(b []byte) bool {
	if written, queued := c.output.writeDirect(b); written {
		if queued {
			c.flushSoon()
		}
		return true
	}
	if !c.output.tryWrite(b, c.outputLimit) {
		return false
	}
	c.flushSoon()
	return true
}

// flushSoon asks the reactor to send what is queued, once per pass.
func (c *connFront) flushSoon() {
	if c.flushPending.CompareAndSwap(false, true) {
		c.post(taskFlush)
	}
}

// Close implements Conn: queued output is sent first, up to the write
// timeout.
func (c *connFront) Close() error {
	if !c.closing.Swap(true) {
		c.post(taskClose)
	}
	return nil
}
