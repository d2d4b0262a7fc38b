package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/health"
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
// With TLS on, the probe speaks TLS to the broker's listener (its own, on
// the bound address: it checks no certificate and sends no secret).
func (h *healthEndpoints) attach(b *broker.Broker, server loop.Server, brokerAddr string, tlsOn bool) {
	b.ObserveReactors(server.Busy)
	if h.server == nil {
		return
	}
	var probeTLS *tls.Config
	if tlsOn {
		probeTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} // our own listener; nothing secret is sent
	}
	h.server.AddProbe(health.Probe{Name: "network loop", Check: func(ctx context.Context) error {
		return handshakeProbe(ctx, brokerAddr, probeTLS)
	}})
	h.server.Attach(b)
}

// handshakeProbe proves the network loop accepts, reads and answers: it
// sends a Ping before any Hello, which a broker answers at once with a
// handshake error. It needs no credentials, so a broker with
// authentication does not count it as a failed login (which would lock
// loopback out), and any answer — that error, a refusal, a TLS alert
// from a listener that wants a client certificate — proves a reactor
// is alive. Only silence until the deadline, or no listener, fails it.
func handshakeProbe(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if tlsConfig != nil {
		conn = tls.Client(conn, tlsConfig)
	}
	if _, err := conn.Write(wire.Append(nil, 1, &wire.Ping{})); err != nil {
		return probeAnswer(err)
	}
	_, err = conn.Read(make([]byte, 64))
	return probeAnswer(err)
}

// probeAnswer maps what the probe's read or write ended with: bytes, a
// close or a TLS alert are answers; a timeout is a loop that did not
// answer.
func probeAnswer(err error) error {
	var timeout net.Error
	if err != nil && errors.As(err, &timeout) && timeout.Timeout() {
		return fmt.Errorf("the broker accepted the connection but did not answer within 2s: %w", err)
	}
	return nil
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
