package loop

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Backend names accepted by New.
const (
	BackendAuto  = "auto"
	BackendURing = "uring"
	BackendEpoll = "epoll"
	BackendStd   = "std"
)

// ErrUnsupported means the backend cannot run on this system: another
// operating system, a kernel without the feature, or a sandbox that
// refuses it.
var ErrUnsupported = errors.New("loop: backend not supported here")

// Choice says which backend New built and why, for the startup log.
type Choice struct {
	Backend string
	Reason  string
}

// New builds the named backend. "auto" takes the fastest one this system
// runs and says in Choice.Reason why the others were passed over; a named
// backend that cannot run is an error wrapping ErrUnsupported, never a
// silent fallback, so an operator who asked for io_uring knows they did not
// get it.
func New(name string, cfg Config, handler Handler) (Server, Choice, error) {
	switch name {
	case BackendStd:
		return NewStd(cfg, handler), Choice{Backend: BackendStd, Reason: "requested"}, nil
	case BackendEpoll:
		server, err := newEpollServer(cfg, handler)
		if err != nil {
			return nil, Choice{}, fmt.Errorf("loop: epoll backend: %w", err)
		}
		return server, Choice{Backend: BackendEpoll, Reason: "requested"}, nil
	case BackendURing:
		server, err := newURingServer(cfg, handler)
		if err != nil {
			return nil, Choice{}, fmt.Errorf("loop: io_uring backend: %w", err)
		}
		return server, Choice{Backend: BackendURing, Reason: "requested"}, nil
	case BackendAuto, "":
		return newAuto(cfg, handler)
	}
	return nil, Choice{}, fmt.Errorf("loop: unknown backend %q (want auto, uring, epoll or std)", name)
}

// newAuto tries the backends fastest first (see docs/BENCHMARKS.md for the
// measurements behind the order).
func newAuto(cfg Config, handler Handler) (Server, Choice, error) {
	server, uringErr := newURingServer(cfg, handler)
	if uringErr == nil {
		return server, Choice{Backend: BackendURing, Reason: "io_uring available"}, nil
	}
	server, epollErr := newEpollServer(cfg, handler)
	if epollErr == nil {
		return server, Choice{Backend: BackendEpoll, Reason: "io_uring unavailable: " + uringErr.Error()}, nil
	}
	reason := fmt.Sprintf("io_uring unavailable: %v; epoll unavailable: %v", uringErr, epollErr)
	return NewStd(cfg, handler), Choice{Backend: BackendStd, Reason: reason}, nil
}

// Available reports whether the named backend runs here: nil, or why not
// (wrapping ErrUnsupported).
func Available(name string) error {
	server, _, err := New(name, Config{Loops: 1}, refuseAll{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return server.Shutdown(ctx)
}

// refuseAll is the handler of a server built only to see that it can be.
type refuseAll struct{}

func (refuseAll) Open(Conn) (Session, error) { return nil, errors.New("loop: probe server") }
