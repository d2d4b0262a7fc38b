package peerlink

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// connection is one established, greeted connection to a peer, with a
// reader goroutine that hands frames to the Handler and a writer
// goroutine that drains the peer's queue.
type connection struct {
	peer *peer
	// raw is the TCP socket. Closing it (never the TLS layer, whose
	// close_notify could block on a full send buffer) stops both
	// goroutines at once.
	raw    net.Conn
	stream net.Conn // raw, or TLS over raw
	done   chan struct{}
	once   sync.Once
}

func newConnection(p *peer, raw, stream net.Conn) *connection {
	return &connection{peer: p, raw: raw, stream: stream, done: make(chan struct{})}
}

// close ends the connection once, for reason, and tells the peer.
func (c *connection) close(reason error) {
	c.once.Do(func() {
		c.raw.Close()
		close(c.done)
		c.peer.detached(c, fmt.Errorf("connection %s: %w", c.raw.RemoteAddr(), reason))
	})
}

// readLoop decodes frames and hands each to the Handler, in order.
// Heartbeats only keep the idle deadline from firing.
func (c *connection) readLoop() {
	p := c.peer
	config := &p.link.config
	frames := newFrameReader(bufio.NewReaderSize(idleReader{c.stream, config.IdleTimeout}, readBufferBytes), config.MaxPayloadBytes)
	for {
		channel, payload, err := frames.next()
		if err != nil {
			c.close(readError(err))
			return
		}
		if channel == ControlChannel {
			continue
		}
		p.counters.messagesReceived.Add(1)
		p.counters.bytesReceived.Add(uint64(frameBytes(len(payload))))
		config.Handler(p.id, channel, payload)
	}
}

// readError names why reading stopped. Malformed frames are logged: they
// mean a bug or a corrupting path, never a normal disconnect.
func readError(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrIdle
	case errors.Is(err, io.EOF):
		return fmt.Errorf("closed by the peer: %w", err)
	}
	return err
}

// idleReader sets the idle deadline before every read of the socket
// (once per buffer fill, not per frame).
type idleReader struct {
	source  net.Conn
	timeout time.Duration
}

func (r idleReader) Read(buffer []byte) (int, error) {
	r.source.SetReadDeadline(time.Now().Add(r.timeout))
	return r.source.Read(buffer)
}

// writeLoop takes everything queued for the peer and writes it with one
// call; with nothing queued for a heartbeat interval it writes a
// heartbeat, so the other side can tell a silent peer from an idle one.
func (c *connection) writeLoop() {
	p := c.peer
	config := &p.link.config
	heartbeat := time.NewTimer(config.HeartbeatInterval)
	defer heartbeat.Stop()
	var batch []byte
	for {
		select {
		case <-c.done: // a replaced connection must not take from the queue
			return
		default:
		}
		var messages int
		batch, messages = p.takePending(batch)
		if len(batch) == 0 {
			select {
			case <-p.wake:
				continue
			case <-heartbeat.C:
				batch = appendFrame(batch, ControlChannel, nil)
			case <-c.done:
				return
			}
		}
		c.stream.SetWriteDeadline(time.Now().Add(config.IdleTimeout))
		if _, err := c.stream.Write(batch); err != nil {
			p.countDropped(messages, len(batch))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("%w: a write blocked: %w", ErrIdle, err)
			}
			c.close(err)
			return
		}
		if messages > 0 {
			p.counters.messagesSent.Add(uint64(messages))
			p.counters.bytesSent.Add(uint64(len(batch)))
		}
		heartbeat.Reset(config.HeartbeatInterval)
		batch = batch[:0]
	}
}
