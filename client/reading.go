package client

import (
	"context"
	"errors"
	"os"
	"time"
)

// Who reads the socket. One reader at a time owns Client.rbuf and
// dispatches every frame that arrives, whoever it answers.
//
// An awaited call (Produce, Ping, Fetch, Ack…) whose connection nobody
// is reading reads its own answer: its goroutine is woken by the network
// poller and returns, with no hand-off from a reader goroutine. On a
// 2-vCPU VM that hand-off (wake the reader, dispatch, wake the caller,
// often on another thread) cost 6–8 µs per round trip and most of the
// round trip's tail (docs/BENCHMARKS.md, "P1: the broker against the
// SDK").
//
// The read loop reads for everyone else: pipelined sends, a Stream's
// read-ahead, keepalives, and awaited calls while another is reading.
// It stops when nothing is pending, so the next awaited call can read
// for itself, and reads again once the connection has been quiet for
// quietReadAfter, so that a server closing an idle connection, or
// breaking the protocol, is still noticed (Err) without any call.
type readerRole uint8

const (
	readerNone   readerRole = iota // nobody: the next awaited call, or the loop when quiet
	readerLoop                     // the read loop
	readerCaller                   // an awaited call reading its own answer
)

// quietReadAfter is how long nobody reads before the read loop takes the
// socket again. An awaited call arriving while the loop reads waits for
// the loop's hand-off as before, once; the loop lets go again after it.
const quietReadAfter = 100 * time.Millisecond

// readLoop reads whenever it is handed the socket (loopWake) or finds
// it unread for quietReadAfter, until nothing is pending. Any failure
// finishes the connection.
func (c *Client) readLoop() {
	defer c.wg.Done()
	quiet := time.NewTimer(quietReadAfter)
	defer quiet.Stop()
	for {
		select {
		case <-c.loopWake:
		case <-quiet.C:
			if wait := c.takeQuietSocket(); wait > 0 {
				quiet.Reset(wait)
				continue
			}
		case <-c.done:
			return
		}
		for {
			if err := c.readFrame(); err != nil {
				return
			}
			// Frames already buffered are read on without the lock: the
			// question is only whether to block in the next read.
			if !c.rbuf.buffered() && !c.keepReading() {
				break
			}
		}
		quiet.Reset(quietReadAfter)
	}
}

// readFrame reads and dispatches one frame; a failure finishes the
// connection and is returned.
func (c *Client) readFrame() error {
	frame, err := c.rbuf.next(c.conn, c.readMax)
	if err == nil {
		err = c.dispatch(frame)
	}
	if err != nil {
		c.shutdown(c.lost(err))
	}
	return err
}

// keepReading says whether the loop reads on: while anything is pending.
// Otherwise it lets go of the socket.
func (c *Client) keepReading() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.pending.count > 0 && c.err == nil {
		return true
	}
	c.reader = readerNone
	c.releasedAt = c.now()
	return false
}

// takeQuietSocket gives the loop the socket when nobody has read it for
// quietReadAfter, returning 0; otherwise how long to wait before asking
// again.
func (c *Client) takeQuietSocket() time.Duration {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.err != nil {
		return quietReadAfter // the loop ends on done
	}
	if c.reader != readerNone {
		return quietReadAfter
	}
	if quiet := time.Duration(c.now() - c.releasedAt); quiet < quietReadAfter {
		return quietReadAfter - quiet
	}
	c.reader = readerLoop
	return 0
}

// wantReaderLocked hands the socket to the loop if nobody reads it, for
// a request that no caller will await in person. Called with pmu held.
func (c *Client) wantReaderLocked() {
	if c.reader != readerNone {
		return
	}
	c.reader = readerLoop
	select {
	case c.loopWake <- struct{}{}:
	default:
	}
}

// takeReading makes the calling goroutine the reader if nobody is.
func (c *Client) takeReading() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.reader != readerNone || c.err != nil {
		return false
	}
	c.reader = readerCaller
	return true
}

// releaseReading ends a caller's turn as reader: the loop takes over if
// anything is still pending (other callers, pipelined sends, an
// abandoned produce's ack), else nobody reads.
func (c *Client) releaseReading() {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	c.reader = readerNone
	c.releasedAt = c.now()
	if c.pending.count > 0 && c.err == nil {
		c.wantReaderLocked()
	}
}

// readOwn reads and dispatches frames until cl has its answer, ctx ends
// or the connection fails. Its result is await's.
func (c *Client) readOwn(ctx context.Context, id uint32, cl *call) error {
	stopInterrupt := c.interruptReadOn(ctx)
	answered := false
	for !answered {
		select {
		case <-cl.done:
			answered = true
			continue
		default:
		}
		frame, err := c.rbuf.next(c.conn, c.readMax)
		if err != nil && ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			break // ctx ended and interrupted the read; the buffer keeps what came
		}
		if err == nil {
			err = c.dispatch(frame)
		}
		if err != nil {
			c.shutdown(c.lost(err)) // which answers cl with the error
			break
		}
	}
	stopInterrupt()
	c.releaseReading()
	if answered {
		return nil
	}
	select {
	case <-cl.done:
		return nil
	default:
	}
	if c.abandon(id, cl) {
		return ctx.Err()
	}
	<-cl.done // the answer came (or the connection failed) meanwhile
	return nil
}

// interruptReadOn makes the socket's reads fail with a deadline error
// once ctx ends, so a caller reading its own answer still honours its
// context. The returned function undoes it and must run before the
// socket goes to another reader. A context that cannot end costs nothing.
func (c *Client) interruptReadOn(ctx context.Context) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		c.conn.SetReadDeadline(aLongTimeAgo)
		close(fired)
	})
	return func() {
		if !stopAfter() {
			<-fired // its deadline must not land after the one cleared here
			c.conn.SetReadDeadline(time.Time{})
		}
	}
}
