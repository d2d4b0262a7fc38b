package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// TestGroupResetAndRemoveLive drives group reset and rm through a real
// broker: a reset re-consumes from its new start, a removed group starts
// over, and both are refused while a consumer is connected.
func TestGroupResetAndRemoveLive(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	publishNumbered(t, broker.Addr(), "orders", 5)
	at := []string{"--addr", broker.Addr(), "--stream", "orders", "--group", "billing"}
	sub := append(slices.Clone(at), "--wait", "300ms", "--max", "10", "--ack")
	if got := subLines(t, sub...); len(got) != 5 {
		t.Fatalf("first read printed %q", got)
	}

	reset := runCLI(t, append([]string{"group", "reset", "--to", "2", "--json"}, at...)...)
	expectCode(t, reset, exitClean)
	var after groupsOutput
	if err := json.Unmarshal([]byte(reset.stdout), &after); err != nil || len(after.Groups) != 1 || after.Groups[0].Committed != 2 {
		t.Fatalf("group reset --json: %q %v", reset.stdout, err)
	}
	if got := subLines(t, sub...); len(got) != 3 || got[0] != "#2 key= payload=line-2" {
		t.Fatalf("after reset to 2 printed %q", got)
	}

	// A connected consumer holds the group: reset and rm are refused.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	member, err := client.Dial(ctx, broker.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := member.Fetch(ctx, "orders", "billing", client.FetchOptions{MaxRecords: 1}); err != nil {
		t.Fatal(err)
	}
	refused := runCLI(t, append([]string{"group", "reset", "--to", "earliest"}, at...)...)
	expectCode(t, refused, exitDamage)
	if !strings.Contains(refused.stderr, "stop") {
		t.Fatalf("the refusal does not tell the operator what to do: %q", refused.stderr)
	}
	expectCode(t, runCLI(t, append([]string{"group", "rm"}, at...)...), exitDamage)
	info := runCLI(t, append([]string{"group", "info", "--json"}, at...)...)
	expectCode(t, info, exitClean)
	var live groupsOutput
	if err := json.Unmarshal([]byte(info.stdout), &live); err != nil || len(live.Groups) != 1 || live.Groups[0].Members != 1 {
		t.Fatalf("group info --json with a member: %q %v", info.stdout, err)
	}
	member.Close()

	removed := runCLI(t, "group", "rm", "--addr", broker.Addr(), "--stream", "orders", "--group", "billing")
	deadline := time.Now().Add(5 * time.Second)
	for removed.code != exitClean && time.Now().Before(deadline) { // the broker notices the close shortly
		time.Sleep(50 * time.Millisecond)
		removed = runCLI(t, "group", "rm", "--addr", broker.Addr(), "--stream", "orders", "--group", "billing")
	}
	expectCode(t, removed, exitClean)
	listed := runCLI(t, "group", "ls", "--addr", broker.Addr(), "--json")
	expectCode(t, listed, exitClean)
	if strings.Contains(listed.stdout, "billing") {
		t.Fatalf("group ls after rm: %q", listed.stdout)
	}
	if got := subLines(t, sub...); len(got) != 5 || got[0] != "#0 key= payload=line-0" {
		t.Fatalf("a removed group did not start over: %q", got)
	}
	expectCode(t, runCLI(t, "group", "info", "--addr", broker.Addr(), "--stream", "orders", "--group", "nobody"), exitNotFound)
}

// TestDeadLetterRedriveLive: rejected records go to the queue; redriving
// twice puts each back in the stream once, and the queue's mark moves.
func TestDeadLetterRedriveLive(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	publishNumbered(t, broker.Addr(), "orders", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, broker.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Fetch(ctx, "orders", "billing", client.FetchOptions{MaxRecords: 3})
	if err != nil || len(got.Messages) != 3 {
		t.Fatalf("fetch: %v %+v", err, got)
	}
	if _, err := c.Reject(ctx, "orders", "billing", got.Messages...); err != nil {
		t.Fatal(err)
	}
	c.Close()

	for run, want := range []uint64{3, 0} {
		redrive := runCLI(t, "dlq", "redrive", "--addr", broker.Addr(), "--stream", "orders", "--json")
		expectCode(t, redrive, exitClean)
		var out redriveOutput
		if err := json.Unmarshal([]byte(redrive.stdout), &out); err != nil || out.Republished != want || out.Queue.Redriven != 3 {
			t.Fatalf("redrive %d: %q %v", run, redrive.stdout, err)
		}
	}
	queues := runCLI(t, "dlq", "ls", "--addr", broker.Addr(), "--json")
	expectCode(t, queues, exitClean)
	var listed deadLettersOutput
	if err := json.Unmarshal([]byte(queues.stdout), &listed); err != nil || len(listed.Queues) != 1 || listed.Queues[0].Redriven != 3 {
		t.Fatalf("dlq ls --addr: %q %v", queues.stdout, err)
	}
	lines := subLines(t, "--addr", broker.Addr(), "--stream", "orders", "--group", "audit", "--wait", "300ms", "--max", "0")
	count := map[string]int{}
	for _, line := range lines {
		count[line[strings.Index(line, "payload="):]]++
	}
	for i, want := range []int{2, 2, 2, 1} {
		if payload := "payload=line-" + string(rune('0'+i)); count[payload] != want {
			t.Fatalf("%s is in the stream %d times, want %d: %q", payload, count[payload], want, lines)
		}
	}

	// Offline: refused while the broker holds the directory, then allowed.
	offline := []string{"group", "reset", "--data-dir", dataDir, "--stream", "orders", "--group", "audit", "--to", "latest"}
	expectCode(t, runCLI(t, offline...), exitLocked)
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop exited %d", code)
	}
	expectCode(t, runCLI(t, offline...), exitClean)
	info := runCLI(t, "group", "info", "--data-dir", dataDir, "--stream", "orders", "--group", "audit")
	if !strings.Contains(info.stdout, "committed 7 of 7") {
		t.Fatalf("after an offline reset: %q", info.stdout)
	}
	expectCode(t, runCLI(t, "group", "rm", "--data-dir", dataDir, "--stream", "orders", "--group", "audit"), exitClean)
	expectCode(t, runCLI(t, "group", "info", "--data-dir", dataDir, "--stream", "orders", "--group", "audit"), exitNotFound)
}
