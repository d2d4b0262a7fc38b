package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/security"
)

// TestAuthExpiresFromTheCLI: auth add --expires takes a duration or an
// RFC 3339 time and stores an instant; a bad one is a usage error; auth
// ls shows the expiry, and marks one that has passed.
func TestAuthExpiresFromTheCLI(t *testing.T) {
	dir := t.TempDir()
	authPath, token := filepath.Join(dir, "auth.toml"), filepath.Join(dir, "t.token")
	expectCode(t, runCLI(t, "token", "create", "--out", token), exitClean)
	before := time.Now()
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "month", "--token-file", token,
		"--scopes", "publish", "--expires", "720h"), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "fixed", "--mtls-identity", "spiffe://x",
		"--scopes", "publish", "--expires", "2099-01-31T00:00:00+01:00"), exitClean)
	for _, bad := range []string{"soon", "-1h", "2001-01-01T00:00:00Z"} {
		refused := runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "bad", "--mtls-identity", "spiffe://y",
			"--scopes", "publish", "--expires", bad)
		expectCode(t, refused, exitUsage)
		if !strings.Contains(refused.stderr, "--expires") {
			t.Fatalf("--expires %s: %s", bad, refused.stderr)
		}
	}
	file, err := security.LoadAuthFile(authPath)
	if err != nil {
		t.Fatal(err)
	}
	month := file.Identities[0].Expires
	if month.Before(before.Add(719*time.Hour)) || month.After(time.Now().Add(721*time.Hour)) {
		t.Fatalf("--expires 720h stored %v", month)
	}
	file.Identities = append(file.Identities, security.IdentityEntry{Name: "past", MTLSIdentity: "spiffe://z",
		Publish: []string{">"}, Expires: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err := security.SaveAuthFile(authPath, file); err != nil {
		t.Fatal(err)
	}
	listed := runCLI(t, "auth", "ls", "--auth-config", authPath, "--json")
	expectCode(t, listed, exitClean)
	var out authListOutput
	if err := json.Unmarshal([]byte(listed.stdout), &out); err != nil || len(out.Identities) != 3 {
		t.Fatalf("auth ls --json: %q %v", listed.stdout, err)
	}
	if got := out.Identities[1]; got.Expires != "2099-01-30T23:00:00Z" || got.Expired {
		t.Fatalf("a fixed expiry listed as %+v", got)
	}
	if got := out.Identities[2]; got.Expires != "2001-01-01T00:00:00Z" || !got.Expired {
		t.Fatalf("a past expiry listed as %+v", got)
	}
	human := runCLI(t, "auth", "ls", "--auth-config", authPath)
	expectCode(t, human, exitClean)
	for _, want := range []string{"EXPIRES", "2099-01-30T23:00:00Z", "2001-01-01T00:00:00Z (expired)"} {
		if !strings.Contains(human.stdout, want) {
			t.Fatalf("auth ls lacks %q:\n%s", want, human.stdout)
		}
	}
}
