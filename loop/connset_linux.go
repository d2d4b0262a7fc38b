package loop

import (
	"context"
	"sync"
)

// connSet is the live connections of a reactor server and the drain that
// waits for the last of them: what the epoll and io_uring servers share.
// Safe for concurrent use.
type connSet[C comparable] struct {
	mu       sync.Mutex
	conns    map[C]struct{}
	draining bool
	idle     chan struct{} // closed once draining and empty
}

func newConnSet[C comparable]() *connSet[C] {
	return &connSet[C]{conns: map[C]struct{}{}, idle: make(chan struct{})}
}

// add registers c, or reports false once the server drains (refuse is
// also asked, under the same lock, so a stop cannot slip in between); the
// caller closes a refused connection.
func (s *connSet[C]) add(c C, refuse func() bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || refuse() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// forget drops a closed connection; the last one ends a drain.
func (s *connSet[C]) forget(c C) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.closeIdleLocked()
}

// drain refuses new connections from now on and calls stop for each live
// one, under the lock, so none is added or missed meanwhile.
func (s *connSet[C]) drain(stop func(C)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	s.closeIdleLocked()
	for c := range s.conns {
		stop(c)
	}
}

func (s *connSet[C]) closeIdleLocked() {
	if !s.draining || len(s.conns) > 0 {
		return
	}
	select {
	case <-s.idle:
	default:
		close(s.idle)
	}
}

// wait blocks until a drain emptied the set, or ctx ends.
func (s *connSet[C]) wait(ctx context.Context) error {
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// all returns the live connections.
func (s *connSet[C]) all() []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]C, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}
