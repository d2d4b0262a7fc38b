package security

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// expiringAuthorizer writes a config with two token identities ("a"
// expiring at expires, "b" never) and loads it with clock.
func expiringAuthorizer(t *testing.T, expires time.Time, clock func() time.Time) (*Authorizer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auth.toml")
	file := AuthFile{Identities: []IdentityEntry{
		{Name: "a", TokenSHA256: TokenDigest("token-a"), Publish: []string{">"}, Expires: expires},
		{Name: "b", TokenSHA256: TokenDigest("token-b"), Publish: []string{">"}},
	}}
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthorizer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.now = clock
	return a, path
}

func TestExpiredCredentialIsRefused(t *testing.T) {
	expires := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	now := expires.Add(-time.Second)
	a, path := expiringAuthorizer(t, expires, func() time.Time { return now })
	loaded, err := LoadAuthFile(path)
	if err != nil || !loaded.Identities[0].Expires.Equal(expires) || !loaded.Identities[1].Expires.IsZero() {
		t.Fatalf("expiry did not survive the file: %+v, %v", loaded.Identities, err)
	}
	id, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("token-a")}, "")
	if err != nil || !id.Expires().Equal(expires) {
		t.Fatalf("before its expiry: %v, %v", id, err)
	}
	now = expires
	if _, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("token-a")}, ""); !errors.Is(err, ErrCredentialExpired) ||
		!errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("at its expiry: %v, want %v wrapping %v", err, ErrCredentialExpired, ErrNotAuthorized)
	}
	if _, reason := a.Current(id); reason != EndExpired {
		t.Fatalf("an expired session's identity: %q", reason)
	}
	if _, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("token-b")}, ""); err != nil {
		t.Fatalf("an identity without expiry: %v", err)
	}
}

func TestCurrentTellsRotationFromAnEdit(t *testing.T) {
	a, path := expiringAuthorizer(t, time.Time{}, time.Now)
	id, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("token-a")}, "")
	if err != nil {
		t.Fatal(err)
	}
	file, _ := LoadAuthFile(path)
	file.Identities[0].Subscribe = []string{">"} // scopes change: the session goes on
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if now, reason := a.Current(id); reason != "" || !now.Allowed(ScopeSubscribe, "x") {
		t.Fatalf("a scope change: %q", reason)
	}
	file.Identities[0].TokenSHA256 = TokenDigest("token-a2") // a new secret under the same name
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, reason := a.Current(id); reason != EndRotated {
		t.Fatalf("a rotated secret: %q, want %q", reason, EndRotated)
	}
}

// TestTrackEndsSessions: a reload that removes an identity ends its
// tracked sessions at once, an expiry within RevocationInterval, and the
// checking goroutine stops with the last session.
func TestTrackEndsSessions(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	expires := now.Add(time.Hour)
	a, path := expiringAuthorizer(t, expires, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	ended := make(chan string, 4)
	idA, _ := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("token-a")}, "")
	idB, _ := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("token-b")}, "")
	untrackA := a.Track(idA, func(reason string) { ended <- "a " + reason })
	defer untrackA()
	untrackB := a.Track(idB, func(reason string) { ended <- "b " + reason })
	defer untrackB()

	mu.Lock()
	now = expires
	mu.Unlock()
	select {
	case got := <-ended:
		if got != "a expired" {
			t.Fatalf("ended %q", got)
		}
	case <-time.After(time.Second):
		t.Fatal("an expired identity's session was not ended within a second")
	}
	file, _ := LoadAuthFile(path)
	file.Identities = file.Identities[:1]
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ended:
		if got != "b removed" || time.Since(started) > RevocationInterval {
			t.Fatalf("ended %q after %v", got, time.Since(started))
		}
	case <-time.After(time.Second):
		t.Fatal("a removed identity's session was not ended within a second")
	}
	deadline := time.Now().Add(time.Second)
	for {
		a.live.mu.Lock()
		running := a.live.running
		a.live.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checking goroutine outlived the last session")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 500, time.UTC)
	good := map[string]time.Time{
		"720h":                      time.Date(2027, 1, 2, 10, 0, 0, 0, time.UTC),
		"30d":                       time.Date(2027, 1, 2, 10, 0, 0, 0, time.UTC),
		"90m":                       time.Date(2026, 12, 3, 11, 30, 0, 0, time.UTC),
		"2027-01-31T00:00:00Z":      time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC),
		"2027-01-31T02:00:00+02:00": time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC),
	}
	for text, want := range good {
		if got, err := ParseExpiry(text, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseExpiry(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "0s", "-1h", "soon", "2020-01-01T00:00:00Z", "2027-01-31", "x d", "-3d", "1000000d"} {
		if _, err := ParseExpiry(bad, now); !errors.Is(err, ErrBadExpiry) {
			t.Errorf("ParseExpiry(%q): %v, want %v", bad, err, ErrBadExpiry)
		}
	}
}
