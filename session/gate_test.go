package session

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Connections that never authenticate: silent ones, ones that stall in
// the TLS handshake, and ones that announce a large Hello
// (docs/SECURITY.md, "Connections that do not authenticate").

// holdSilent opens n TCP connections to addr that send nothing, kept open
// until the test ends.
func holdSilent(t testing.TB, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("silent connection %d: %v", len(conns), err)
		}
		conns = append(conns, conn)
	}
	t.Cleanup(func() {
		for _, conn := range conns {
			_ = conn.Close()
		}
	})
	return conns
}

// holdSilentSettled is holdSilent, returning once the broker has taken
// in every one of them: each is either waiting to authenticate or was
// evicted (closed), so the next connection arrives after all of them.
func holdSilentSettled(t *testing.T, addr string, n int, gate *security.Gate) {
	t.Helper()
	var closed atomic.Int64
	for _, conn := range holdSilent(t, addr, n) {
		go func() {
			_, _ = io.Copy(io.Discard, conn)
			closed.Add(1)
		}()
	}
	waitFor(t, "the broker to take in every silent connection", func() bool { return int(closed.Load())+gate.HalfOpen() == n })
}

// publishWithin dials with auth, publishes one record and reports how long
// it took, failing the test when that is more than limit.
func publishWithin(t *testing.T, limit time.Duration, dial func(context.Context) (*client.Client, error)) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	started := time.Now()
	c, err := dial(ctx)
	if err != nil {
		t.Fatalf("dialing after %v: %v", time.Since(started), err)
	}
	defer c.Close()
	if _, err := c.Produce(ctx, "orders.silent", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("publishing after %v: %v", time.Since(started), err)
	}
	return time.Since(started)
}

// tlsDialer dials s with a client certificate and the writer's token.
func (s *securedBroker) tlsDialer(t testing.TB) func(context.Context) (*client.Client, error) {
	t.Helper()
	certFile, keyFile := s.clientCert(t, "silent-test", "")
	config, err := security.ClientTLSConfig(security.ClientTLSOptions{CAFile: s.caFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, s.addr, client.Options{TLS: config, Auth: client.TokenAuth("writer-token"), ClientName: "test"})
	}
}

// TestSilentConnectionsDoNotStallTLS: while 100 connections from the
// client's own address (loopback) send nothing, a new TLS client still
// connects, authenticates and publishes within 3 s: silent connections
// are evicted, oldest first, to admit it, and no refusal is written where
// it would hold up accepting.
func TestSilentConnectionsDoNotStallTLS(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{})
	holdSilentSettled(t, s.addr, 100, s.gate)
	took := publishWithin(t, 3*time.Second, s.tlsDialer(t))
	if open, limit := s.gate.HalfOpen(), s.gate.Options().MaxHalfOpenPerSource; open > limit {
		t.Fatalf("%d connections from one source wait to authenticate; the per-source cap is %d", open, limit)
	}
	t.Logf("TLS publish with 100 silent connections open: %v", took)
}

// TestSilentConnectionsDoNotStallPlaintext is the same on the backend
// under test, without TLS.
func TestSilentConnectionsDoNotStallPlaintext(t *testing.T) {
	auth := testAuthorizer(t)
	gate := security.NewGate(security.GateOptions{FailureDelay: time.Millisecond})
	addr, _ := testBroker(t, testConfig{session: Config{Auth: auth, Gate: gate}})
	holdSilentSettled(t, addr, 100, gate)
	took := publishWithin(t, 3*time.Second, func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, addr, client.Options{Auth: client.TokenAuth("writer-token")})
	})
	t.Logf("plaintext publish with 100 silent connections open: %v", took)
}

func testAuthorizer(t *testing.T) *security.Authorizer {
	t.Helper()
	path := t.TempDir() + "/auth.toml"
	if err := security.SaveAuthFile(path, security.AuthFile{Identities: matrixIdentities}); err != nil {
		t.Fatal(err)
	}
	auth, err := security.NewAuthorizer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

// TestHandshakeDeadlineEndsSilentTLS: a connection that never starts its
// TLS handshake, and one that stops in the middle of it, are both closed
// at the handshake deadline, and their half-open slots come back.
func TestHandshakeDeadlineEndsSilentTLS(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{}, func(cfg *Config) { cfg.HandshakeTimeout = 300 * time.Millisecond })
	silent := holdSilent(t, s.addr, 1)[0]
	stalled := holdSilent(t, s.addr, 1)[0]
	// The first bytes of a ClientHello record, and no more.
	if _, err := stalled.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}); err != nil {
		t.Fatal(err)
	}
	for name, conn := range map[string]net.Conn{"silent": silent, "stalled": stalled} {
		started := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		var timeout net.Error
		if errors.As(err, &timeout) && timeout.Timeout() {
			t.Fatalf("the %s connection was still open 5 s later", name)
		}
		t.Logf("%s connection closed after %v more", name, time.Since(started))
	}
	waitFor(t, "the half-open slots to come back", func() bool { return s.gate.HalfOpen() == 0 })
}

// TestEvictedConnectionIsClosed: at the per-source cap, the oldest
// unauthenticated connection of that source is closed to admit a new one;
// a connection that authenticated is never evicted.
func TestEvictedConnectionIsClosed(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{MaxHalfOpenPerSource: 2})
	dial := s.tlsDialer(t)
	established, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer established.Close()
	first := holdSilent(t, s.addr, 1)[0]
	waitFor(t, "the first silent connection to be admitted", func() bool { return s.gate.HalfOpen() == 1 })
	holdSilent(t, s.addr, 1)
	waitFor(t, "the second silent connection to be admitted", func() bool { return s.gate.HalfOpen() == 2 })
	publishWithin(t, 3*time.Second, dial)
	_ = first.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.Copy(io.Discard, first); err != nil {
		t.Fatalf("the oldest silent connection was not closed: %v", err)
	}
	if _, err := established.Produce(context.Background(), "orders.silent", client.Record{Payload: []byte("y")}); err != nil {
		t.Fatalf("the authenticated connection suffered: %v", err)
	}
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bigHelloHeader is the envelope of a Hello claiming length bytes, and the
// first 64 KiB of its body: enough to fill a connection's base read buffer,
// so a broker that believed the length would lease the rest.
func bigHelloHeader(length uint32) []byte {
	out := binary.LittleEndian.AppendUint32(nil, length)
	out = append(out, byte(wire.TypeHello), 0, 0, 0, 0)
	return append(out, make([]byte, 64<<10)...)
}

// TestHelloLargerThanHandshakeNeedsIsRefused: before its Hello is answered
// a peer may send no frame larger than a Hello needs; a larger one is
// answered frame_too_large at once, whatever max_frame allows afterwards.
func TestHelloLargerThanHandshakeNeedsIsRefused(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	if _, err := c.conn.Write(bigHelloHeader(1 << 20)); err != nil {
		t.Fatal(err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	frame := c.read()
	e, err := wire.DecodeError(frame.Body)
	if frame.Type != wire.TypeError || err != nil || e.Code != wire.CodeFrameTooLarge || !e.Closes {
		t.Fatalf("a 1 MiB Hello was answered %v %+v (%v)", frame.Type, e, err)
	}
}

// TestUnauthenticatedPeersCannotDrainLargeFrames: peers that announce
// large Hellos and never finish them take none of the large-frame pool, so
// an authenticated 1 MiB produce goes straight in.
func TestUnauthenticatedPeersCannotDrainLargeFrames(t *testing.T) {
	auth := testAuthorizer(t)
	gate := security.NewGate(security.GateOptions{FailureDelay: time.Millisecond})
	pool, err := arena.NewSharedPool(arena.NewBudget(), "large frames", "--large-frame-pool", 2*(1<<20+64<<10))
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := testBrokerOn(t, testConfig{session: Config{Auth: auth, Gate: gate}}, loop.Config{LargeFrames: pool})
	for range 4 {
		attacker := holdSilent(t, addr, 1)[0]
		if _, err := attacker.Write(bigHelloHeader(1 << 20)); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Logf("attacker write: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond) // let the broker read what they sent
	if pool.InUse() != 0 {
		t.Fatalf("unauthenticated peers hold %d bytes of the large-frame pool", pool.InUse())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Auth: client.TokenAuth("writer-token")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, 1<<20)
	_, _ = rand.Read(payload) // incompressible: the frame is as large as the record
	started := time.Now()
	if _, err := c.Produce(ctx, "orders.large", client.Record{Payload: payload}); err != nil {
		t.Fatalf("a 1 MiB produce after %v: %v", time.Since(started), err)
	}
	t.Logf("1 MiB produce with four large Hellos pending: %v", time.Since(started))
}
