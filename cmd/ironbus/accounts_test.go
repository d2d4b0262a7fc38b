package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAccountsIsolatedThroughTheCLI: two accounts each create and use a
// stream "orders" through the real binary, and neither sees the other's:
// publish, consume, stream ls/info, bind and routing, group ls, dlq ls.
// The default account keeps its plain names and cannot reach a tenant's
// engine names; the operator account sees every account's streams as
// ACCOUNT/STREAM.
func TestAccountsIsolatedThroughTheCLI(t *testing.T) {
	dir := t.TempDir()
	authPath := filepath.Join(dir, "auth.toml")
	tokens := map[string]string{}
	for name, account := range map[string]string{"alice": "acme", "bob": "beta", "dana": "", "root": "operator"} {
		tokens[name] = filepath.Join(dir, name+".token")
		expectCode(t, runCLI(t, "token", "create", "--out", tokens[name]), exitClean)
		args := []string{"auth", "add", "--auth-config", authPath, "--name", name, "--token-file", tokens[name], "--scopes", "publish,subscribe,admin"}
		if account != "" {
			args = append(args, "--account", account)
		}
		expectCode(t, runCLI(t, args...), exitClean)
	}
	listed := runCLI(t, "auth", "ls", "--auth-config", authPath, "--json")
	expectCode(t, listed, exitClean)
	if !strings.Contains(listed.stdout, `"account":"acme"`) || !strings.Contains(listed.stdout, `"account":"default"`) {
		t.Fatalf("auth ls --json does not show accounts: %s", listed.stdout)
	}
	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--auth-config", authPath, "--max-deliver", "1", "--security-reload-interval", "50ms", "--audit-log", filepath.Join(dir, "audit.log"))
	as := func(name string, args ...string) cliResult {
		t.Helper()
		return runCLI(t, append(args, "--addr", broker.Addr(), "--token-file", tokens[name])...)
	}
	streams := func(name string) streamsOutput {
		t.Helper()
		result := as(name, "stream", "ls", "--json")
		expectCode(t, result, exitClean)
		var out streamsOutput
		if err := json.Unmarshal([]byte(result.stdout), &out); err != nil {
			t.Fatalf("stream ls --json: %q %v", result.stdout, err)
		}
		return out
	}
	noForeign := func(who string, result cliResult, foreign ...string) {
		t.Helper()
		for _, text := range append(foreign, "__") {
			if strings.Contains(result.stdout+result.stderr, text) {
				t.Fatalf("%s saw %q:\n%s%s", who, text, result.stdout, result.stderr)
			}
		}
	}

	expectCode(t, as("alice", "stream", "create", "orders"), exitClean)
	expectCode(t, as("bob", "stream", "create", "orders", "--partitions", "2"), exitClean)
	expectCode(t, as("dana", "stream", "create", "all"), exitClean)
	expectCode(t, as("alice", "pub", "--stream", "orders", "from-acme"), exitClean)
	expectCode(t, as("bob", "pub", "--stream", "orders", "--partition", "1", "from-beta"), exitClean)

	// Bindings: the same pattern in each account, and a default-account
	// wildcard that neither conflicts with them nor captures their subjects.
	expectCode(t, as("alice", "stream", "bind", "orders.>", "orders"), exitClean)
	expectCode(t, as("bob", "stream", "bind", "orders.>", "orders"), exitClean)
	expectCode(t, as("dana", "stream", "bind", ">", "all"), exitClean)
	expectCode(t, as("alice", "pub", "--subject", "orders.eu", "routed-acme"), exitClean)
	expectCode(t, as("dana", "pub", "--subject", "orders.eu", "routed-default"), exitClean)
	unrouted := as("bob", "pub", "--subject", "payments.eu", "nowhere")
	if unrouted.code == exitClean {
		t.Fatalf("a subject no binding of the account matches was stored (the default account's '>' caught it?)")
	}
	noForeign("bob", unrouted, "all")

	read := func(name string, args ...string) []string {
		t.Helper()
		result := as(name, append([]string{"sub", "--wait", "1s"}, args...)...)
		expectCode(t, result, exitClean)
		var payloads []string
		for _, field := range strings.Fields(result.stdout) {
			if payload, ok := strings.CutPrefix(field, "payload="); ok {
				payloads = append(payloads, payload)
			}
		}
		return payloads
	}
	if got := read("alice", "--stream", "orders", "--group", "g", "--max", "5"); !slices.Equal(got, []string{"from-acme", "routed-acme"}) {
		t.Fatalf("acme's orders: %q", got)
	}
	if got := read("bob", "--stream", "orders", "--group", "g", "--max", "5"); !slices.Equal(got, []string{"from-beta"}) {
		t.Fatalf("beta's orders: %q", got)
	}
	if got := read("dana", "--stream", "all", "--group", "g", "--max", "5"); !slices.Equal(got, []string{"routed-default"}) {
		t.Fatalf("the default account's stream: %q", got)
	}

	// Listings show each account only its own, under its own names.
	for name, want := range map[string]int{"alice": 1, "bob": 2} {
		out := streams(name)
		if len(out.Streams) != 1 || out.Streams[0].Name != "orders" || out.Streams[0].Partitions != want ||
			len(out.Bindings) != 1 || out.Bindings[0] != (bindingRow{Pattern: "orders.>", Stream: "orders"}) {
			t.Fatalf("%s's stream ls: %+v", name, out)
		}
	}
	if out := streams("dana"); len(out.Streams) != 1 || out.Streams[0].Name != "all" || len(out.Bindings) != 1 {
		t.Fatalf("the default account's stream ls: %+v", out)
	}
	info := as("alice", "stream", "info", "orders")
	expectCode(t, info, exitClean)
	noForeign("alice", info, "beta")
	missing := as("dana", "stream", "info", "orders")
	expectCode(t, missing, exitNotFound)
	noForeign("dana", missing, "acme", "beta")
	for _, engineName := range []string{"__acme.orders", ".dlq.__acme.orders"} {
		reach := as("dana", "sub", "--stream", engineName, "--group", "x", "--max", "1")
		if reach.code == exitClean {
			t.Fatalf("the default account read %s", engineName)
		}
	}
	expectCode(t, as("dana", "stream", "info", "__acme.orders"), exitNotFound)

	// Groups: each account lists only its own.
	groups := as("bob", "group", "ls", "--json")
	expectCode(t, groups, exitClean)
	var listedGroups groupsOutput
	if err := json.Unmarshal([]byte(groups.stdout), &listedGroups); err != nil || len(listedGroups.Groups) == 0 {
		t.Fatalf("beta's group ls: %q %v", groups.stdout, err)
	}
	for _, group := range listedGroups.Groups {
		if group.Stream != "orders" || group.Group != "g" {
			t.Fatalf("beta's group ls: %+v", listedGroups.Groups)
		}
	}
	noForeign("bob", groups, "acme", "all")

	// Dead letters: a record of acme's goes to acme's queue, which only
	// acme sees.
	read("alice", "--stream", "orders", "--group", "poison", "--max", "1", "--nack", "--nack-delay", "1ms")
	read("alice", "--stream", "orders", "--group", "poison", "--max", "1")
	queues := as("alice", "dlq", "ls")
	expectCode(t, queues, exitClean)
	if !strings.Contains(queues.stdout, "orders") {
		t.Fatalf("acme's dlq ls: %q", queues.stdout)
	}
	noForeign("alice", queues)
	if got := read("alice", "--stream", ".dlq.orders", "--group", "triage", "--max", "5"); len(got) != 1 {
		t.Fatalf("acme's dead-letter queue: %q", got)
	}
	others := as("bob", "dlq", "ls")
	expectCode(t, others, exitClean)
	if strings.Contains(others.stdout, "orders") {
		t.Fatalf("beta sees acme's dead letters: %q", others.stdout)
	}

	// The operator sees every account, names a tenant's stream
	// ACCOUNT/STREAM, and reads it.
	all := streams("root")
	var names []string
	for _, stream := range all.Streams {
		names = append(names, stream.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"acme/orders", "all", "beta/orders"}) {
		t.Fatalf("the operator's stream ls: %q", names)
	}
	expectCode(t, as("root", "stream", "info", "beta/orders"), exitClean)
	if got := read("root", "--stream", "acme/orders", "--group", "audit", "--max", "5"); len(got) != 2 {
		t.Fatalf("the operator reading acme/orders: %q", got)
	}

	// An explicit export: beta consumes acme's orders as acme/orders,
	// read only, and the read is audited.
	before := as("bob", "sub", "--stream", "acme/orders", "--group", "g", "--max", "1")
	if before.code == exitClean {
		t.Fatal("beta read acme/orders before any export")
	}
	noForeign("bob", before)
	expectCode(t, runCLI(t, "auth", "export", "--auth-config", authPath, "--account", "acme", "--stream", "orders", "--to", "beta"), exitClean)
	if shown := runCLI(t, "auth", "ls", "--auth-config", authPath); !strings.Contains(shown.stdout, "export acme/orders to beta") {
		t.Fatalf("auth ls does not show the export:\n%s", shown.stdout)
	}
	deadline := time.Now().Add(10 * time.Second)
	for as("bob", "sub", "--stream", "acme/orders", "--group", "g", "--max", "1").code != exitClean {
		if time.Now().After(deadline) {
			t.Fatalf("the export never took effect:\n%s", broker.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := read("bob", "--stream", "acme/orders", "--group", "g2", "--max", "5"); len(got) != 2 {
		t.Fatalf("beta reading the import: %q", got)
	}
	for _, args := range [][]string{{"pub", "--stream", "acme/orders", "x"}, {"stream", "info", "acme/orders"}, {"stream", "purge", "acme/orders", "--force"}} {
		if result := as("bob", args...); result.code == exitClean {
			t.Fatalf("beta %v on an import succeeded", args)
		}
	}
	if got := read("alice", "--stream", "orders", "--group", "after", "--max", "5"); len(got) != 2 {
		t.Fatalf("acme's orders after beta's reads: %q", got)
	}
	audit, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil || !strings.Contains(string(audit), `"action":"import"`) {
		t.Fatalf("the import is not audited: %v\n%s", err, audit)
	}
	expectCode(t, runCLI(t, "auth", "export", "--auth-config", authPath, "--account", "acme", "--stream", "orders", "--to", "beta", "--revoke"), exitClean)
	expectCode(t, runCLI(t, "auth", "export", "--auth-config", authPath, "--account", "acme", "--stream", "orders", "--to", "beta", "--revoke"), exitNotFound)
}
