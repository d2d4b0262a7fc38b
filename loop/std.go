package loop

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// StdServer is the portable backend: package net, a goroutine per
// connection. It is the reference the event-loop backends must match.
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

var _ Server = (*StdServer)(nil)

// NewStd returns a server that hands connections to handler.
func NewStd(cfg Config, handler Handler) *StdServer {
	return &StdServer{cfg: cfg.withDefaults(), handler: handler, conns: map[*stdConn]struct{}{}}
}

// Backend implements Server.
func (s *StdServer) Backend() string { return "std" }

// Busy is nil: the std backend has no reactors.
func (s *StdServer) Busy() []time.Duration { return nil }

// Listen implements Server.
func (s *StdServer) Listen(addr string) (net.Addr, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if s.cfg.TLS != nil {
		listener = tls.NewListener(listener, s.cfg.TLS)
	}
	s.mu.Lock()
	s.listener = listener
	s.mu.Unlock()
	return listener.Addr(), nil
}

// Serve implements Server.
func (s *StdServer) Serve() error {
	s.mu.Lock()
	listener := s.listener
	s.mu.Unlock()
	if listener == nil {
		return errors.New("loop: Serve before Listen")
	}
	var backoff acceptBackoff
	for {
		nc, err := listener.Accept()
		if err != nil {
			if s.draining.Load() {
				return ErrServerClosed
			}
			if !acceptRetryable(err) {
				return fmt.Errorf("loop: accept: %w", err)
			}
			backoff.failed(s.cfg.Logger, err)
			continue
		}
		backoff.succeeded()
		// Everything else happens on the connection's own goroutine: the
		// handler's refusal, or a TLS handshake with a peer that sends
		// nothing, must never hold up accepting the next connection.
		go s.start(nc, s.nextID.Add(1))
	}
}

// acceptRetryable reports whether an accept error passes: a timeout, a
// connection aborted before it was accepted, or a process or system out
// of file descriptors.
func acceptRetryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED)
}

func (s *StdServer) start(nc net.Conn, id uint64) {
	c := &stdConn{server: s, nc: nc, id: id, stop: make(chan struct{})}
	raw := nc
	if secure, ok := nc.(*tls.Conn); ok {
		raw = secure.NetConn()
		c.secure = secure
		c.handshakeContext, c.handshakeCancel = context.WithTimeout(context.Background(), s.cfg.HandshakeTimeout)
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
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

// Shutdown implements Server.
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

// CloseAll implements Server.
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

	// secure is nc on a TLS listener (nil on plaintext). Its handshake is
	// bounded by handshakeContext, which ends at HandshakeTimeout after
	// accept or at Close, whichever comes first; handshook is set once it
	// completed.
	secure           *tls.Conn
	handshakeContext context.Context
	handshakeCancel  context.CancelFunc
	handshook        atomic.Bool

	writeMu     sync.Mutex
	readTimeout atomic.Int64 // nanoseconds
	stopped     atomic.Bool  // draining: stop reading
	stop        chan struct{}
	stopOnce    sync.Once
	closed      atomic.Bool

	pauseMu sync.Mutex
	resumed chan struct{} // non-nil while paused; closed on resume
	resumes uint64        // resumes so far, under pauseMu: see deliver
}

var (
	_ Conn    = (*stdConn)(nil)
	_ TLSConn = (*stdConn)(nil)
)

// TLSState implements TLSConn: the negotiated state of a TLS connection
// (false on a plaintext one, or before its handshake completed).
func (c *stdConn) TLSState() (tls.ConnectionState, bool) {
	if !c.handshook.Load() {
		// ConnectionState would wait for a handshake in progress.
		return tls.ConnectionState{}, false
	}
	state := c.secure.ConnectionState()
	return state, state.HandshakeComplete
}

// Handshaking implements TLSConn.
func (c *stdConn) Handshaking() bool { return c.secure != nil && !c.handshook.Load() }

// handshake completes the TLS handshake, if there is one and it has not
// completed, within its deadline. Both the reader and Write call it, so
// no path waits on a handshake without a bound: crypto/tls would
// otherwise read a silent peer for ever.
func (c *stdConn) handshake() error {
	if c.secure == nil || c.handshook.Load() {
		return nil
	}
	if err := c.secure.HandshakeContext(c.handshakeContext); err != nil {
		return err
	}
	c.handshook.Store(true)
	return nil
}

// MayBlock implements InlineConn: Data runs on the connection's own
// reading goroutine, so blocking it holds up no one else.
func (c *stdConn) MayBlock() bool { return true }

// TryWrite implements InlineConn. std has no output queue: the bytes go
// to the socket at once, and a full socket buffer blocks only this
// connection's reading goroutine, as MayBlock allows.
func (c *stdConn) TryWrite(b []byte) bool { return c.Write(b) == nil }

func (c *stdConn) ID() uint64                     { return c.id }
func (c *stdConn) RemoteAddr() string             { return c.nc.RemoteAddr().String() }
func (c *stdConn) SetReadTimeout(d time.Duration) { c.readTimeout.Store(int64(d)) }

// Write writes b through (std has no output queue: blocking in the
// kernel's socket buffer is its flow control).
func (c *stdConn) Write(b []byte) error {
	if err := c.handshake(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closed.Load() {
		return net.ErrClosed
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.server.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	return err
}

// WriteVectored writes header and parts with one writev (net.Buffers)
// straight from the caller's memory: std has no output queue to copy into.
func (c *stdConn) WriteVectored(header []byte, parts [][]byte, done func()) error {
	defer done()
	if err := c.handshake(); err != nil {
		return err
	}
	buffers := make(net.Buffers, 0, len(parts)+1)
	buffers = append(buffers, header)
	buffers = append(buffers, parts...)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closed.Load() {
		return net.ErrClosed
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.server.cfg.WriteTimeout))
	_, err := buffers.WriteTo(c.nc)
	return err
}

func (c *stdConn) PauseReading() {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if c.resumed == nil {
		c.resumed = make(chan struct{})
	}
}

func (c *stdConn) ResumeReading() {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if c.resumed != nil {
		close(c.resumed)
		c.resumed = nil
		c.resumes++
	}
}

// pauseState returns the channel to wait on while paused (nil when not)
// and how many resumes there have been.
func (c *stdConn) pauseState() (chan struct{}, uint64) {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	return c.resumed, c.resumes
}

// deliver hands the buffered bytes to the session, and again whenever the
// session paused and resumed within the call: a resume that comes while
// Data still runs (credits free already) has no waiting reader to wake,
// and the bytes it held back would otherwise sit in the buffer while the
// reader blocks on a network that has nothing more to send.
func (c *stdConn) deliver(session Session, in *inputBuffer) error {
	for {
		_, before := c.pauseState()
		if err := in.deliver(session); err != nil {
			return err
		}
		paused, after := c.pauseState()
		if paused != nil || after == before || in.empty() {
			return nil
		}
	}
}

// pausedChannel returns the channel to wait on while paused, or nil.
func (c *stdConn) pausedChannel() chan struct{} {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	return c.resumed
}

func (c *stdConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.stopOnce.Do(func() { close(c.stop) })
	if c.handshakeCancel != nil {
		c.handshakeCancel() // a handshake in progress ends now, and a Write waiting on it
	}
	c.writeMu.Lock() // let a write in progress finish first
	err := c.nc.Close()
	c.writeMu.Unlock()
	c.server.forget(c)
	return err
}

// stopReading makes the read loop end at its next read (draining).
func (c *stdConn) stopReading() {
	c.stopped.Store(true)
	c.stopOnce.Do(func() { close(c.stop) })
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *stdConn) readLoop(session Session) {
	if err := c.handshake(); err != nil {
		switch {
		case c.stopped.Load():
			err = nil // draining, as for a read
		case c.closed.Load():
			err = net.ErrClosed // the handshake was cut short by Close
		}
		session.ReadStopped(err)
		return
	}
	in := newInputBuffer(c.server.cfg)
	in.sizer, _ = session.(FrameSizer)
	err := c.read(session, &in)
	in.release()
	session.ReadStopped(err)
}

// read runs until reading ends and returns why (nil when draining).
func (c *stdConn) read(session Session, in *inputBuffer) error {
	for {
		if wait := c.pausedChannel(); wait != nil {
			select {
			case <-wait:
			case <-c.stop:
				return nil
			}
			// Bytes Data left for later come first after a resume.
			if err := c.deliver(session, in); err != nil {
				return err
			}
			continue
		}
		if c.stopped.Load() {
			return nil
		}
		if timeout := time.Duration(c.readTimeout.Load()); timeout > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
		}
		space, err := in.free()
		if errors.Is(err, errNeedMemory) {
			if err := c.waitForMemory(in); err != nil {
				return err
			}
			continue
		}
		if len(space) == 0 {
			// One frame fills the largest buffer and is still unconsumed.
			return ErrBufferFull
		}
		n, err := c.nc.Read(space)
		if n > 0 {
			in.filled(n)
			if derr := c.deliver(session, in); derr != nil {
				return derr
			}
			in.shrink()
		}
		if err != nil {
			if c.stopped.Load() {
				return nil
			}
			return err
		}
	}
}

// waitForMemory waits for the large-frame pool, giving up when the
// connection stops.
func (c *stdConn) waitForMemory(in *inputBuffer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-done:
		}
	}()
	err := in.waitForMemory(ctx)
	if err != nil && c.stopped.Load() {
		return nil
	}
	return err
}
