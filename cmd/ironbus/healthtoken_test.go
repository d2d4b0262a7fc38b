package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/monitor"
	"github.com/ironbus/ironbus/security"
)

// TestHealthTokenBeyondLoopback: serve binds the health endpoints beyond
// loopback only with a token file of mode 0600; the reading commands
// send the token with --health-token-file and are refused without it;
// /admin carries no secret.
func TestHealthTokenBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "health.token")
	expectCode(t, runCLI(t, "token", "create", "--out", token), exitClean)
	refused := runCLI(t, "serve", "--data-dir", filepath.Join(dir, "a"), "--addr", "127.0.0.1:0", "--health-addr", "0.0.0.0:0")
	if refused.code == exitClean || !strings.Contains(refused.stderr, "--health-token-file") {
		t.Fatalf("a non-loopback --health-addr without a token: exit %d\n%s", refused.code, refused.stderr)
	}
	exposed := filepath.Join(dir, "exposed.token")
	data, _ := os.ReadFile(token)
	if err := os.WriteFile(exposed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	loose := runCLI(t, "serve", "--data-dir", filepath.Join(dir, "b"), "--addr", "127.0.0.1:0", "--health-addr", "0.0.0.0:0", "--health-token-file", exposed)
	if loose.code == exitClean || !strings.Contains(loose.stderr, "health-token-file") {
		t.Fatalf("a world-readable token file: exit %d\n%s", loose.code, loose.stderr)
	}

	authPath, clientToken := filepath.Join(dir, "auth.toml"), filepath.Join(dir, "client.token")
	expectCode(t, runCLI(t, "token", "create", "--out", clientToken), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "all", "--token-file", clientToken, "--scopes", "publish,subscribe,admin"), exitClean)
	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(dir, "c"), "--addr", "127.0.0.1:0",
		"--health-addr", "0.0.0.0:0", "--health-token-file", token, "--auth-config", authPath)
	_, port, err := net.SplitHostPort(broker.HealthAddr())
	if err != nil {
		t.Fatalf("health address %q: %v", broker.HealthAddr(), err)
	}
	health := []string{"--health-addr", net.JoinHostPort("127.0.0.1", port)}
	expectCode(t, runCLI(t, append([]string{"server", "info"}, health...)...), exitNotAuthorized)
	expectCode(t, runCLI(t, append([]string{"report", "streams"}, health...)...), exitNotAuthorized)
	withToken := append(health, "--health-token-file", token)
	expectCode(t, runCLI(t, append([]string{"server", "info"}, withToken...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"server", "check"}, withToken...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"report", "streams"}, withToken...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"top", "--once", "--interval", "0"}, withToken...)...), exitClean)

	// A context carries the health address and token to top, report and
	// server; a --health-addr given by hand gets neither.
	env := []string{"IRONBUS_CONFIG_DIR=" + t.TempDir()}
	expectCode(t, runCLIEnv(t, env, "context", "create", "lab", "--health-addr", health[1], "--health-token-file", token, "--use"), exitClean)
	expectCode(t, runCLIEnv(t, env, "server", "info"), exitClean)
	expectCode(t, runCLIEnv(t, env, "report", "streams"), exitClean)
	expectCode(t, runCLIEnv(t, env, "top", "--once", "--interval", "0"), exitClean)
	expectCode(t, runCLIEnv(t, env, append([]string{"server", "info"}, health...)...), exitNotAuthorized)

	secret, _ := security.ReadSecretLine(token)
	clientSecret, _ := security.ReadSecretLine(clientToken)
	response, err := monitor.Get(context.Background(), monitor.Endpoint{Addr: health[1], Token: string(secret)}, "/admin", monitor.MaxAdminBytes)
	if err != nil || response.StatusCode != 200 {
		t.Fatalf("/admin with the token: %v %v", response.Status, err)
	}
	for _, leak := range []string{string(secret), security.TokenDigest(string(secret)), string(clientSecret),
		security.TokenDigest(string(clientSecret)), "argon2id", authPath, token} {
		if strings.Contains(string(response.Body), leak) {
			t.Fatalf("/admin exposes %q:\n%s", leak, response.Body)
		}
	}
}
