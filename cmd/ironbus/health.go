package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/wire"
)

// defaultHealthAddr is where serve answers /healthz, /readyz, /metrics
// and /admin, and where report, server and top look for them.
const defaultHealthAddr = "127.0.0.1:7778"

// healthOff disables the endpoints.
const healthOff = "off"

type healthOptions struct {
	addr string
}

func addHealthFlags(cmd *cobra.Command, opts *healthOptions) {
	cmd.Flags().StringVar(&opts.addr, "health-addr", defaultHealthAddr,
		"serve /healthz, /readyz, /metrics and /admin on this loopback host:port (port 0 picks one; off disables)")
}

// healthEndpoints is the running health server of serve, or nothing.
type healthEndpoints struct {
	server *health.Server
	logger *slog.Logger
}

// startHealth binds the health endpoints before the broker opens, so a
// probe sees "503 recovering" while recovery runs instead of a refused
// connection. An empty address (dev) or "off" starts nothing.
func startHealth(opts healthOptions, logger *slog.Logger) (*healthEndpoints, error) {
	if opts.addr == "" || opts.addr == healthOff {
		return &healthEndpoints{logger: logger}, nil
	}
	if err := health.CheckAddress(opts.addr); err != nil {
		if errors.Is(err, health.ErrNotLoopback) {
			return nil, exitErrorf(exitUsage, "--health-addr %s is not a loopback address: the endpoints have no TLS or authentication yet; "+
				"bind 127.0.0.1 (and scrape through a local agent or an SSH tunnel), or pass --health-addr off", opts.addr)
		}
		return nil, exitErrorf(exitUsage, "--health-addr: %w", err)
	}
	server, err := health.Listen(opts.addr, health.Options{Logger: logger})
	if err != nil {
		return nil, exitErrorf(exitUsage, "--health-addr %s: %w (is another broker using it? pick another port, or pass --health-addr off)", opts.addr, err)
	}
	logger.Info("health endpoints listening", "health_addr", server.Addr())
	return &healthEndpoints{server: server, logger: logger}, nil
}

// attach hands the open broker and its network loop to the endpoints:
// /readyz turns 200, and /healthz also makes a handshake with the broker
// through the loop (a reactor that accepts, reads and answers).
func (h *healthEndpoints) attach(b *broker.Broker, server loop.Server, brokerAddr string) {
	b.ObserveReactors(server.Busy)
	if h.server == nil {
		return
	}
	h.server.AddProbe(health.Probe{Name: "network loop", Check: func(ctx context.Context) error {
		return handshakeProbe(ctx, brokerAddr)
	}})
	h.server.Attach(b)
}

// handshakeProbe connects to the broker and completes the handshake. An
// answer that refuses the connection (limit reached, draining) still
// proves the reactor that sent it is alive.
func handshakeProbe(ctx context.Context, addr string) error {
	c, err := client.Dial(ctx, addr, client.Options{DialTimeout: 2 * time.Second})
	var refused *wire.Error
	if errors.As(err, &refused) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.Close()
}

// close stops the endpoints after the broker closed.
func (h *healthEndpoints) close() {
	if h.server == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.server.Close(ctx); err != nil {
		h.logger.Warn("health endpoints did not stop cleanly", "error", err.Error())
	}
}
