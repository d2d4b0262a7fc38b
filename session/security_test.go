package session

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// securedBroker is a broker behind TLS (std backend) with an auth config.
type securedBroker struct {
	addr     string
	dir      string
	ca       *security.CertificateAuthority
	caFile   string
	certFile string
	keyFile  string
	tls      *security.ServerTLS
	auth     *security.Authorizer
	authPath string
	gate     *security.Gate
}

func writeFile(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func startSecured(t testing.TB, identities []security.IdentityEntry, gate security.GateOptions, options ...func(*Config)) *securedBroker {
	t.Helper()
	return startSecuredAudited(t, security.AuthFile{Identities: identities}, gate, nil, options...)
}

func startSecuredAudited(t testing.TB, auth security.AuthFile, gate security.GateOptions, audit *security.AuditLog, options ...func(*Config)) *securedBroker {
	t.Helper()
	s := &securedBroker{dir: t.TempDir()}
	var err error
	if s.ca, err = security.NewCertificateAuthority("test CA", time.Hour); err != nil {
		t.Fatal(err)
	}
	s.caFile = filepath.Join(s.dir, "ca.crt")
	writeFile(t, s.caFile, s.ca.PEM, 0o644)
	certPEM, keyPEM, err := s.ca.Issue(security.LeafSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if s.certFile, s.keyFile, err = security.WritePair(s.dir, "server", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if s.tls, err = security.NewServerTLS(security.ServerTLSOptions{CertFile: s.certFile, KeyFile: s.keyFile, ClientCAFile: s.caFile}); err != nil {
		t.Fatal(err)
	}
	// mTLS is on, so the tests' token clients present a certificate too.
	s.authPath = filepath.Join(s.dir, "auth.toml")
	if err := security.SaveAuthFile(s.authPath, auth); err != nil {
		t.Fatal(err)
	}
	if s.auth, err = security.NewAuthorizer(s.authPath, nil); err != nil {
		t.Fatal(err)
	}
	if gate.FailureDelay == 0 {
		gate.FailureDelay = 5 * time.Millisecond
	}
	s.gate = security.NewGate(gate)
	b, err := broker.Open(broker.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Auth: s.auth, Gate: s.gate, Audit: audit}
	for _, option := range options {
		option(&cfg)
	}
	server, choice, err := loop.New(testBackend(), loop.Config{TLS: s.tls.Config()}, testHandler(t, b, cfg))
	if err != nil || choice.Backend != loop.BackendStd {
		t.Fatalf("a TLS listener: backend %q (%s), %v", choice.Backend, choice.Reason, err)
	}
	bound, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve() }()
	t.Cleanup(func() {
		b.Drain()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			server.CloseAll()
		}
		_ = b.Close()
	})
	s.addr = bound.String()
	return s
}

// clientCert issues a client certificate naming uri.
func (s *securedBroker) clientCert(t testing.TB, name, uri string) (string, string) {
	t.Helper()
	spec := security.LeafSpec{Client: true, CommonName: "admin"}
	if uri != "" {
		parsed, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		spec.URIs = []*url.URL{parsed}
	} else {
		spec.DNSNames = []string{name + ".clients"}
	}
	certPEM, keyPEM, err := s.ca.Issue(spec)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := security.WritePair(s.dir, name, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func (s *securedBroker) dial(t *testing.T, auth client.Auth) (*client.Client, error) {
	t.Helper()
	certFile, keyFile := s.clientCert(t, "anon", "")
	config, err := security.ClientTLSConfig(security.ClientTLSOptions{CAFile: s.caFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.Dial(ctx, s.addr, client.Options{TLS: config, Auth: auth, ClientName: "test"})
}

func code(err error) wire.Code {
	var e *wire.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

var matrixIdentities = []security.IdentityEntry{
	{Name: "writer", TokenSHA256: security.TokenDigest("writer-token"), Publish: []string{"orders.>"}},
	{Name: "reader", TokenSHA256: security.TokenDigest("reader-token"), Subscribe: []string{"orders.>"}},
	{Name: "operator", TokenSHA256: security.TokenDigest("operator-token"), Admin: []string{"orders.>"}},
}

// TestScopeMatrix: each verb × each scope × an allowed and a denied
// stream. A denial fails that request only; the connection goes on.
func TestScopeMatrix(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{})
	ctx := context.Background()
	verbs := map[string]func(c *client.Client, stream string) error{
		"publish": func(c *client.Client, stream string) error {
			_, err := c.Produce(ctx, stream, client.Record{Payload: []byte("x")})
			return err
		},
		"subscribe": func(c *client.Client, stream string) error {
			_, err := c.Fetch(ctx, stream, "g", client.FetchOptions{})
			return err
		},
		"admin": func(c *client.Client, stream string) error {
			_, err := c.ListGroups(ctx, stream, 0)
			return err
		},
	}
	grants := map[string]string{"writer": "publish", "reader": "subscribe", "operator": "admin"}
	// Streams must exist for subscribe and admin to get past the scope
	// check to a real answer.
	writer, err := s.dial(t, client.TokenAuth("writer-token"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"orders.eu"} {
		if _, err := writer.Produce(ctx, stream, client.Record{Payload: []byte("seed")}); err != nil {
			t.Fatal(err)
		}
	}
	writer.Close()
	for identity, granted := range grants {
		c, err := s.dial(t, client.TokenAuth(identity+"-token"))
		if err != nil {
			t.Fatalf("%s: %v", identity, err)
		}
		for verb, call := range verbs {
			for _, stream := range []string{"orders.eu", "audit"} {
				err := call(c, stream)
				allowed := verb == granted && stream == "orders.eu"
				denied := code(err) == wire.CodePermissionDenied
				if allowed && err != nil {
					t.Errorf("%s %s %s: %v, want allowed", identity, verb, stream, err)
				}
				if !allowed && !denied {
					t.Errorf("%s %s %s: %v, want permission_denied", identity, verb, stream, err)
				}
			}
		}
		if _, err := c.Ping(ctx); err != nil {
			t.Errorf("%s: the connection did not survive its denials: %v", identity, err)
		}
		c.Close()
	}
}

// TestAuthFailureIsUniform: every failure reads the same and is
// answered no sooner than the failure delay.
func TestAuthFailureIsUniform(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{LockoutAfter: 4, LockoutBase: time.Minute, FailureDelay: 20 * time.Millisecond})
	var messages []string
	for _, auth := range []client.Auth{client.TokenAuth("wrong"), client.PasswordAuth("writer", "writer-token"),
		client.PasswordAuth("nobody", "pw"), {Mechanism: wire.AuthPassword, Material: []byte{0xff}}} {
		started := time.Now()
		_, err := s.dial(t, auth)
		if code(err) != wire.CodeNotAuthorized {
			t.Fatalf("%+v: %v, want not_authorized", auth, err)
		}
		if elapsed := time.Since(started); elapsed < 20*time.Millisecond {
			t.Errorf("a failure answered after %v, before the failure delay", elapsed)
		}
		var e *wire.Error
		errors.As(err, &e)
		messages = append(messages, e.Message)
	}
	for _, m := range messages[1:] {
		if m != messages[0] {
			t.Fatalf("failures differ: %q", messages)
		}
	}
}

// TestLockoutIsPerAccount: failures lock out the account they tried,
// from that source, even for its right password; another account from
// the same source (loopback here) still gets in.
func TestLockoutIsPerAccount(t *testing.T) {
	alice, err := security.HashPassword("alice-pw", security.MinimumArgon2id)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := security.HashPassword("bob-pw", security.MinimumArgon2id)
	if err != nil {
		t.Fatal(err)
	}
	identities := append([]security.IdentityEntry{{Name: "alice", PasswordHash: alice, Publish: []string{">"}},
		{Name: "bob", PasswordHash: bob, Publish: []string{">"}}}, matrixIdentities...)
	s := startSecured(t, identities, security.GateOptions{LockoutAfter: 3, LockoutBase: time.Minute, FailureDelay: time.Millisecond})
	for range 3 {
		if _, err := s.dial(t, client.PasswordAuth("alice", "guess")); code(err) != wire.CodeNotAuthorized {
			t.Fatalf("a wrong password: %v", err)
		}
	}
	if _, err := s.dial(t, client.PasswordAuth("alice", "alice-pw")); code(err) != wire.CodeNotAuthorized {
		t.Fatalf("a locked-out account authenticated: %v", err)
	}
	for _, auth := range []client.Auth{client.PasswordAuth("bob", "bob-pw"), client.TokenAuth("writer-token")} {
		c, err := s.dial(t, auth)
		if err != nil {
			t.Fatalf("another account from the same source was locked out: %v", err)
		}
		c.Close()
	}
}

func TestMTLSIdentity(t *testing.T) {
	s := startSecured(t, []security.IdentityEntry{{Name: "device", MTLSIdentity: "spiffe://edge/device-1", Publish: []string{">"}}}, security.GateOptions{})
	certFile, keyFile := s.clientCert(t, "device", "spiffe://edge/device-1")
	config, err := security.ClientTLSConfig(security.ClientTLSOptions{CAFile: s.caFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, s.addr, client.Options{TLS: config, Auth: client.MTLSAuth()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Produce(ctx, "telemetry", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	// The same CA but another identity: not in the config.
	if _, err := s.dial(t, client.MTLSAuth()); code(err) != wire.CodeNotAuthorized {
		t.Fatalf("an unknown certificate identity: %v", err)
	}
}

// TestTLSReadInterruptedByContext: an awaited call reads its own answer
// from the TLS connection, and its context ending interrupts that read
// with a deadline. The TLS session must survive it: a record half read
// stays buffered, and the next calls on the connection go on.
func TestTLSReadInterruptedByContext(t *testing.T) {
	s := startSecured(t, []security.IdentityEntry{{Name: "app", TokenSHA256: security.TokenDigest("app-token"),
		Publish: []string{">"}, Subscribe: []string{">"}}}, security.GateOptions{})
	c, err := s.dial(t, client.TokenAuth("app-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Produce(ctx, "events", client.Record{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	start := client.StartPosition{Kind: client.StartLatest}
	if _, err := c.OpenGroup(ctx, "events", "g", client.GroupOptions{Type: client.GroupWork, Start: start}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		_, err := c.Fetch(short, "events", "g", client.FetchOptions{Wait: 2 * time.Second})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("round %d: a Fetch waiting past its context: %v", round, err)
		}
		// Another stream, so the group stays empty and the next Fetch waits.
		if _, err := c.Produce(ctx, "other", client.Record{Payload: []byte("after")}); err != nil || c.Err() != nil {
			t.Fatalf("round %d: Produce after an interrupted read: %v (connection: %v)", round, err, c.Err())
		}
		if _, err := c.Ping(ctx); err != nil {
			t.Fatalf("round %d: Ping: %v", round, err)
		}
	}
}

// TestRemovedIdentityIsCut: a reload that removes an identity ends its
// connections (at the latest at their next request); the others go on.
func TestRemovedIdentityIsCut(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{})
	ctx := context.Background()
	writer, err := s.dial(t, client.TokenAuth("writer-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	reader, err := s.dial(t, client.TokenAuth("reader-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// The stream exists before the reload, so the fetch below is answered.
	if _, err := writer.Produce(ctx, "orders.eu", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := security.SaveAuthFile(s.authPath, security.AuthFile{Identities: matrixIdentities[1:]}); err != nil {
		t.Fatal(err)
	}
	if err := s.auth.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Produce(ctx, "orders.eu", client.Record{Payload: []byte("x")}); code(err) != wire.CodeNotAuthorized {
		t.Fatalf("a removed identity published: %v", err)
	}
	if _, err := reader.Fetch(ctx, "orders.eu", "g", client.FetchOptions{}); err != nil {
		t.Fatalf("the remaining identity: %v", err)
	}
}

func TestPublishQuota(t *testing.T) {
	identities := []security.IdentityEntry{{Name: "slow", TokenSHA256: security.TokenDigest("slow-token"), Publish: []string{">"}, PublishMessagesPerSecond: 5}}
	s := startSecured(t, identities, security.GateOptions{})
	c, err := s.dial(t, client.TokenAuth("slow-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var refused *wire.Error
	for i := range 10 {
		_, err := c.Produce(ctx, "s", client.Record{Payload: []byte("x")})
		if err != nil {
			if !errors.As(err, &refused) || refused.Code != wire.CodeQuotaExceeded {
				t.Fatalf("record %d: %v", i, err)
			}
			if i < 5 {
				t.Fatalf("refused record %d within the burst", i)
			}
			break
		}
	}
	if refused == nil || !refused.Retryable || refused.RetryAfter <= 0 || refused.RetryAfter > time.Second {
		t.Fatalf("quota error %+v, want retryable with a retry-after within a second", refused)
	}
	time.Sleep(refused.RetryAfter)
	if _, err := c.Produce(ctx, "s", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("after the hinted wait: %v", err)
	}
}

// TestCertificateRotationUnderLoad: a producer keeps publishing on one
// TLS connection while the certificate is replaced; nothing fails, and
// new connections get the new certificate.
func TestCertificateRotationUnderLoad(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{})
	c, err := s.dial(t, client.TokenAuth("writer-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int64
	var failure atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := c.Produce(context.Background(), "orders.load", client.Record{Payload: []byte("x")}); err != nil {
				failure.Store(err)
				return
			}
			sent.Add(1)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	certPEM, keyPEM, err := s.ca.Issue(security.LeafSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, CommonName: "rotated"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.certFile, certPEM, 0o644)
	writeFile(t, s.keyFile, keyPEM, 0o600)
	if err := s.tls.Reload(); err != nil {
		t.Fatal(err)
	}
	fresh, err := s.dial(t, client.TokenAuth("reader-token"))
	if err != nil {
		t.Fatalf("a connection after the rotation: %v", err)
	}
	fresh.Close()
	before := sent.Load()
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
	if err, _ := failure.Load().(error); err != nil {
		t.Fatalf("the connection from before the rotation failed: %v", err)
	}
	if sent.Load() <= before {
		t.Fatal("the producer stopped during the rotation")
	}
}

// TestHalfOpenCap: connections that never send Hello cannot hold every
// slot: at the cap the oldest of them is closed to admit a new client.
func TestHalfOpenCap(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{MaxHalfOpen: 2})
	var idle []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		idle = append(idle, conn)
		waitFor(t, "the idle connection to be admitted", func() bool { return s.gate.HalfOpen() == len(idle) })
	}
	c, err := s.dial(t, client.TokenAuth("writer-token"))
	if err != nil {
		t.Fatalf("a client at the half-open cap: %v", err)
	}
	c.Close()
	_ = idle[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, idle[0]); err != nil {
		t.Fatalf("the oldest idle connection was not evicted: %v", err)
	}
	if s.gate.HalfOpen() != 1 {
		t.Fatalf("%d connections half-open, want the younger idle one", s.gate.HalfOpen())
	}
}

// TestAuthOnPlaintextReactors: authentication over a plaintext listener
// (loopback, or --insecure-plaintext-wire) on the backend under test,
// the event-loop reactors included: a good token gets in, a bad one gets
// the uniform refusal and the connection closes.
func TestAuthOnPlaintextReactors(t *testing.T) {
	dir := t.TempDir()
	authPath := filepath.Join(dir, "auth.toml")
	if err := security.SaveAuthFile(authPath, security.AuthFile{Identities: matrixIdentities}); err != nil {
		t.Fatal(err)
	}
	auth, err := security.NewAuthorizer(authPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := testBroker(t, testConfig{session: Config{Auth: auth, Gate: security.NewGate(security.GateOptions{FailureDelay: time.Millisecond})}})
	ctx := context.Background()
	for range 3 {
		if _, err := client.Dial(ctx, addr, client.Options{Auth: client.TokenAuth("nope")}); code(err) != wire.CodeNotAuthorized {
			t.Fatalf("a bad token: %v", err)
		}
	}
	c, err := client.Dial(ctx, addr, client.Options{Auth: client.TokenAuth("writer-token")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Produce(ctx, "orders.eu", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "audit", client.Record{Payload: []byte("x")}); code(err) != wire.CodePermissionDenied {
		t.Fatalf("outside the scope: %v", err)
	}
}

// TestHandshakeFloodSparesAuthenticatedClients: a flood of connections
// that never authenticate fills the half-open cap and is refused beyond
// it, while an authenticated client's requests keep being answered
// promptly.
func TestHandshakeFloodSparesAuthenticatedClients(t *testing.T) {
	s := startSecured(t, matrixIdentities, security.GateOptions{MaxHalfOpen: 8})
	c, err := s.dial(t, client.TokenAuth("writer-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for range 4 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				conn, err := net.Dial("tcp", s.addr)
				if err != nil {
					continue
				}
				_, _ = conn.Write([]byte("\x16\x03\x01garbage")) // a broken ClientHello
				time.Sleep(20 * time.Millisecond)
				conn.Close()
			}
		}()
	}
	var slowest time.Duration
	for range 50 {
		started := time.Now()
		if _, err := c.Produce(ctx, "orders.flood", client.Record{Payload: []byte("x")}); err != nil {
			t.Fatalf("an authenticated client failed during the flood: %v", err)
		}
		slowest = max(slowest, time.Since(started))
	}
	close(stop)
	flood.Wait()
	// A durable produce is a few milliseconds here; a second means the
	// flood starved the client.
	if slowest > time.Second {
		t.Fatalf("slowest produce during the flood: %v", slowest)
	}
	t.Logf("slowest durable produce during the flood: %v", slowest)
}

// TestQuotaHoldsUnderLoad: a pipelined producer sending as fast as it can
// gets no more stored than the quota's burst plus its rate over the run.
func TestQuotaHoldsUnderLoad(t *testing.T) {
	identities := []security.IdentityEntry{{Name: "bulk", TokenSHA256: security.TokenDigest("bulk-token"), Publish: []string{">"}, PublishMessagesPerSecond: 200}}
	s := startSecured(t, identities, security.GateOptions{})
	c, err := s.dial(t, client.TokenAuth("bulk-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	producer := c.NewProducer("bulk", client.ProducerOptions{Window: 64})
	var stored, refused atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for result := range producer.Results() {
			switch {
			case result.Err == nil:
				stored.Add(1)
			case code(result.Err) == wire.CodeQuotaExceeded:
				refused.Add(1)
			default:
				t.Errorf("unexpected error: %v", result.Err)
			}
		}
	}()
	started := time.Now()
	ctx := context.Background()
	for time.Since(started) < time.Second {
		if err := producer.Send(ctx, client.Record{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	_ = producer.Close()
	<-done
	elapsed := time.Since(started).Seconds()
	limit := int64(200 + 200*elapsed + 10)
	if stored.Load() > limit || refused.Load() == 0 {
		t.Fatalf("stored %d (limit %d over %.2fs), refused %d", stored.Load(), limit, elapsed, refused.Load())
	}
	t.Logf("stored %d, refused %d in %.2fs at 200 msg/s", stored.Load(), refused.Load(), elapsed)
}

// TestUnknownUserCostsWhatAWrongPasswordCosts: identities' hashes differ
// in cost; a wrong password for the cheap one, for the costly one and an
// unknown username are all answered no sooner than the costliest check,
// so the answer time says nothing about which usernames exist.
func TestUnknownUserCostsWhatAWrongPasswordCosts(t *testing.T) {
	cheapHash, err := security.HashPassword("alice-pw", security.MinimumArgon2id)
	if err != nil {
		t.Fatal(err)
	}
	costly := security.MinimumArgon2id
	costly.Iterations = 12
	costlyHash, err := security.HashPassword("bob-pw", costly)
	if err != nil {
		t.Fatal(err)
	}
	s := startSecured(t, []security.IdentityEntry{{Name: "alice", PasswordHash: cheapHash, Publish: []string{">"}},
		{Name: "bob", PasswordHash: costlyHash, Publish: []string{">"}}},
		security.GateOptions{LockoutAfter: 1000, FailureDelay: time.Millisecond})
	fastest := func(user string) time.Duration {
		best := time.Hour
		for range 2 {
			started := time.Now()
			if _, err := s.dial(t, client.PasswordAuth(user, "guess")); code(err) != wire.CodeNotAuthorized {
				t.Fatalf("%s with a wrong password: %v", user, err)
			}
			best = min(best, time.Since(started))
		}
		return best
	}
	bob, alice, nobody := fastest("bob"), fastest("alice"), fastest("nobody")
	if alice < bob*8/10 || nobody < bob*8/10 {
		t.Fatalf("failures answered after: bob (costly hash) %v, alice (cheap hash) %v, unknown user %v", bob, alice, nobody)
	}
}
