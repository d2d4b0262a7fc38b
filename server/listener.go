package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ironbus/ironbus/loop"
)

// listener is one door of the server: the client wire protocol is the
// first; the MQTT door, the cluster peer link and the console register
// the same way (New binds them, Start serves them, Stop drains them in
// order), each under the same bind rule.
type listener interface {
	// name is the door's name, the key of Addresses ("wire").
	name() string
	// addr is the bound address.
	addr() net.Addr
	// serve accepts until shutdown, then returns nil; any other return
	// is a failure of the door.
	serve() error
	// shutdown stops accepting and waits for every connection to finish
	// what it read, until ctx ends; then it closes the rest and says so.
	shutdown(ctx context.Context) error
	// busy is the time each of the door's reactors spent handling events
	// (nil when it has none).
	busy() []time.Duration
}

// wireListener serves the client wire protocol through a loop backend.
type wireListener struct {
	server loop.Server
	choice loop.Choice
	bound  net.Addr
	tls    bool
}

var _ listener = (*wireListener)(nil)

// listenWire builds the named backend over the wire sessions' handler and
// binds addr.
func listenWire(backend, addr string, network loop.Config, handler loop.Handler) (*wireListener, error) {
	server, choice, err := loop.New(backend, network, handler)
	if err != nil {
		if errors.Is(err, loop.ErrUnsupported) {
			return nil, fmt.Errorf("%w: --loop %s: %w; use --loop auto to take the best backend this system runs", ErrListen, backend, err)
		}
		return nil, fmt.Errorf("%w: --loop: %w", ErrListen, err)
	}
	bound, err := server.Listen(addr)
	if err != nil {
		_ = server.Shutdown(context.Background()) // no connection yet: it stops the reactors at once
		return nil, fmt.Errorf("%w: listening on %s: %w (is another broker or program using the port? pick another with --addr)", ErrListen, addr, err)
	}
	return &wireListener{server: server, choice: choice, bound: bound, tls: network.TLS != nil}, nil
}

func (w *wireListener) name() string          { return "wire" }
func (w *wireListener) addr() net.Addr        { return w.bound }
func (w *wireListener) busy() []time.Duration { return w.server.Busy() }

func (w *wireListener) serve() error {
	if err := w.server.Serve(); err != nil && !errors.Is(err, loop.ErrServerClosed) {
		return err
	}
	return nil
}

func (w *wireListener) shutdown(ctx context.Context) error {
	if err := w.server.Shutdown(ctx); err != nil {
		w.server.CloseAll()
		return err
	}
	return nil
}
