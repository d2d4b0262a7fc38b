package session

import (
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// The handshake of a connection, from accept to Welcome, and what ends it
// early (docs/SECURITY.md, "Connections that do not authenticate").
//
// Three things race to settle it, and the first wins: Hello arrives, the
// deadline passes (HandshakeTimeout from accept, covering a TLS handshake
// as well), or the pre-authentication gate evicts the connection to admit
// a newer one. A connection that lost to the deadline or an eviction is
// closed, with an error it can read when it has a channel to read it on:
// a TLS connection still in its handshake has none, and is closed at once.

// maxHandshakeFrame is the largest frame accepted before Hello is
// answered: a Hello with the longest credentials (wire.MaxAuthUsername +
// wire.MaxAuthPassword) and a client name of up to 4 KiB fits with room
// to spare. It is far below the base read buffer, so a peer that has not
// authenticated never takes large-frame memory, whatever max_frame allows
// afterwards.
const maxHandshakeFrame = 8 << 10

// The states of a handshakeGuard.
const (
	handshakePending int32 = iota
	handshakeDone          // Hello won: the session answers it
	handshakeExpired       // the deadline won
	handshakeEvicted       // the gate evicted the connection
)

// handshakeGuard settles a connection's handshake once.
type handshakeGuard struct {
	state   atomic.Int32
	conn    loop.Conn
	cfg     *Config
	timer   *time.Timer
	started time.Time
}

// newHandshakeGuard arms the deadline of conn's handshake.
func newHandshakeGuard(conn loop.Conn, cfg *Config) *handshakeGuard {
	g := &handshakeGuard{conn: conn, cfg: cfg, started: time.Now()}
	g.timer = time.AfterFunc(cfg.HandshakeTimeout, g.expire)
	return g
}

// hello claims the handshake for a Hello that arrived; false means the
// deadline or an eviction won and the connection is closing.
func (g *handshakeGuard) hello() bool {
	if !g.state.CompareAndSwap(handshakePending, handshakeDone) {
		return false
	}
	g.timer.Stop()
	return true
}

// stop disarms the deadline of a connection that is going anyway.
func (g *handshakeGuard) stop() { g.timer.Stop() }

// expire runs on the timer's goroutine.
func (g *handshakeGuard) expire() {
	if !g.state.CompareAndSwap(handshakePending, handshakeExpired) {
		return
	}
	g.cfg.Audit.Record(security.AuditEvent{Peer: g.conn.RemoteAddr(), Action: "handshake", Outcome: "timeout",
		Detail: "no complete Hello within " + g.cfg.HandshakeTimeout.String()})
	g.end(wire.NewError(wire.CodeTimeout, "no complete Hello within %v; closing", g.cfg.HandshakeTimeout))
}

// evict is the gate's eviction callback. It runs under the gate's lock,
// so it only claims the handshake and leaves the closing to a goroutine.
// A connection whose Hello arrived is authenticating and is not evicted.
func (g *handshakeGuard) evict() bool {
	if !g.state.CompareAndSwap(handshakePending, handshakeEvicted) {
		return false
	}
	g.timer.Stop()
	go func() {
		g.cfg.Audit.Record(security.AuditEvent{Peer: g.conn.RemoteAddr(), Action: "handshake", Outcome: "evicted",
			Detail: "unauthenticated for " + time.Since(g.started).Round(time.Millisecond).String() + ", the oldest at the half-open cap"})
		e := wire.NewError(wire.CodeTooManyConns, "evicted: too many connections waiting to authenticate; this one was the oldest")
		e.RetryAfter = time.Second
		g.end(e)
	}()
	return true
}

// end closes the connection, telling the peer why when it can hear it.
func (g *handshakeGuard) end(e *wire.Error) {
	if secure, ok := g.conn.(loop.TLSConn); ok && secure.Handshaking() {
		_ = g.conn.Close()
		return
	}
	e.Closes = true
	_ = g.conn.Write(wire.Append(nil, 0, e))
	_ = g.conn.Close()
}
