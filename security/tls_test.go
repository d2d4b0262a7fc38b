package security

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pki is a CA with a server pair and a client pair, written to dir.
type pki struct {
	dir                   string
	ca                    *CertificateAuthority
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
}

func newPKI(t *testing.T, dir string) pki {
	t.Helper()
	ca, err := NewCertificateAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{dir: dir, ca: ca, caFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(p.caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	p.serverCert, p.serverKey = p.issue(t, "server", LeafSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	p.clientCert, p.clientKey = p.issue(t, "client", LeafSpec{CommonName: "admin", Client: true,
		URIs: []*url.URL{{Scheme: "spiffe", Host: "edge", Path: "/device-1"}}, DNSNames: []string{"device-1.edge"}})
	return p
}

func (p pki) issue(t *testing.T, name string, spec LeafSpec) (string, string) {
	t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(spec)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := WritePair(p.dir, name, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// echoServer serves TLS with s and echoes lines; it records the peer
// identity of each connection.
func echoServer(t *testing.T, s *ServerTLS) (string, chan string) {
	t.Helper()
	listener, err := tls.Listen("tcp", "127.0.0.1:0", s.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	identities := make(chan string, 16)
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				secure := conn.(*tls.Conn)
				if secure.Handshake() != nil {
					return
				}
				identity, _ := PeerIdentity(secure.ConnectionState())
				identities <- identity
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return listener.Addr().String(), identities
}

func dialTLS(t *testing.T, addr string, options ClientTLSOptions) (*tls.Conn, error) {
	t.Helper()
	config, err := ClientTLSConfig(options)
	if err != nil {
		t.Fatal(err)
	}
	config.ServerName = "localhost"
	conn, err := tls.Dial("tcp", addr, config)
	if err != nil {
		return nil, err
	}
	// TLS 1.3 reports a refused client certificate on the first read.
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		conn.Close()
		return nil, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "ping\n" {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func TestTLSMutualIdentityAndRefusals(t *testing.T) {
	p := newPKI(t, t.TempDir())
	server, err := NewServerTLS(ServerTLSOptions{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caFile})
	if err != nil {
		t.Fatal(err)
	}
	addr, identities := echoServer(t, server)
	conn, err := dialTLS(t, addr, ClientTLSOptions{CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey})
	if err != nil {
		t.Fatalf("mTLS client refused: %v", err)
	}
	if state := conn.ConnectionState(); state.Version != tls.VersionTLS13 {
		t.Fatalf("negotiated %x, want TLS 1.3", state.Version)
	}
	conn.Close()
	if identity := <-identities; identity != "spiffe://edge/device-1" {
		t.Fatalf("identity %q, want the first URI SAN (never the CN)", identity)
	}
	if _, err := dialTLS(t, addr, ClientTLSOptions{CAFile: p.caFile}); err == nil {
		t.Fatal("a client without a certificate was served under mTLS")
	}
	other := newPKI(t, t.TempDir())
	if _, err := dialTLS(t, addr, ClientTLSOptions{CAFile: other.caFile, CertFile: p.clientCert, KeyFile: p.clientKey}); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
	if _, err := dialTLS(t, addr, ClientTLSOptions{CAFile: p.caFile, CertFile: other.clientCert, KeyFile: other.clientKey}); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	expiredCert, expiredKey := p.issue(t, "expired", LeafSpec{Client: true, DNSNames: []string{"old"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	if _, err := dialTLS(t, addr, ClientTLSOptions{CAFile: p.caFile, CertFile: expiredCert, KeyFile: expiredKey}); err == nil {
		t.Fatal("an expired client certificate was accepted")
	}
	legacy := &tls.Config{MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	if conn, err := tls.Dial("tcp", addr, legacy); err == nil {
		conn.Close()
		t.Fatal("TLS 1.2 was accepted")
	}
}

func TestTLSExpiredServerRefused(t *testing.T) {
	p := newPKI(t, t.TempDir())
	cert, key := p.issue(t, "expired-server", LeafSpec{DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	server, err := NewServerTLS(ServerTLSOptions{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := echoServer(t, server)
	if _, err := dialTLS(t, addr, ClientTLSOptions{CAFile: p.caFile}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired server certificate: %v", err)
	}
}

// TestTLSRotationKeepsConnections: new files are served to new handshakes
// (by Reload and by Watch) while a connection opened before keeps working.
func TestTLSRotationKeepsConnections(t *testing.T) {
	dir := t.TempDir()
	first := newPKI(t, dir)
	server, err := NewServerTLS(ServerTLSOptions{CertFile: first.serverCert, KeyFile: first.serverKey})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := echoServer(t, server)
	kept, err := dialTLS(t, addr, ClientTLSOptions{CAFile: first.caFile})
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	second := newPKI(t, t.TempDir())
	for _, pair := range [][2]string{{second.serverCert, first.serverCert}, {second.serverKey, first.serverKey}} {
		data, _ := os.ReadFile(pair[0])
		if err := os.WriteFile(pair[1], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	ctx, cancel := contextUntil(stop)
	defer cancel()
	go server.Watch(ctx, 20*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if conn, err := dialTLS(t, addr, ClientTLSOptions{CAFile: second.caFile}); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not pick up the new certificate")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	if _, err := dialTLS(t, addr, ClientTLSOptions{CAFile: first.caFile}); err == nil {
		t.Fatal("the old certificate is still served")
	}
	reader := bufio.NewReader(kept)
	if _, err := kept.Write([]byte("still here\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := reader.ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("the connection from before the rotation: %q %v", line, err)
	}
	// A broken file is refused by Reload and the current certificate stays.
	if err := os.WriteFile(first.serverCert, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := server.Reload(); err == nil {
		t.Fatal("Reload accepted a broken certificate")
	}
	if conn, err := dialTLS(t, addr, ClientTLSOptions{CAFile: second.caFile}); err != nil {
		t.Fatalf("a failed reload took the certificate down: %v", err)
	} else {
		conn.Close()
	}
}

// TestOpenSSLClient uses openssl s_client as an outside client.
func TestOpenSSLClient(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed: the outside-client check is skipped")
	}
	p := newPKI(t, t.TempDir())
	server, err := NewServerTLS(ServerTLSOptions{CertFile: p.serverCert, KeyFile: p.serverKey})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := echoServer(t, server)
	other := newPKI(t, t.TempDir())
	cases := []struct {
		name string
		args []string
		ok   bool
	}{
		{"tls1.3", []string{"-tls1_3", "-CAfile", p.caFile}, true},
		{"tls1.2", []string{"-tls1_2", "-CAfile", p.caFile}, false},
		{"wrong CA", []string{"-tls1_3", "-CAfile", other.caFile}, false},
	}
	for _, c := range cases {
		args := append([]string{"s_client", "-connect", addr, "-servername", "localhost", "-verify_return_error", "-brief"}, c.args...)
		cmd := exec.Command(openssl, args...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if (err == nil) != c.ok {
			t.Errorf("%s: openssl exit %v, want ok=%v\n%s", c.name, err, c.ok, out)
		}
	}
}

func contextUntil(stop chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	return ctx, cancel
}
