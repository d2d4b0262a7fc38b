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

// unsupportedError is ErrUnsupported with the reason, worded for the
// startup log ("kernel.io_uring_disabled=2: ..."): auto's Choice.Reason
// quotes it, so it says why without repeating the sentinel's text.
type unsupportedError struct {
	reason string
	cause  error // the system error behind reason, if any
}

func (e *unsupportedError) Error() string { return e.reason }

func (e *unsupportedError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnsupported}
	}
	return []error{ErrUnsupported, e.cause}
}

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
	if cfg.TLS != nil && name != BackendStd {
		if name != BackendAuto && name != "" && name != BackendEpoll && name != BackendURing {
			return nil, Choice{}, fmt.Errorf("loop: unknown backend %q (want auto, uring, epoll or std)", name)
		}
		return NewStd(cfg, handler), Choice{Backend: BackendStd, Reason: tlsReason(name)}, nil
	}
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

// tlsReason explains, for the startup log, why a TLS listener runs on std
// although another backend was asked for.
func tlsReason(asked string) string {
	if asked == "" {
		asked = BackendAuto
	}
	return fmt.Sprintf("--loop %s asked, but the listener speaks TLS: the std backend serves it because crypto/tls drives a net.Conn "+
		"(kernel TLS in the reactors is the documented future path, docs/NETWORK.md)", asked)
}

// newAuto takes epoll where it runs. io_uring is probed and its state
// reported, but not preferred: measured on the broker's produce path it
// was level with epoll on throughput and 15-30 % behind on ack latency, and
// behind on echo and streaming (docs/NETWORK.md has the numbers and the
// rule). std serves where neither runs.
func newAuto(cfg Config, handler Handler) (Server, Choice, error) {
	uringState := "io_uring runs here but measured no faster (docs/NETWORK.md)"
	if err := uringUsable(); err != nil {
		uringState = "io_uring unavailable: " + err.Error()
	}
	server, epollErr := newEpollServer(cfg, handler)
	if epollErr == nil {
		return server, Choice{Backend: BackendEpoll, Reason: "epoll preferred; " + uringState}, nil
	}
	server, uringErr := newURingServer(cfg, handler)
	if uringErr == nil {
		return server, Choice{Backend: BackendURing, Reason: "epoll unavailable: " + epollErr.Error()}, nil
	}
	reason := fmt.Sprintf("epoll unavailable: %v; io_uring unavailable: %v", epollErr, uringErr)
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

// ReactorMemory is what the named backend holds per reactor besides the
// connections' own buffers, for the RAM budget, with the phrase that
// explains it. auto is costed as the backend it picks where epoll runs.
func ReactorMemory(backend string, readBufferSize int) (perReactor int64, explanation string) {
	switch backend {
	case BackendStd:
		return 0, "none: the std backend reads into each connection's buffer"
	case BackendURing:
		// The provided-buffer ring, at most as much again in bytes that
		// arrived for paused connections, and the SQ and CQ rings.
		return uringReactorBytes, "io_uring: 1 MiB provided buffers + 1 MiB paused-connection bytes + 128 KiB rings per core"
	}
	return int64(readBufferSize), "epoll: one read buffer per core"
}

// uringReactorBytes is the budget line of one io_uring reactor; a test
// checks it covers the reactor's constants.
const uringReactorBytes = 1<<20 + 1<<20 + 128<<10
