package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

func streamsOf(t *testing.T, result cliResult) streamsOutput {
	t.Helper()
	var out streamsOutput
	if err := json.Unmarshal([]byte(result.stdout), &out); err != nil || out.Schema != streamsSchema {
		t.Fatalf("not a %s envelope: %q %v", streamsSchema, result.stdout, err)
	}
	return out
}

// TestStreamVerbsLiveAndAcrossARestart: streams, partitions and bindings
// made through the broker survive its restart; rm is refused while a
// group has a live consumer; destructive verbs without --force are usage
// errors that say to add it.
func TestStreamVerbsLiveAndAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	at := []string{"--addr", broker.Addr(), "--json"}
	created := streamsOf(t, runCLI(t, append([]string{"stream", "create", "orders", "--partitions", "4", "--max-records", "500"}, at...)...))
	if s := created.Streams[0]; s.Partitions != 4 || s.MaxRecords != 500 || s.Created == "" {
		t.Fatalf("created %+v", s)
	}
	expectCode(t, runCLI(t, append([]string{"stream", "create", "orders", "--partitions", "2"}, at...)...), exitDamage)
	expectCode(t, runCLI(t, append([]string{"stream", "bind", "orders.>", "orders"}, at...)...), exitClean)
	runCLI(t, append([]string{"stream", "create", "audit"}, at...)...)
	conflict := runCLI(t, "stream", "bind", "*.eu", "audit", "--addr", broker.Addr())
	expectCode(t, conflict, exitDamage)
	if !strings.Contains(conflict.stderr, "orders.>") {
		t.Fatalf("the conflict does not name the other binding: %q", conflict.stderr)
	}
	for _, verb := range []string{"purge", "rm"} {
		refused := runCLI(t, "stream", verb, "orders", "--addr", broker.Addr())
		expectCode(t, refused, exitUsage)
		if !strings.Contains(refused.stderr, "--force") {
			t.Fatalf("stream %s without --force: %q", verb, refused.stderr)
		}
	}
	publishNumbered(t, broker.Addr(), "audit", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	member, err := client.Dial(ctx, broker.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := member.Fetch(ctx, "audit", "g", client.FetchOptions{MaxRecords: 1}); err != nil {
		t.Fatal(err)
	}
	expectCode(t, runCLI(t, "stream", "rm", "audit", "--force", "--addr", broker.Addr()), exitDamage)
	member.Close()
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("the broker exited %d", code)
	}

	broker = ironbus.Serve(t, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	listed := streamsOf(t, runCLI(t, "stream", "ls", "--json", "--addr", broker.Addr()))
	if len(listed.Streams) != 2 || listed.Streams[1].Name != "orders" || listed.Streams[1].Partitions != 4 ||
		len(listed.Bindings) != 1 || listed.Bindings[0].Pattern != "orders.>" {
		t.Fatalf("after a restart: %+v", listed)
	}
	if audit := listed.Streams[0]; audit.Records != 3 || audit.Groups != 1 {
		t.Fatalf("audit after a restart: %+v", audit)
	}
	purged := streamsOf(t, runCLI(t, "stream", "purge", "audit", "--force", "--json", "--addr", broker.Addr()))
	if p := purged.Streams[0].Offsets[0]; p.First != 3 || p.End != 3 {
		t.Fatalf("after purge: %+v", p)
	}
	expectCode(t, runCLI(t, "stream", "rm", "audit", "--force", "--addr", broker.Addr()), exitClean)
	expectCode(t, runCLI(t, "stream", "info", "audit", "--addr", broker.Addr()), exitNotFound)
	// Offline verbs are refused while the broker holds the directory.
	expectCode(t, runCLI(t, "stream", "create", "x", "--data-dir", dir), exitLocked)
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("the broker exited %d", code)
	}
}

// TestStreamVerbsOffline: every verb on a stopped broker's directory,
// and a broker started on it afterwards serves what they made.
func TestStreamVerbsOffline(t *testing.T) {
	dir := t.TempDir()
	at := []string{"--data-dir", dir, "--json"}
	created := streamsOf(t, runCLI(t, append([]string{"stream", "create", "clicks", "--partitions", "3", "--max-bytes", "64MiB", "--max-age", "2d"}, at...)...))
	if s := created.Streams[0]; s.Partitions != 3 || s.MaxBytes != 64<<20 || s.MaxAge != "48h0m0s" {
		t.Fatalf("created %+v", s)
	}
	expectCode(t, runCLI(t, append([]string{"stream", "bind", "clicks.*", "clicks"}, at...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"stream", "bind", "a..b", "clicks"}, at...)...), exitUsage)
	expectCode(t, runCLI(t, append([]string{"stream", "bind", "x.>", "missing"}, at...)...), exitNotFound)
	runCLI(t, append([]string{"stream", "create", "scratch"}, at...)...)
	expectCode(t, runCLI(t, append([]string{"stream", "purge", "clicks", "--force"}, at...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"stream", "rm", "scratch", "--force"}, at...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"stream", "unbind", "nope"}, at...)...), exitNotFound)
	info := streamsOf(t, runCLI(t, append([]string{"stream", "info", "clicks"}, at...)...))
	if len(info.Bindings) != 1 || info.Streams[0].Partitions != 3 {
		t.Fatalf("info %+v", info)
	}

	broker := ironbus.Serve(t, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	listed := streamsOf(t, runCLI(t, "stream", "ls", "--json", "--addr", broker.Addr()))
	if len(listed.Streams) != 1 || listed.Streams[0].Name != "clicks" || listed.Streams[0].MaxAge != "48h0m0s" || len(listed.Bindings) != 1 {
		t.Fatalf("the broker serves %+v", listed)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("the broker exited %d", code)
	}
}

// TestStreamDedupWindowFlag: --dedup-window sets how long a stream
// remembers message ids, 0 turns it off, unset is 2m, and a window past
// 24h is a usage error that says the bound.
func TestStreamDedupWindowFlag(t *testing.T) {
	dir := t.TempDir()
	at := []string{"--data-dir", dir, "--json"}
	for _, c := range []struct{ stream, flag, want string }{{"plain", "", "2m0s"}, {"off", "0", "off"}, {"short", "10m", "10m0s"}} {
		args := append([]string{"stream", "create", c.stream}, at...)
		if c.flag != "" {
			args = append(args, "--dedup-window", c.flag)
		}
		if got := streamsOf(t, runCLI(t, args...)).Streams[0].DedupWindow; got != c.want {
			t.Errorf("%s: dedup window %q, want %q", c.stream, got, c.want)
		}
	}
	long := runCLI(t, append([]string{"stream", "create", "long", "--dedup-window", "25h"}, at...)...)
	expectCode(t, long, exitUsage)
	if !strings.Contains(long.stderr, "24h") {
		t.Errorf("a 25h window is refused without naming the bound: %q", long.stderr)
	}
	expectCode(t, runCLI(t, append([]string{"stream", "create", "bad", "--dedup-window", "soon"}, at...)...), exitUsage)
	expectCode(t, runCLI(t, append([]string{"stream", "create", "short", "--dedup-window", "1m"}, at...)...), exitDamage)
	if got := streamsOf(t, runCLI(t, append([]string{"stream", "info", "off"}, at...)...)).Streams[0].DedupWindow; got != "off" {
		t.Errorf("info shows dedup window %q, want off", got)
	}
}
