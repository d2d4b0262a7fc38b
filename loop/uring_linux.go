package loop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/loop/uring"
	"golang.org/x/sys/unix"
)

// URingServer is the io_uring backend: one reactor per core, each owning
// a ring, a provided-buffer ring for receives and a goroutine locked to its
// OS thread.
//
// Accepting: reactor 0 keeps one multishot ACCEPT on the listener and deals
// the new connections to the reactors in turn. One multishot ACCEPT per
// reactor on the shared listener was the alternative, but the kernel wakes
// accept waiters exclusively and in queue order, so the reactor that armed
// first would take nearly every connection; dealing them out keeps the
// reactors evenly loaded, as the epoll backend does, at the cost of one
// eventfd wake-up per connection handed to another reactor.
type URingServer struct {
	cfg      Config
	handler  Handler
	listenFD int
	reactors []*uringReactor

	nextID      atomic.Uint64
	nextLoop    atomic.Uint64
	draining    atomic.Bool
	stopping    atomic.Bool // CloseAll or a finished drain stops the reactors
	running     sync.WaitGroup
	stopOnce    sync.Once
	stopped     chan struct{} // closed once every reactor has ended
	acceptEnded chan error    // reactor 0's multishot ACCEPT ended for good

	conns *connSet[*uringConn]

	mu      sync.Mutex // guards listenFD and serving
	serving bool       // Serve owns the listening descriptor and closes it
}

var _ Server = (*URingServer)(nil)

func newURingServer(cfg Config, handler Handler) (Server, error) {
	return NewURing(cfg, handler)
}

// uringUsable runs the probe NewURing runs, without building anything.
func uringUsable() error {
	if reason := uringRefusal(uring.Detect()); reason != "" {
		return &unsupportedError{reason: reason}
	}
	return nil
}

// NewURing returns an io_uring server. It probes the kernel first
// (uring.Detect) and fails with an error wrapping ErrUnsupported, saying
// why, where io_uring cannot serve: a seccomp filter, the
// kernel.io_uring_disabled sysctl, an old kernel, a missing opcode or
// capability, RLIMIT_MEMLOCK, or IRONBUS_URING_DISABLE=1.
func NewURing(cfg Config, handler Handler) (*URingServer, error) {
	capabilities := uring.Detect()
	if reason := uringRefusal(capabilities); reason != "" {
		return nil, &unsupportedError{reason: reason}
	}
	cfg = cfg.withDefaults()
	if cfg.Loops <= 0 {
		cfg.Loops = runtime.GOMAXPROCS(0)
	}
	s := &URingServer{cfg: cfg, handler: handler, listenFD: -1, conns: newConnSet[*uringConn](),
		stopped: make(chan struct{}), acceptEnded: make(chan error, 1)}
	// No SINGLE_ISSUER or DEFER_TASKRUN, though the kernel has them:
	// DEFER_TASKRUN posts completions only inside the owner's
	// io_uring_enter and signals no registered eventfd before, so the
	// reactor could not sleep in the netpoller (see parker) and would hold
	// its P inside io_uring_enter instead; SINGLE_ISSUER needs a locked
	// thread, whose hand-offs cost more than they saved. Measured on
	// 64-connection echo (docs/NETWORK.md): 72k round trips/s with both and
	// a blocking enter, 93k locked and parked, 100k unlocked and parked.
	options := uring.Options{CQSize: uringCQEntries}
	for i := 0; i < cfg.Loops; i++ {
		r := newURingReactor(s, i)
		ready := make(chan error, 1)
		s.running.Add(1)
		go r.run(options, ready)
		if err := <-ready; err != nil {
			s.closeReactors()
			return nil, &unsupportedError{reason: fmt.Sprintf("io_uring reactor %d could not start: %v", i, err), cause: err}
		}
		s.reactors = append(s.reactors, r)
	}
	return s, nil
}

// uringRefusal says why the probe's findings do not suffice, or "".
// Multishot ACCEPT and RECV with a buffer ring are required rather than
// emulated: the kernels without them (before 6.0) are where io_uring shows
// no advantage over epoll, which auto then picks.
func uringRefusal(capabilities uring.Capabilities) string {
	if !capabilities.Available {
		return capabilities.Reason
	}
	var missing []string
	for _, need := range []struct {
		name    string
		present bool
	}{
		{"multishot accept", capabilities.MultishotAccept},
		{"multishot recv", capabilities.MultishotRecv},
		{"provided-buffer rings", capabilities.BufferRing},
	} {
		if !need.present {
			missing = append(missing, need.name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("io_uring on kernel %s lacks %s (Linux 6.0+ needed)", capabilities.Kernel, strings.Join(missing, ", "))
}

// Backend implements Server.
func (s *URingServer) Backend() string { return BackendURing }

// Listen implements Server. The socket stays blocking: the ring polls it,
// and a blocking descriptor never turns a ring operation into EAGAIN.
func (s *URingServer) Listen(addr string) (net.Addr, error) {
	fd, bound, err := listenTCP(addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.listenFD = fd
	s.mu.Unlock()
	return bound, nil
}

// Serve implements Server: reactor 0 accepts; Serve waits until that ends.
func (s *URingServer) Serve() error {
	s.mu.Lock()
	listenFD := s.listenFD
	s.serving = listenFD >= 0 && !s.draining.Load()
	serving := s.serving
	s.mu.Unlock()
	switch {
	case s.draining.Load() && !serving:
		return ErrServerClosed // Shutdown came first
	case listenFD < 0:
		return errors.New("loop: Serve before Listen")
	case !serving:
		return ErrServerClosed
	}
	// Closing the descriptor is safe once the ACCEPT ended or the ring is
	// gone: until then the ring holds its own reference to the socket, and
	// nothing cancels by descriptor number.
	defer unix.Close(listenFD)
	s.reactors[0].queue.post(uringTask{kind: taskListen, fd: listenFD})
	select {
	case err := <-s.acceptEnded:
		if err != nil && !s.draining.Load() {
			return err
		}
	case <-s.stopped:
	}
	return ErrServerClosed
}

// start hands an accepted connection to the next reactor; from is the
// accepting reactor, which adds its own share directly.
func (s *URingServer) start(fd int, from *uringReactor) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	r := s.reactors[s.nextLoop.Add(1)%uint64(len(s.reactors))]
	c := newURingConn(r, fd, s.nextID.Add(1))
	if !s.conns.add(c, func() bool { return s.draining.Load() || s.stopping.Load() }) {
		_ = unix.Close(fd)
		return
	}
	if r == from {
		r.add(c)
		return
	}
	r.queue.post(uringTask{conn: c, kind: taskAdd})
}

// Shutdown implements Server.
func (s *URingServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	if s.listenFD >= 0 {
		// Shutting the socket down refuses new connections at once and ends
		// the multishot ACCEPT; reactor 0 also cancels it on its next pass.
		_ = unix.Shutdown(s.listenFD, unix.SHUT_RDWR)
		if !s.serving {
			_ = unix.Close(s.listenFD)
		}
		s.listenFD = -1
	}
	s.reactors[0].queue.wake()
	s.mu.Unlock()
	s.conns.drain(func(c *uringConn) { c.reactor.queue.post(uringTask{conn: c, kind: taskStopReading}) })
	if err := s.conns.wait(ctx); err != nil {
		return err
	}
	s.closeReactors()
	return nil
}

// CloseAll implements Server.
func (s *URingServer) CloseAll() {
	for _, c := range s.conns.all() {
		c.closeNow.Store(true)
		c.reactor.queue.post(uringTask{conn: c, kind: taskClose})
	}
	s.closeReactors()
}

// closeReactors stops every reactor and waits until each has drained its
// ring and released its memory.
func (s *URingServer) closeReactors() {
	s.stopping.Store(true)
	for _, r := range s.reactors {
		r.stop()
	}
	s.running.Wait()
	s.stopOnce.Do(func() { close(s.stopped) })
}

// forget drops a closed connection; the last one ends a drain.
func (s *URingServer) forget(c *uringConn) { s.conns.forget(c) }

// Busy returns the time each reactor spent handling completions.
func (s *URingServer) Busy() []time.Duration {
	busy := make([]time.Duration, len(s.reactors))
	for i, r := range s.reactors {
		busy[i] = time.Duration(r.busy.Load())
	}
	return busy
}
