package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// minHealthToken is the shortest health token accepted: 128 bits as
// hex, below what a generated token holds, and far above what a guess
// reaches.
const minHealthToken = 32

// healthEndpoints is the running health server, or nothing.
type healthEndpoints struct {
	server *health.Server
	logger *slog.Logger
}

// startHealth binds the health endpoints before the broker opens, so a
// probe sees "503 recovering" while recovery runs instead of a refused
// connection. "" or "off" starts nothing.
func startHealth(cfg Config, logger *slog.Logger) (*healthEndpoints, error) {
	addr := cfg.HealthAddr
	if addr == "" || addr == HealthOff {
		return &healthEndpoints{logger: logger}, nil
	}
	options := health.Options{Logger: logger, AllowedHosts: cfg.HealthHosts}
	if cfg.HealthTokenFile != "" {
		token, err := security.ReadSecretLine(cfg.HealthTokenFile)
		if err != nil {
			return nil, securityFileError("--health-token-file", err)
		}
		if len(token) < minHealthToken {
			return nil, fmt.Errorf("%w: --health-token-file %s: the token has %d bytes, want at least %d (`ironbus token create` makes one)",
				ErrSecurityFile, cfg.HealthTokenFile, len(token), minHealthToken)
		}
		options.Token = string(token)
	}
	server, err := health.Listen(addr, options)
	if err != nil {
		return nil, fmt.Errorf("%w: --health-addr %s: %w (is another broker using it? pick another port, or pass --health-addr off)", ErrListen, addr, err)
	}
	logger.Info("health endpoints listening", "health_addr", server.Addr(), "token", cfg.HealthTokenFile != "")
	return &healthEndpoints{server: server, logger: logger}, nil
}

func (h *healthEndpoints) addr() string {
	if h.server == nil {
		return ""
	}
	return h.server.Addr()
}

// attach hands the open broker to the endpoints: /readyz turns 200, and
// /healthz also makes a handshake with the broker through the wire
// listener (a reactor that accepts, reads and answers). With TLS on, the
// probe speaks TLS to the listener (its own: it checks no certificate and
// sends no secret).
func (h *healthEndpoints) attach(b *broker.Broker, wireAddr string, tlsOn bool) {
	if h.server == nil {
		return
	}
	var probeTLS *tls.Config
	if tlsOn {
		probeTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} // our own listener; nothing secret is sent
	}
	h.server.AddProbe(health.Probe{Name: "network loop", Check: func(ctx context.Context) error {
		return handshakeProbe(ctx, wireAddr, probeTLS)
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
func (h *healthEndpoints) close(ctx context.Context) {
	if h.server == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := h.server.Close(ctx); err != nil {
		h.logger.Warn("health endpoints did not stop cleanly", "error", err.Error())
	}
}
