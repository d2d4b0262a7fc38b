package loop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// StdServer is the portable backend: package net, a goroutine per
// connection.
type StdServer struct {
	cfg     Config
	handler Handler

	nextID   atomic.Uint64
	draining atomic.Bool
	mu       sync.Mutex
	listener net.Listener
	conns    map[*stdConn]struct{}
	idle     chan struct{} // closed when conns empties while draining
}

// NewStd returns a server that hands connections to handler.
func NewStd(cfg Config, handler Handler) *StdServer {
	return &StdServer{cfg: cfg.withDefaults(), handler: handler, conns: map[*stdConn]struct{}{}}
}

// Backend names the backend for logs.
func (s *StdServer) Backend() string { return "std" }

// Serve accepts connections on listener until Shutdown.
func (s *StdServer) Serve(listener net.Listener) error {
	s.mu.Lock()
	s.listener = listener
	s.mu.Unlock()
	for {
		nc, err := listener.Accept()
		if err != nil {
			if s.draining.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return fmt.Errorf("loop: accept: %w", err)
		}
		s.start(nc)
	}
}

func (s *StdServer) start(nc net.Conn) {
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	c := &stdConn{server: s, nc: nc, id: s.nextID.Add(1)}
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	session, err := s.handler.Open(c)
	if err != nil {
		s.cfg.Logger.Debug("connection refused", "remote", c.RemoteAddr(), "error", err.Error())
		_ = c.Close()
		return
	}
	go c.readLoop(session)
}

// Shutdown stops accepting, stops reading from every connection and waits
// until every session has closed its connection (after finishing its
// in-flight work), or ctx ends.
func (s *StdServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	if s.listener != nil {
		_ = s.listener.Close()
	}
	s.idle = make(chan struct{})
	if len(s.conns) == 0 {
		close(s.idle)
	}
	for c := range s.conns {
		c.stopReading()
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CloseAll closes every connection at once (after a failed drain).
func (s *StdServer) CloseAll() {
	s.mu.Lock()
	conns := make([]*stdConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (s *StdServer) forget(c *stdConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.draining.Load() && len(s.conns) == 0 && s.idle != nil {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

type stdConn struct {
	server *StdServer
	nc     net.Conn
	id     uint64

	writeMu     sync.Mutex
	readTimeout atomic.Int64 // nanoseconds
	stopped     atomic.Bool  // draining: stop reading
	closed      atomic.Bool
}

var _ Conn = (*stdConn)(nil)

func (c *stdConn) ID() uint64                     { return c.id }
func (c *stdConn) RemoteAddr() string             { return c.nc.RemoteAddr().String() }
func (c *stdConn) SetReadTimeout(d time.Duration) { c.readTimeout.Store(int64(d)) }

func (c *stdConn) Write(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closed.Load() {
		return net.ErrClosed
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.server.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	return err
}

func (c *stdConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	err := c.nc.Close()
	c.server.forget(c)
	return err
}

// stopReading makes the read loop end at its next read (draining).
func (c *stdConn) stopReading() {
	c.stopped.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *stdConn) readLoop(session Session) {
	buf := make([]byte, c.server.cfg.ReadBufferSize)
	start, end := 0, 0
	var cause error
	for !c.stopped.Load() {
		if timeout := time.Duration(c.readTimeout.Load()); timeout > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
		}
		n, err := c.nc.Read(buf[end:])
		end += n
		if n > 0 {
			consumed, herr := session.Data(buf[start:end])
			start += consumed
			if herr != nil {
				cause = herr
				break
			}
			var full error
			if buf, start, end, full = c.compact(buf, start, end); full != nil {
				cause = full
				break
			}
		}
		if err != nil {
			if !c.stopped.Load() {
				cause = err
			}
			break
		}
	}
	session.ReadStopped(cause)
}

// compact moves unconsumed bytes to the front and grows the buffer when a
// single frame fills it.
func (c *stdConn) compact(buf []byte, start, end int) ([]byte, int, int, error) {
	switch {
	case start == end:
		return buf, 0, 0, nil
	case end < len(buf):
		return buf, start, end, nil
	case start > 0:
		copy(buf, buf[start:end])
		return buf, 0, end - start, nil
	case len(buf) < c.server.cfg.MaxBuffer:
		grown := make([]byte, min(2*len(buf), c.server.cfg.MaxBuffer))
		copy(grown, buf[:end])
		return grown, 0, end, nil
	}
	return buf, start, end, ErrBufferFull
}
