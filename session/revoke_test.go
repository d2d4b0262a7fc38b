package session

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// TestEndedIdentityIsCutWithinASecond: a session whose identity is
// removed, given a new token under its name, or whose credential expires
// while it is connected, is closed within a second (a long poll it is
// waiting in ends with not_authorized), and the same credential is then
// refused as a wrong one; other identities' sessions go on.
func TestEndedIdentityIsCutWithinASecond(t *testing.T) {
	for _, ending := range []string{security.EndRemoved, security.EndRotated, security.EndExpired} {
		t.Run(ending, func(t *testing.T) {
			victim := security.IdentityEntry{Name: "victim", TokenSHA256: security.TokenDigest("victim-token"),
				Subscribe: []string{">"}, Admin: []string{">"}}
			var expires time.Time
			if ending == security.EndExpired {
				expires = time.Now().Add(1500 * time.Millisecond)
				victim.Expires = expires
			}
			bystander := security.IdentityEntry{Name: "bystander", TokenSHA256: security.TokenDigest("bystander-token"), Subscribe: []string{">"}}
			auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
			audit, err := security.OpenAudit(security.AuditOptions{Path: auditPath})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = audit.Close() })
			s := startSecuredAudited(t, security.AuthFile{Identities: []security.IdentityEntry{victim, bystander}}, security.GateOptions{}, audit)
			ctx := context.Background()
			c, err := s.dial(t, client.TokenAuth("victim-token"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			other, err := s.dial(t, client.TokenAuth("bystander-token"))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := c.CreateStream(ctx, "quiet", client.StreamSettings{}); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() {
				_, err := c.Fetch(ctx, "quiet", "g", client.FetchOptions{Wait: 20 * time.Second})
				waited <- err
			}()
			time.Sleep(100 * time.Millisecond) // the long poll is waiting
			started := time.Now()
			switch ending {
			case security.EndRemoved:
				s.rewriteAuth(t, bystander)
			case security.EndRotated:
				victim.TokenSHA256 = security.TokenDigest("victim-token-2")
				s.rewriteAuth(t, victim, bystander)
			case security.EndExpired:
				started = expires
			}
			select {
			case err := <-waited:
				if code(err) != wire.CodeNotAuthorized {
					t.Fatalf("the cut session's long poll ended with %v, want not_authorized", err)
				}
				if late := time.Since(started); late > time.Second {
					t.Fatalf("the session was cut %v after its identity ended", late)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the session of an ended identity is still open")
			}
			if _, err := other.Fetch(ctx, "quiet", "h", client.FetchOptions{}); err != nil {
				t.Fatalf("another identity's session: %v", err)
			}
			if _, err := s.dial(t, client.TokenAuth("victim-token")); code(err) != wire.CodeNotAuthorized {
				t.Fatalf("the ended credential logged in again: %v", err)
			}
			waitForAudit(t, auditPath, `"identity":"victim","action":"session","outcome":"`+ending+`"`, 1)
			if ending == security.EndExpired {
				waitForAudit(t, auditPath, `"action":"auth","outcome":"expired","detail":"token: identity \"victim\" at`, 1)
			}
		})
	}
}

// rewriteAuth saves identities as the auth config and reloads it.
func (s *securedBroker) rewriteAuth(t *testing.T, identities ...security.IdentityEntry) {
	t.Helper()
	if err := security.SaveAuthFile(s.authPath, security.AuthFile{Identities: identities}); err != nil {
		t.Fatal(err)
	}
	if err := s.auth.Reload(); err != nil {
		t.Fatal(err)
	}
}
