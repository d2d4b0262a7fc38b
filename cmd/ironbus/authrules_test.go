package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/security"
)

// TestAuthRulesAndQuotasFromTheCLI: auth add writes deny rules, subscribe
// subjects and quotas under their config keys; a bad pattern is a usage
// error; a running broker refuses what they refuse, a quota with exit 3
// and its retry hint.
func TestAuthRulesAndQuotasFromTheCLI(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile, err := security.LocalhostPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	authPath, token := filepath.Join(dir, "auth.toml"), filepath.Join(dir, "writer.token")
	expectCode(t, runCLI(t, "token", "create", "--out", token), exitClean)
	add := []string{"auth", "add", "--auth-config", authPath, "--name", "writer", "--token-file", token, "--scopes", "publish,subscribe,admin",
		"--deny-publish", "audit", "--deny-subscribe", "audit", "--deny-admin", "audit", "--subscribe-subjects", "orders.>",
		"--deny-publish-subjects", "orders.*.card", "--deny-subscribe-subjects", "orders.*.card",
		"--max-connections", "4", "--max-streams", "1", "--max-partitions", "2", "--max-stored-bytes", "1GiB"}
	expectCode(t, runCLI(t, append(add, "--deny-admin", "a.>.b")...), exitUsage)
	expectCode(t, runCLI(t, add...), exitClean)
	file, err := security.LoadAuthFile(authPath)
	if err != nil {
		t.Fatal(err)
	}
	entry := file.Identities[0]
	if !slices.Equal(entry.DenyPublish, []string{"audit"}) || !slices.Equal(entry.DenyAdmin, []string{"audit"}) ||
		!slices.Equal(entry.SubscribeSubjects, []string{"orders.>"}) || !slices.Equal(entry.DenySubscribeSubjects, []string{"orders.*.card"}) ||
		entry.MaxConnections != 4 || entry.MaxStreams != 1 || entry.MaxPartitions != 2 || entry.MaxStoredBytes != 1<<30 {
		t.Fatalf("auth add wrote %+v", entry)
	}
	listed := runCLI(t, "auth", "ls", "--auth-config", authPath, "--json")
	if !strings.Contains(listed.stdout, `"deny_publish"`) || !strings.Contains(listed.stdout, `"max_streams":1`) {
		t.Errorf("auth ls --json leaves out rules or quotas: %s", listed.stdout)
	}

	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-config", authPath)
	secure := []string{"--addr", broker.Addr(), "--tls-ca", caFile, "--token-file", token}
	expectCode(t, runCLI(t, append([]string{"pub", "--stream", "orders", "--subject", "orders.eu.created", "hello"}, secure...)...), exitClean)
	denied := runCLI(t, append([]string{"pub", "--stream", "orders", "--subject", "orders.eu.card", "hello"}, secure...)...)
	expectCode(t, denied, exitNotAuthorized)
	over := runCLI(t, append([]string{"pub", "--stream", "second", "hello"}, secure...)...)
	expectCode(t, over, exitRefused)
	if !strings.Contains(over.stderr, "max_streams") || !strings.Contains(over.stderr, "retryable after") {
		t.Errorf("a quota refusal without its quota or hint:\n%s", over.stderr)
	}
}

// The old --subjects took stream patterns under a subject's name: a script
// still passing it is refused, told which of the two flags it meant, and
// the auth file is not written.
func TestAuthAddRefusesTheOldSubjectsFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.toml")
	result := runCLI(t, "auth", "add", "--auth-config", path, "--name", "a", "--mtls-identity", "spiffe://x",
		"--scopes", "publish", "--subjects", "orders.>")
	expectCode(t, result, exitUsage)
	if !strings.Contains(result.stderr, "--streams orders.>") || !strings.Contains(result.stderr, "--publish-subjects orders.>") {
		t.Fatalf("the refusal does not name both flags:\n%s", result.stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the auth file was written: %v", err)
	}
}
