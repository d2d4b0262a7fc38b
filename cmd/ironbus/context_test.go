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

	"github.com/ironbus/ironbus/security"
)

// runCLIEnv is runCLI with extra environment (IRONBUS_CONFIG_DIR).
func runCLIEnv(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	command := ironbus.Command(args...)
	command.Stdout, command.Stderr = &stdout, &stderr
	command.Env = append(os.Environ(), env...)
	err := command.Run()
	result := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		result.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running ironbus %q: %s", args, err.Error())
	}
	return result
}

func TestContextCreateUseList(t *testing.T) {
	env := []string{"IRONBUS_CONFIG_DIR=" + t.TempDir(), "IRONBUS_ADDR="}
	empty := runCLIEnv(t, env, "context", "ls")
	expectCode(t, empty, exitClean)
	if !strings.Contains(empty.stdout, "no contexts yet") {
		t.Errorf("ls of no contexts: %q", empty.stdout)
	}
	expectCode(t, runCLIEnv(t, env, "context", "create", "pi", "--addr", "10.0.0.7:7777", "--data-dir", "rel/data"), exitClean)
	expectCode(t, runCLIEnv(t, env, "context", "create", "lab", "--addr", "10.0.0.8:7777"), exitClean)
	again := runCLIEnv(t, env, "context", "create", "pi")
	expectCode(t, again, exitUsage)
	if !strings.Contains(again.stderr, "--replace") {
		t.Errorf("a second create does not say how to overwrite: %q", again.stderr)
	}
	expectCode(t, runCLIEnv(t, env, "context", "use", "nope"), exitNotFound)
	expectCode(t, runCLIEnv(t, env, "context", "use", "lab"), exitClean)
	list := runCLIEnv(t, env, "context", "ls", "--json")
	expectCode(t, list, exitClean)
	var contexts contextsOutput
	if err := json.Unmarshal([]byte(list.stdout), &contexts); err != nil {
		t.Fatalf("ls --json: %q %v", list.stdout, err)
	}
	if contexts.Schema != contextsSchema || contexts.Current != "lab" || len(contexts.Contexts) != 2 ||
		contexts.Contexts[1].Name != "pi" || !filepath.IsAbs(contexts.Contexts[1].DataDir) {
		t.Errorf("ls --json: %+v", contexts)
	}
	human := runCLIEnv(t, env, "context", "ls")
	if !strings.Contains(human.stdout, "*  lab") {
		t.Errorf("ls does not mark the current context: %q", human.stdout)
	}
}

func TestContextRefusesALooseTokenFile(t *testing.T) {
	env := []string{"IRONBUS_CONFIG_DIR=" + t.TempDir()}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loose := runCLIEnv(t, env, "context", "create", "x", "--addr", "127.0.0.1:1", "--token-file", token)
	expectCode(t, loose, exitUsage)
	if !strings.Contains(loose.stderr, "chmod 600 "+token) {
		t.Errorf("the refusal does not give the fix: %q", loose.stderr)
	}
	if err := os.Chmod(token, 0o600); err != nil {
		t.Fatal(err)
	}
	expectCode(t, runCLIEnv(t, env, "context", "create", "x", "--addr", "127.0.0.1:1", "--token-file", token, "--use"), exitClean)
	// Loosened after the context was made: refused at use, too.
	if err := os.Chmod(token, 0o640); err != nil {
		t.Fatal(err)
	}
	used := runCLIEnv(t, append(env, "IRONBUS_ADDR="), "pub", "hello")
	expectCode(t, used, exitUsage)
	if !strings.Contains(used.stderr, "chmod 600") {
		t.Errorf("pub with a loosened token file: %q", used.stderr)
	}
}

// TestCommandsUseTheCurrentContext: pub and sub reach the broker named by
// the current context, and peek reads its data directory, with neither
// --addr nor --data-dir given; a flag given by hand still wins.
func TestCommandsUseTheCurrentContext(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	env := []string{"IRONBUS_CONFIG_DIR=" + t.TempDir(), "IRONBUS_ADDR="}
	expectCode(t, runCLIEnv(t, env, "context", "create", "here", "--addr", broker.Addr(), "--data-dir", dataDir, "--use"), exitClean)
	pub := runCLIEnv(t, env, "pub", "from-context")
	expectCode(t, pub, exitClean)
	if strings.TrimSpace(pub.stdout) != "0" {
		t.Fatalf("pub through the context printed %q", pub.stdout)
	}
	sub := runCLIEnv(t, env, "sub", "--group", "g", "--max", "1", "--wait", "2s")
	expectCode(t, sub, exitClean)
	if !strings.Contains(sub.stdout, "payload=from-context") {
		t.Fatalf("sub through the context printed %q", sub.stdout)
	}
	expectCode(t, runCLIEnv(t, env, "pub", "--addr", "127.0.0.1:1", "x"), exitLocked)
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker exit %d", code)
	}
	peek := runCLIEnv(t, env, "peek")
	expectCode(t, peek, exitClean)
	if !strings.Contains(peek.stdout, "payload=from-context") {
		t.Fatalf("peek through the context printed %q", peek.stdout)
	}
}

func TestCompletionScriptsGenerate(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "complete -o", "zsh": "#compdef ironbus", "fish": "complete -c ironbus"} {
		result := runCLI(t, "completion", shell)
		expectCode(t, result, exitClean)
		if !strings.Contains(result.stdout, marker) {
			t.Errorf("%s completion lacks %q", shell, marker)
		}
	}
	expectCode(t, runCLI(t, "completion", "tcsh"), exitUsage)
}

// TestCheatSheetCommandsExist runs every ironbus command line of the cheat
// sheet with --help: cobra parses the flags first, so a renamed command or
// flag fails here before a user copies it.
func TestCheatSheetCommandsExist(t *testing.T) {
	sheet := runCLI(t, "cheat")
	expectCode(t, sheet, exitClean)
	if lines := strings.Count(sheet.stdout, "\n"); lines > 40 {
		t.Errorf("the cheat sheet is %d lines: more than a screen", lines)
	}
	checked := 0
	for _, line := range strings.Split(sheet.stdout, "\n") {
		args := cheatCommand(line)
		if args == nil {
			continue
		}
		checked++
		result := runCLIEnv(t, []string{"IRONBUS_CONFIG_DIR=" + t.TempDir()}, append(args, "--help")...)
		if result.code != exitClean {
			t.Errorf("cheat line %q: exit %d\n%s", line, result.code, result.stderr)
		}
	}
	if checked < 15 {
		t.Errorf("only %d command lines found in the cheat sheet", checked)
	}
}

// cheatCommand extracts the arguments of the ironbus command on a line:
// from "ironbus" to a pipe, a redirection, a parenthesis or the two
// spaces before the description.
func cheatCommand(line string) []string {
	at := strings.Index(line, "ironbus ")
	if at < 0 || strings.Contains(line, "<command>") {
		return nil
	}
	rest := line[at+len("ironbus "):]
	for _, stop := range []string{"  ", " |", " >", ")"} {
		if cut := strings.Index(rest, stop); cut >= 0 {
			rest = rest[:cut]
		}
	}
	var args []string
	for _, field := range strings.Fields(rest) {
		args = append(args, strings.Trim(field, `'"`))
	}
	return args
}

// TestContextCarriesTLSAndCredentials: a context holding a CA and a token
// file drives pub and sub against a broker that requires TLS and auth,
// with no connect flag given; the same address given by hand gets none of
// the context's secrets.
func TestContextCarriesTLSAndCredentials(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile, err := security.LocalhostPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	authPath, token := filepath.Join(dir, "auth.toml"), filepath.Join(dir, "app.token")
	expectCode(t, runCLI(t, "token", "create", "--out", token), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", authPath, "--name", "app", "--token-file", token,
		"--scopes", "publish,subscribe"), exitClean)
	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-config", authPath)

	env := []string{"IRONBUS_CONFIG_DIR=" + t.TempDir(), "IRONBUS_ADDR="}
	created := runCLIEnv(t, env, "context", "create", "secure", "--addr", broker.Addr(), "--tls-ca", caFile,
		"--token-file", token, "--use", "--json")
	expectCode(t, created, exitClean)
	if !strings.Contains(created.stdout, `"tls_ca":"`+caFile+`"`) {
		t.Fatalf("context create --json does not show the CA: %s", created.stdout)
	}
	pub := runCLIEnv(t, env, "pub", "through-tls")
	expectCode(t, pub, exitClean)
	if strings.TrimSpace(pub.stdout) != "0" {
		t.Fatalf("pub through the secure context printed %q", pub.stdout)
	}
	sub := runCLIEnv(t, env, "sub", "--group", "g", "--max", "1", "--wait", "2s")
	expectCode(t, sub, exitClean)
	if !strings.Contains(sub.stdout, "payload=through-tls") {
		t.Fatalf("sub through the secure context printed %q", sub.stdout)
	}
	// --addr by hand: the context's CA and token stay home, so the
	// plaintext hello to a TLS listener fails.
	byHand := runCLIEnv(t, env, "pub", "--addr", broker.Addr(), "x")
	if byHand.code == exitClean {
		t.Fatalf("pub --addr by hand used the context's TLS and token:\n%s", byHand.stdout)
	}
	ls := runCLIEnv(t, env, "context", "ls")
	if !strings.Contains(ls.stdout, "tls") || !strings.Contains(ls.stdout, "token "+token) {
		t.Errorf("context ls does not show TLS and credentials:\n%s", ls.stdout)
	}
}

// TestContextRefusesLooseOrConflictingSecrets: every secret file a context
// names (password, private key) must be 0600, and credentials must be one
// kind.
func TestContextRefusesLooseOrConflictingSecrets(t *testing.T) {
	env := []string{"IRONBUS_CONFIG_DIR=" + t.TempDir()}
	dir := t.TempDir()
	password, key := filepath.Join(dir, "password"), filepath.Join(dir, "client.key")
	for _, path := range []string{password, key} {
		if err := os.WriteFile(path, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loose := runCLIEnv(t, env, "context", "create", "x", "--user", "ops", "--password-file", password)
	expectCode(t, loose, exitUsage)
	if !strings.Contains(loose.stderr, "chmod 600 "+password) {
		t.Errorf("a loose password file: %q", loose.stderr)
	}
	looseKey := runCLIEnv(t, env, "context", "create", "x", "--tls-cert", filepath.Join(dir, "client.crt"), "--tls-key", key)
	expectCode(t, looseKey, exitUsage)
	if !strings.Contains(looseKey.stderr, "chmod 600 "+key) {
		t.Errorf("a loose key file: %q", looseKey.stderr)
	}
	if err := os.Chmod(password, 0o600); err != nil {
		t.Fatal(err)
	}
	both := runCLIEnv(t, env, "context", "create", "x", "--token-file", password, "--user", "ops", "--password-file", password)
	expectCode(t, both, exitUsage)
	half := runCLIEnv(t, env, "context", "create", "x", "--user", "ops")
	expectCode(t, half, exitUsage)
	expectCode(t, runCLIEnv(t, env, "context", "create", "x", "--user", "ops", "--password-file", password), exitClean)
}
