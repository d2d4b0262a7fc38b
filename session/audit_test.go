package session

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// waitForAudit polls the audit file until count lines contain want.
func waitForAudit(t *testing.T, path, want string, count int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(path)
		if got = strings.Count(string(data), want); got >= count {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d audit lines hold %s, want %d", got, want, count)
}

// TestAuditTrailUnderABurst: a burst of denied requests from several
// connections, far more than the audit queue holds, is audited whole
// (the requesters wait, not the trail); a failed login names the user it
// tried; a connection that never says Hello is audited when the
// handshake deadline cuts it.
func TestAuditTrailUnderABurst(t *testing.T) {
	dir := t.TempDir()
	authPath := filepath.Join(dir, "auth.toml")
	if err := security.SaveAuthFile(authPath, security.AuthFile{Identities: matrixIdentities}); err != nil {
		t.Fatal(err)
	}
	auth, err := security.NewAuthorizer(authPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(dir, "audit.jsonl")
	audit, err := security.OpenAudit(security.AuditOptions{Path: auditPath, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = audit.Close() })
	addr, _ := testBroker(t, testConfig{session: Config{Auth: auth, Audit: audit, HandshakeTimeout: 300 * time.Millisecond,
		Gate: security.NewGate(security.GateOptions{FailureDelay: time.Millisecond})}})
	ctx := context.Background()
	const connections, each = 8, 100
	var wg sync.WaitGroup
	for range connections {
		c, err := client.Dial(ctx, addr, client.Options{Auth: client.TokenAuth("writer-token")})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := c.Produce(ctx, "audit", client.Record{Payload: []byte("x")}); code(err) != wire.CodePermissionDenied {
					t.Errorf("outside the scope: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitForAudit(t, auditPath, `"outcome":"denied"`, connections*each)
	if _, err := client.Dial(ctx, addr, client.Options{Auth: client.PasswordAuth("mallory", "guess")}); code(err) != wire.CodeNotAuthorized {
		t.Fatalf("an unknown user: %v", err)
	}
	waitForAudit(t, auditPath, `"username":"mallory"`, 1)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitForAudit(t, auditPath, `"action":"handshake","outcome":"timeout"`, 1)
}
