package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/security"
)

// writeAuthConfig writes an auth config with one all-scopes token
// identity and returns its path.
func writeAuthConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auth.toml")
	err := security.SaveAuthFile(path, security.AuthFile{Identities: []security.IdentityEntry{{Name: "all",
		TokenSHA256: security.TokenDigest("all-token"), Publish: []string{">"}, Subscribe: []string{">"}, Admin: []string{">"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLIInput is runCLI with stdin.
func runCLIInput(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	command := exec.Command(ironbus.Path(), args...)
	command.Stdin = strings.NewReader(stdin)
	command.Stdout, command.Stderr = &stdout, &stderr
	err := command.Run()
	result := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		result.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running ironbus %q: %v", args, err)
	}
	return result
}

func TestServeRefusesExposedBinds(t *testing.T) {
	dir := t.TempDir()
	_, certFile, keyFile, err := security.LocalhostPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--insecure-plaintext-wire"},
		{[]string{"--insecure-plaintext-wire"}, "--auth-config"},
		{[]string{"--tls-cert", certFile, "--tls-key", keyFile}, "--auth-config"},
	}
	for _, c := range cases {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--addr", "0.0.0.0:0"}, c.args...)
		refused := runCLI(t, args...)
		expectCode(t, refused, exitUsage)
		if !strings.Contains(refused.stderr, c.want) {
			t.Errorf("%q: the refusal should mention %s:\n%s", c.args, c.want, refused.stderr)
		}
	}
	warned := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "0.0.0.0:0", "--insecure-plaintext-wire", "--auth-config", writeAuthConfig(t))
	if code := warned.Stop(syscall.SIGTERM); code != 0 || !strings.Contains(warned.Logs(), "INSECURE") {
		t.Fatalf("exit %d; a plaintext non-loopback bind must warn loudly:\n%s", code, warned.Logs())
	}
}

// TestSecuredBrokerFromTheCLI: token create, auth add, serve with TLS,
// auth and audit, client verbs with --tls-ca and --token-file.
func TestSecuredBrokerFromTheCLI(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile, err := security.LocalhostPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	authPath, audit := filepath.Join(dir, "auth.toml"), filepath.Join(dir, "audit.jsonl")
	writerToken, readerToken := filepath.Join(dir, "writer.token"), filepath.Join(dir, "reader.token")
	expectCode(t, runCLI(t, "token", "create", "--out", writerToken), exitClean)
	expectCode(t, runCLI(t, "token", "create", "--out", readerToken), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "writer", "--token-file", writerToken,
		"--scopes", "publish", "--streams", "orders.>"), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "reader", "--token-file", readerToken,
		"--scopes", "subscribe,admin"), exitClean)
	expectCode(t, runCLIInput(t, "s3cret\n", "auth", "add", "--auth-config", authPath, "--name", "ops", "--password-stdin",
		"--argon2-memory", "19MiB", "--scopes", "admin"), exitClean)
	duplicate := runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "writer", "--token-file", writerToken, "--scopes", "publish")
	expectCode(t, duplicate, exitUsage)

	listed := runCLI(t, "auth", "ls", "--auth-config", authPath, "--json")
	expectCode(t, listed, exitClean)
	var identities authListOutput
	if err := json.Unmarshal([]byte(listed.stdout), &identities); err != nil || len(identities.Identities) != 3 || identities.Schema != "ironbus.cli.auth.v1" {
		t.Fatalf("auth ls --json: %q %v", listed.stdout, err)
	}
	if strings.Contains(listed.stdout, "argon2id") || strings.Contains(listed.stdout, "sha256") {
		t.Fatalf("auth ls printed secrets: %s", listed.stdout)
	}

	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-config", authPath, "--audit-log", audit)
	if !strings.Contains(broker.Logs(), "backend=std") {
		t.Errorf("a TLS listener should be served by std:\n%s", broker.Logs())
	}
	secure := []string{"--addr", broker.Addr(), "--tls-ca", caFile}
	published := runCLI(t, append([]string{"pub", "--stream", "orders.eu", "--token-file", writerToken, "hello"}, secure...)...)
	expectCode(t, published, exitClean)
	denied := runCLI(t, append([]string{"pub", "--stream", "audit", "--token-file", writerToken, "hello"}, secure...)...)
	if denied.code == exitClean || !strings.Contains(denied.stderr, "permission") {
		t.Fatalf("a publish outside the writer's scope: exit %d\n%s", denied.code, denied.stderr)
	}
	read := runCLI(t, append([]string{"sub", "--stream", "orders.eu", "--token-file", readerToken, "--group", "g", "--max", "1"}, secure...)...)
	expectCode(t, read, exitClean)
	if !strings.Contains(read.stdout, "hello") {
		t.Fatalf("sub: %q", read.stdout)
	}
	opsPassword := filepath.Join(dir, "ops.password")
	if err := os.WriteFile(opsPassword, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expectCode(t, runCLI(t, append([]string{"group", "ls", "--stream", "orders.eu", "--user", "ops", "--password-file", opsPassword}, secure...)...), exitClean)
	badToken := filepath.Join(dir, "bad.token")
	if err := os.WriteFile(badToken, []byte("ibt_wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := runCLI(t, append([]string{"pub", "--token-file", badToken, "x"}, secure...)...)
	expectCode(t, refused, exitNotAuthorized)
	if !strings.Contains(refused.stderr, "not authorized") {
		t.Fatalf("a wrong token: %s", refused.stderr)
	}
	plain := runCLI(t, "pub", "--addr", broker.Addr(), "--token-file", writerToken, "x")
	if plain.code == exitClean {
		t.Fatal("a plaintext client talked to a TLS broker")
	}
	if err := os.Chmod(badToken, 0o644); err != nil {
		t.Fatal(err)
	}
	exposed := runCLI(t, append([]string{"pub", "--token-file", badToken, "x"}, secure...)...)
	expectCode(t, exposed, exitUsage)
	if !strings.Contains(exposed.stderr, "chmod 600") {
		t.Fatalf("a world-readable token file: %s", exposed.stderr)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d\n%s", code, broker.Logs())
	}
	trail, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	writerSecret, _ := os.ReadFile(writerToken)
	for _, want := range []string{`"identity":"writer"`, `"outcome":"ok"`, `"outcome":"failed"`, `"outcome":"denied"`, `"action":"admin.group"`, `"action":"handshake"`} {
		if !strings.Contains(string(trail), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, trail)
		}
	}
	if strings.Contains(string(trail), strings.TrimSpace(string(writerSecret))) || strings.Contains(string(trail), "s3cret") {
		t.Fatalf("the audit log holds a secret:\n%s", trail)
	}
	expectCode(t, runCLI(t, "auth", "rm", "--auth-config", authPath, "--name", "writer"), exitClean)
	expectCode(t, runCLI(t, "auth", "rm", "--auth-config", authPath, "--name", "writer"), exitNotFound)
}

func TestPasswdHashesStdin(t *testing.T) {
	hashed := runCLIInput(t, "hunter2\n", "passwd", "--memory", "19MiB", "--iterations", "2")
	expectCode(t, hashed, exitClean)
	if !strings.HasPrefix(hashed.stdout, "$argon2id$v=19$m=19456,t=2,p=2$") || strings.Contains(hashed.stdout, "hunter2") {
		t.Fatalf("passwd: %q", hashed.stdout)
	}
	expectCode(t, runCLIInput(t, "", "passwd"), exitUsage)
	token := runCLI(t, "token", "create", "--json")
	expectCode(t, token, exitClean)
	var out tokenOutput
	if err := json.Unmarshal([]byte(token.stdout), &out); err != nil || !strings.HasPrefix(out.Token, "ibt_") || out.SHA256 != security.TokenDigest(out.Token) {
		t.Fatalf("token create --json: %q %v", token.stdout, err)
	}
}

// TestBenchOverTLS: bench --tls starts its broker with a throwaway
// certificate and loads it over TLS, in both directions.
func TestBenchOverTLS(t *testing.T) {
	publish := runBenchJSON(t, "--tls", "--count", "2000", "--pubwindow", "64")
	if !publish.TLS || publish.Records != 2000 {
		t.Fatalf("bench --tls: %+v", publish)
	}
	roundTrip := runBenchJSON(t, "--tls", "--mode", "round-trip", "--count", "1000", "--rate", "4000")
	if !roundTrip.TLS || roundTrip.ConsumedRecords < 1000 {
		t.Fatalf("bench --tls round-trip: %+v", roundTrip)
	}
}

// TestServeReloadsAuthConfig: removing an identity takes effect without a
// restart (file watch), and SIGHUP reloads too.
func TestServeReloadsAuthConfig(t *testing.T) {
	dir := t.TempDir()
	authPath, token := filepath.Join(dir, "auth.toml"), filepath.Join(dir, "writer.token")
	expectCode(t, runCLI(t, "token", "create", "--out", token), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "writer", "--token-file", token, "--scopes", "publish"), exitClean)
	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--auth-config", authPath, "--security-reload-interval", "50ms")
	expectCode(t, runCLI(t, "pub", "--addr", broker.Addr(), "--token-file", token, "before"), exitClean)
	expectCode(t, runCLI(t, "auth", "rm", "--auth-config", authPath, "--name", "writer"), exitClean)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if runCLI(t, "pub", "--addr", broker.Addr(), "--token-file", token, "after").code == exitNotAuthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed identity still publishes:\n%s", broker.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := broker.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(broker.Logs(), "SIGHUP: TLS certificates and auth identities re-read") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload on SIGHUP:\n%s", broker.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
