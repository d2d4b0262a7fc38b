package loop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/security"
)

// tlsPair is a server TLS configuration and a client one that trusts it.
func tlsPair(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	ca, err := security.NewCertificateAuthority("loop test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(security.LeafSpec{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}},
		&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots}
}

// startStdTLS serves handler over TLS on the std backend.
func startStdTLS(t *testing.T, cfg Config, handler Handler) string {
	t.Helper()
	server := NewStd(cfg, handler)
	bound, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if server.Shutdown(ctx) != nil {
			server.CloseAll()
		}
	})
	return bound.String()
}

// refuseSome refuses the first refusals connections, writing a refusal
// first as a session handler does, and echoes the rest.
type refuseSome struct {
	refusals atomic.Int64
	refused  atomic.Int64 // refusals begun
}

func (h *refuseSome) Open(conn Conn) (Session, error) {
	if h.refusals.Add(-1) >= 0 {
		h.refused.Add(1)
		_ = conn.Write([]byte("refused"))
		return nil, errors.New("refused")
	}
	return echoHandler{}.Open(conn)
}

// TestStdTLSRefusalDoesNotBlockAccept: refusals written to TLS peers that
// never handshake do not hold up the next connection, and each refused
// connection is closed at the handshake deadline.
func TestStdTLSRefusalDoesNotBlockAccept(t *testing.T) {
	serverTLS, clientTLS := tlsPair(t)
	handler := &refuseSome{}
	handler.refusals.Store(3)
	addr := startStdTLS(t, Config{TLS: serverTLS, HandshakeTimeout: 500 * time.Millisecond}, handler)
	var silent []net.Conn
	for range 3 {
		conn := dial(t, addr)
		silent = append(silent, conn)
	}
	for deadline := time.Now().Add(5 * time.Second); handler.refused.Load() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the silent peers were never opened")
		}
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, clientTLS)
	if err != nil {
		t.Fatalf("a TLS client behind three refused silent peers: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 4)
	if _, err := io.ReadFull(conn, echo); err != nil || string(echo) != "ping" {
		t.Fatalf("echo %q, %v", echo, err)
	}
	for _, peer := range silent {
		_ = peer.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.Copy(io.Discard, peer); err != nil {
			t.Fatalf("a refused silent peer was not closed at the handshake deadline: %v", err)
		}
	}
}

// TestStdTLSHandshakeDeadline: a session that sets no deadline of its own
// still sees a silent TLS peer's connection end at HandshakeTimeout.
func TestStdTLSHandshakeDeadline(t *testing.T) {
	serverTLS, _ := tlsPair(t)
	stopped := make(chan error, 1)
	addr := startStdTLS(t, Config{TLS: serverTLS, HandshakeTimeout: 200 * time.Millisecond}, echoHandler{stopped: stopped})
	peer := dial(t, addr)
	select {
	case cause := <-stopped:
		var timeout interface{ Timeout() bool }
		if !errors.As(cause, &timeout) || !timeout.Timeout() {
			t.Fatalf("reading stopped with %v, want a timeout", cause)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a silent TLS peer outlived the handshake deadline")
	}
	_ = peer.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.Copy(io.Discard, peer); err != nil {
		t.Fatalf("the silent peer was not closed: %v", err)
	}
}

// exhaustedListener fails its first accepts as a process out of file
// descriptors does, then accepts for real.
type exhaustedListener struct {
	net.Listener
	failures atomic.Int64
}

func (l *exhaustedListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestStdAcceptSurvivesDescriptorExhaustion: running out of file
// descriptors (a flood of connections can do it) pauses accepting; it
// does not end Serve.
func TestStdAcceptSurvivesDescriptorExhaustion(t *testing.T) {
	server := NewStd(Config{}, echoHandler{})
	if _, err := server.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	listener := &exhaustedListener{Listener: server.listener}
	listener.failures.Store(3)
	server.listener = listener
	served := make(chan error, 1)
	go func() { served <- server.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
	})
	conn := dial(t, listener.Addr().String())
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 4)
	if _, err := io.ReadFull(conn, echo); err != nil {
		select {
		case err := <-served:
			t.Fatalf("Serve returned: %v", err)
		default:
		}
		t.Fatalf("no echo after the descriptors came back: %v", err)
	}
}
