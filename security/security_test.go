package security

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// cheap keeps Argon2id as fast as the floor allows in tests.
var cheap = MinimumArgon2id

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{">", "orders", true}, {">", "a.b.c", true},
		{"orders", "orders", true}, {"orders", "orders.eu", false},
		{"orders.*", "orders.eu", true}, {"orders.*", "orders", false}, {"orders.*", "orders.eu.x", false},
		{"orders.>", "orders.eu.x", true}, {"orders.>", "orders", false},
		{"*.eu", "orders.eu", true}, {"*.eu", "orders.us", false},
		{"*", "orders", true}, {"*", "a.b", false},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q matches %q = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
	for _, bad := range []string{"", "a.>.b", "ord*", "a.b>"} {
		if _, err := ParsePattern(bad); !errors.Is(err, ErrInvalidPattern) {
			t.Errorf("ParsePattern(%q) = %v, want ErrInvalidPattern", bad, err)
		}
	}
}

func TestTokenAndPassword(t *testing.T) {
	token, err := NewToken()
	if err != nil || !strings.HasPrefix(token, tokenPrefix) || len(token) < 40 {
		t.Fatalf("NewToken = %q, %v", token, err)
	}
	other, _ := NewToken()
	if other == token {
		t.Fatal("two tokens are equal")
	}
	hash, err := HashPassword("correct horse", cheap)
	if err != nil || !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("HashPassword = %q, %v", hash, err)
	}
	parsed, err := parsePasswordHash(hash)
	if err != nil {
		t.Fatal(err)
	}
	if !parsed.matches([]byte("correct horse")) || parsed.matches([]byte("wrong")) {
		t.Fatal("password verification is wrong")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5"} {
		if _, err := parsePasswordHash(bad); !errors.Is(err, ErrMalformedHash) {
			t.Errorf("parsePasswordHash(%q) = %v", bad, err)
		}
	}
}

func writeSecret(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSecretFileModes(t *testing.T) {
	dir := t.TempDir()
	path := writeSecret(t, dir, "token", "abc\n")
	if line, err := ReadSecretLine(path); err != nil || string(line) != "abc" {
		t.Fatalf("ReadSecretLine = %q, %v", line, err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSecretLine(path)
	if !errors.Is(err, ErrSecretFileExposed) || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("a group-readable secret: %v", err)
	}
}

func TestAuthFileStrictAndRoundTrip(t *testing.T) {
	if _, err := ParseAuthFile([]byte("[[identity]]\nname = \"a\"\ntoken_sha256 = \"" + TokenDigest("t") + "\"\npublsh = [\">\"]\n")); !errors.Is(err, ErrAuthConfig) || !strings.Contains(err.Error(), "publsh") {
		t.Fatalf("an unknown key: %v", err)
	}
	if _, err := ParseAuthFile([]byte("[[identity]]\nname = \"a\"\n")); !errors.Is(err, ErrAuthConfig) {
		t.Fatalf("no credential: %v", err)
	}
	path := filepath.Join(t.TempDir(), "auth.toml")
	hash, _ := HashPassword("pw", cheap)
	file := AuthFile{Identities: []IdentityEntry{
		{Name: "writer", TokenSHA256: TokenDigest("tok"), Publish: []string{"orders.>"}, PublishMessagesPerSecond: 10},
		{Name: "reader", PasswordHash: hash, Subscribe: []string{">"}},
	}}
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("saved with mode %v", info.Mode())
	}
	loaded, err := LoadAuthFile(path)
	if err != nil || len(loaded.Identities) != 2 || loaded.Identities[0].PublishMessagesPerSecond != 10 {
		t.Fatalf("LoadAuthFile = %+v, %v", loaded, err)
	}
}

func TestAuthenticate(t *testing.T) {
	dir := t.TempDir()
	hash, _ := HashPassword("pw", cheap)
	path := filepath.Join(dir, "auth.toml")
	if err := SaveAuthFile(path, AuthFile{Identities: []IdentityEntry{
		{Name: "writer", TokenSHA256: TokenDigest("tok"), Publish: []string{"orders.>"}},
		{Name: "reader", PasswordHash: hash, Subscribe: []string{">"}},
		{Name: "device", MTLSIdentity: "spiffe://edge/device-1", Admin: []string{">"}},
	}}); err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthorizer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthToken, Token: []byte("tok")}, "")
	if err != nil || id.Name != "writer" || !id.Allowed(ScopePublish, "orders.eu") || id.Allowed(ScopeSubscribe, "orders.eu") || id.Allowed(ScopePublish, "audit") {
		t.Fatalf("token: %+v %v", id, err)
	}
	if id, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthPassword, Username: "reader", Password: []byte("pw")}, ""); err != nil || id.Name != "reader" {
		t.Fatalf("password: %v", err)
	}
	if id, err := a.Authenticate(wire.Credentials{Mechanism: wire.AuthMTLS}, "spiffe://edge/device-1"); err != nil || id.Name != "device" || id.Allowed(ScopePublish, "x") {
		t.Fatalf("mtls: %v", err)
	}
	for _, bad := range []wire.Credentials{
		{Mechanism: wire.AuthToken, Token: []byte("nope")},
		{Mechanism: wire.AuthPassword, Username: "reader", Password: []byte("nope")},
		{Mechanism: wire.AuthPassword, Username: "nobody", Password: []byte("pw")},
		{Mechanism: wire.AuthPassword, Username: "writer", Password: []byte("tok")},
		{Mechanism: wire.AuthNone},
	} {
		if _, err := a.Authenticate(bad, ""); !errors.Is(err, ErrNotAuthorized) {
			t.Errorf("%+v: %v, want ErrNotAuthorized", bad, err)
		}
	}
	// A hash below the floor is refused, naming the file and the identity.
	weak := "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5"
	data := "[[identity]]\nname = \"weakling\"\npassword_hash = \"" + weak + "\"\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	err = a.Reload()
	if !errors.Is(err, ErrWeakHash) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"weakling"`) {
		t.Fatalf("a weak hash: %v", err)
	}
	if _, err := HashPassword("pw", Argon2idParams{MemoryKiB: 64, Iterations: 1, Parallelism: 1}); !errors.Is(err, ErrWeakHash) {
		t.Fatalf("hashing below the floor: %v", err)
	}
	// A reload that removes the writer: Current says so.
	if err := SaveAuthFile(path, AuthFile{Identities: []IdentityEntry{{Name: "reader", PasswordHash: hash, Subscribe: []string{"x"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, reason := a.Current(id); reason != EndRemoved {
		t.Fatalf("a removed identity: %q, want %q", reason, EndRemoved)
	}
}

func TestGateLockoutAndRate(t *testing.T) {
	now := time.Unix(1000, 0)
	gate := NewGate(GateOptions{MaxHalfOpen: 2, ConnectionsPerSecond: 1, ConnectionBurst: 3, LockoutAfter: 2,
		LockoutBase: time.Second, LockoutMax: 4 * time.Second, Now: func() time.Time { return now }})
	peer := "10.0.0.1:5000"
	first, err1 := gate.Admit(peer, nil)
	second, err2 := gate.Admit(peer, nil)
	if err1 != nil || err2 != nil {
		t.Fatal("two admissions refused")
	}
	if _, err := gate.Admit("10.0.0.2:1", nil); !errors.Is(err, ErrHalfOpenFull) {
		t.Fatalf("third half-open: %v", err)
	}
	first.Release()
	second.Release()
	third, err := gate.Admit(peer, nil)
	if err != nil {
		t.Fatal("burst of 3 refused")
	}
	third.Release()
	if _, err := gate.Admit(peer, nil); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("fourth in a second: %v", err)
	}
	const alice = "password:alice"
	for round, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		gate.Failed(peer, alice)
		if gate.LockedOut(peer, alice) {
			t.Fatalf("round %d: locked out after one failure", round)
		}
		gate.Failed(peer, alice)
		if !gate.LockedOut(peer, alice) {
			t.Fatalf("round %d: not locked out", round)
		}
		if gate.LockedOut(peer, "password:bob") || gate.LockedOut("10.0.0.9:1", alice) {
			t.Fatalf("round %d: the lockout reaches another account or another source", round)
		}
		now = now.Add(want - time.Millisecond)
		if !gate.LockedOut(peer, alice) {
			t.Fatalf("round %d: lockout shorter than %v", round, want)
		}
		now = now.Add(time.Millisecond)
		if gate.LockedOut(peer, alice) {
			t.Fatalf("round %d: lockout longer than %v", round, want)
		}
	}
	// A flood of failures for made-up accounts does not push a live
	// lockout out of the bounded table.
	gate.Failed(peer, alice)
	gate.Failed(peer, alice)
	for i := range 2 * DefaultSources {
		gate.Failed(peer, fmt.Sprintf("password:made-up-%d", i))
	}
	if !gate.LockedOut(peer, alice) {
		t.Fatal("a flood of made-up accounts evicted a lockout")
	}
	for range 10 {
		admission, err := gate.Admit("127.0.0.1:9", nil)
		if err != nil {
			t.Fatalf("loopback is rate-limited by default: %v", err)
		}
		admission.Release()
	}
}

func TestQuota(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuotaBucket(func() time.Time { return now })
	q.setRates(QuotaLimits{MessagesPerSecond: 2, BytesPerSecond: 100})
	if q.Take(10) != 0 || q.Take(10) != 0 {
		t.Fatal("the first two records were refused")
	}
	wait := q.Take(10)
	if wait < 400*time.Millisecond || wait > 600*time.Millisecond {
		t.Fatalf("retry after %v, want about 500ms", wait)
	}
	now = now.Add(wait)
	if q.Take(10) != 0 {
		t.Fatal("refused after the hinted wait")
	}
}

func TestAuditRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := OpenAudit(AuditOptions{Path: path, MaxBytes: 300, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		audit.Record(AuditEvent{Peer: "10.0.0.1:1", Identity: "writer", Action: "auth", Outcome: "ok", Detail: "token"})
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + ".1", path + ".2"} {
		data, err := os.ReadFile(name)
		if err != nil || !strings.Contains(string(data), `"action":"auth"`) || len(data) > 300 {
			t.Fatalf("%s: %d bytes, %v", name, len(data), err)
		}
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Fatal("more rotated files than Keep")
	}
}

func FuzzParseAuthFile(f *testing.F) {
	f.Add([]byte("[[identity]]\nname = \"a\"\ntoken_sha256 = \"" + TokenDigest("t") + "\"\npublish = [\"orders.>\"]\n"))
	f.Add([]byte("[[identity]]\nname = \"b\"\npassword_hash = \"$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5\"\n"))
	f.Add([]byte("x = 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseAuthFile(data); err != nil && !errors.Is(err, ErrAuthConfig) && !errors.Is(err, ErrMalformedHash) && !errors.Is(err, ErrInvalidPattern) {
			t.Fatalf("untyped error: %v", err)
		}
	})
}

func FuzzParsePasswordHash(f *testing.F) {
	f.Add("$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5")
	f.Add("$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5")
	f.Add("$argon2id$v=19$m=-1,t=1,p=1$$")
	f.Fuzz(func(t *testing.T, text string) {
		h, err := parsePasswordHash(text)
		if err != nil {
			if !errors.Is(err, ErrMalformedHash) && !errors.Is(err, ErrWeakHash) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if h.params.MemoryKiB > maxMemoryKiB || h.params.Iterations > maxIterations || CheckArgon2id(h.params) != nil {
			t.Fatalf("out-of-bounds parameters accepted: %+v", h.params)
		}
	})
}

// TestQuotaHintRoundsUp: the hint travels in whole milliseconds, so it is
// rounded up; a client that waits exactly as told is then let through. A
// rate of 3 per second needs 333.33 ms: truncated to 333 ms the retry was
// refused again.
func TestQuotaHintRoundsUp(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuotaBucket(func() time.Time { return now })
	q.setRates(QuotaLimits{MessagesPerSecond: 3})
	for range 3 {
		if q.Take(1) != 0 {
			t.Fatal("a record within the burst was refused")
		}
	}
	wait := q.Take(1)
	if wait != 334*time.Millisecond {
		t.Fatalf("retry after %v, want 334ms (333.33 rounded up to whole milliseconds)", wait)
	}
	now = now.Add(wait)
	if again := q.Take(1); again != 0 {
		t.Fatalf("refused after the hinted wait; asked to wait %v more", again)
	}
}

// TestAuditNeverDropsAuthOrAdminEvents: a burst far larger than the queue
// loses no auth or admin event: the recorders wait for room instead.
func TestAuditNeverDropsAuthOrAdminEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := OpenAudit(AuditOptions{Path: path, Queue: 4})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 2500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				action := "auth"
				if i%2 == 1 {
					action = "admin.stream"
				}
				audit.Record(AuditEvent{Peer: fmt.Sprintf("10.0.0.%d:1", w), Action: action, Outcome: "failed", Username: "alice"})
			}
		}()
	}
	wg.Wait()
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != writers*each || audit.Dropped() != 0 {
		t.Fatalf("%d of %d events written, %d dropped", lines, writers*each, audit.Dropped())
	}
	if !strings.Contains(string(data), `"username":"alice"`) {
		t.Fatal("the username a failed login tried is not recorded")
	}
}

// TestAuditCountsWhatItDrops: events that are neither auth nor admin may
// be dropped under a flood, and every one dropped is counted; TryRecord
// leaves an auth event it cannot queue to the caller.
func TestAuditCountsWhatItDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := OpenAudit(AuditOptions{Path: path, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	const total = 20000
	for range total {
		audit.Record(AuditEvent{Peer: "10.0.0.1:1", Action: "connect", Outcome: "refused"})
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := uint64(strings.Count(string(data), "\n")); lines+audit.Dropped() != total {
		t.Fatalf("%d written + %d dropped != %d", lines, audit.Dropped(), total)
	}
	if !(AuditEvent{Action: "auth"}).Essential() || !(AuditEvent{Action: "admin.group"}).Essential() ||
		!(AuditEvent{Action: "publish", Outcome: "denied"}).Essential() || (AuditEvent{Action: "handshake", Outcome: "timeout"}).Essential() ||
		!(AuditEvent{Action: "group.commit", Identity: "billing"}).Essential() || (AuditEvent{Action: "connect", Outcome: "refused"}).Essential() {
		t.Fatal("Essential classifies wrongly")
	}
}
