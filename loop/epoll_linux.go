package loop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// EpollServer is the epoll backend: one reactor per core, each an
// epoll instance driven by one goroutine, plus one goroutine blocked in
// accept that hands new connections to the reactors in turn.
type EpollServer struct {
	cfg      Config
	handler  Handler
	listenFD int
	reactors []*reactor

	nextID   atomic.Uint64
	nextLoop atomic.Uint64
	draining atomic.Bool
	running  sync.WaitGroup

	conns *connSet[*epollConn]

	mu      sync.Mutex // guards listenFD and serving
	serving bool       // Serve owns the listening descriptor and closes it
}

var _ Server = (*EpollServer)(nil)

// NewEpoll returns an epoll server; it fails where epoll is unavailable.
func NewEpoll(cfg Config, handler Handler) (*EpollServer, error) {
	cfg = cfg.withDefaults()
	if cfg.Loops <= 0 {
		cfg.Loops = runtime.GOMAXPROCS(0)
	}
	s := &EpollServer{cfg: cfg, handler: handler, listenFD: -1, conns: newConnSet[*epollConn]()}
	for i := 0; i < cfg.Loops; i++ {
		r, err := newReactor(s, i)
		if err != nil {
			s.closeReactors()
			return nil, err
		}
		s.reactors = append(s.reactors, r)
	}
	return s, nil
}

// Backend implements Server.
func (s *EpollServer) Backend() string { return "epoll" }

// Busy returns the time each reactor spent handling events.
func (s *EpollServer) Busy() []time.Duration {
	busy := make([]time.Duration, len(s.reactors))
	for i, r := range s.reactors {
		busy[i] = time.Duration(r.busy.Load())
	}
	return busy
}

// Listen implements Server: a blocking listening socket, so the accept
// goroutine sleeps in the kernel instead of polling.
func (s *EpollServer) Listen(addr string) (net.Addr, error) {
	fd, bound, err := listenTCP(addr)
	if err != nil {
		return nil, err
	}
	s.listenFD = fd
	return bound, nil
}

// Serve implements Server.
func (s *EpollServer) Serve() error {
	s.mu.Lock()
	listenFD := s.listenFD
	serving := listenFD >= 0 && !s.draining.Load()
	s.serving = serving
	if serving {
		// Counted under the lock a Shutdown takes first, so its wait for
		// the reactors never races this Add.
		s.running.Add(len(s.reactors))
	}
	s.mu.Unlock()
	switch {
	case s.draining.Load() && !serving:
		return ErrServerClosed // Shutdown came first
	case listenFD < 0:
		return errors.New("loop: Serve before Listen")
	case !serving:
		return ErrServerClosed
	}
	defer unix.Close(listenFD)
	for _, r := range s.reactors {
		go func() {
			defer s.running.Done()
			r.run()
		}()
	}
	var backoff acceptBackoff
	for {
		fd, _, err := unix.Accept4(listenFD, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if s.draining.Load() {
				return ErrServerClosed
			}
			if err == unix.EINTR || err == unix.ECONNABORTED || err == unix.EAGAIN {
				continue
			}
			if err == unix.EMFILE || err == unix.ENFILE {
				backoff.failed(s.cfg.Logger, err)
				continue
			}
			return fmt.Errorf("loop: accept: %w", err)
		}
		backoff.succeeded()
		s.start(fd)
	}
}

func (s *EpollServer) start(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	r := s.reactors[s.nextLoop.Add(1)%uint64(len(s.reactors))]
	c := newEpollConn(r, fd, s.nextID.Add(1))
	if !s.conns.add(c, s.draining.Load) {
		_ = unix.Close(fd)
		return
	}
	r.post(c, taskAdd)
}

// Shutdown implements Server.
func (s *EpollServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	if s.listenFD >= 0 {
		// Shutting the socket down wakes the goroutine blocked in accept,
		// which closes the descriptor on its way out.
		_ = unix.Shutdown(s.listenFD, unix.SHUT_RDWR)
		if !s.serving {
			_ = unix.Close(s.listenFD)
		}
		s.listenFD = -1
	}
	s.mu.Unlock()
	s.conns.drain(func(c *epollConn) { c.reactor.post(c, taskStopReading) })
	if err := s.conns.wait(ctx); err != nil {
		return err
	}
	s.closeReactors()
	return nil
}

// CloseAll implements Server.
func (s *EpollServer) CloseAll() {
	for _, c := range s.conns.all() {
		c.closeNow.Store(true)
		c.reactor.post(c, taskClose)
	}
	s.closeReactors()
}

func (s *EpollServer) closeReactors() {
	for _, r := range s.reactors {
		r.stop()
	}
	s.running.Wait()
}

func (s *EpollServer) forget(c *epollConn) { s.conns.forget(c) }

// listenTCP binds a blocking TCP listening socket.
func listenTCP(addr string) (int, net.Addr, error) {
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return -1, nil, err
	}
	family, sockaddr := unix.AF_INET, unix.Sockaddr(nil)
	if ip4 := tcpAddr.IP.To4(); ip4 != nil || tcpAddr.IP == nil {
		sa := &unix.SockaddrInet4{Port: tcpAddr.Port}
		copy(sa.Addr[:], ip4)
		sockaddr = sa
	} else {
		family = unix.AF_INET6
		sa := &unix.SockaddrInet6{Port: tcpAddr.Port}
		copy(sa.Addr[:], tcpAddr.IP.To16())
		sockaddr = sa
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, nil, fmt.Errorf("loop: socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sockaddr); err != nil {
		_ = unix.Close(fd)
		return -1, nil, &net.OpError{Op: "listen", Net: "tcp", Addr: tcpAddr, Err: err}
	}
	if err := unix.Listen(fd, 4096); err != nil {
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("loop: listen: %w", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		_ = unix.Close(fd)
		return -1, nil, err
	}
	return fd, sockaddrToTCP(bound), nil
}

func sockaddrToTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: append(net.IP(nil), a.Addr[:]...), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: append(net.IP(nil), a.Addr[:]...), Port: a.Port}
	}
	return &net.TCPAddr{}
}
