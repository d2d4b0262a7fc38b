package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// TestGroupAndDeadLetterListings: a poison record's journey as the offline
// tools show it: its group's delivery counts, then its dead-letter queue.
func TestGroupAndDeadLetterListings(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	publishNumbered(t, broker.Addr(), "orders", 3)
	at := []string{"--addr", broker.Addr(), "--stream", "orders", "--group", "billing", "--wait", "1s"}
	for range 5 {
		subLines(t, append(at, "--max", "3", "--nack", "--nack-delay", "1ms")...)
	}
	// The sixth fetch finds every record at max-deliver and moves it.
	if got := subLines(t, append(at, "--max", "3")...); len(got) != 0 {
		t.Fatalf("records past max-deliver were delivered again: %q", got)
	}
	if live := subLines(t, "--addr", broker.Addr(), "--stream", ".dlq.orders", "--group", "triage", "--max", "3", "--wait", "1s"); len(live) != 3 {
		t.Fatalf("the live dead-letter stream gave %q", live)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop exited %d", code)
	}

	groups := runCLI(t, "group", "ls", "--data-dir", dataDir, "--json")
	expectCode(t, groups, exitClean)
	var listed groupsOutput
	if err := json.Unmarshal([]byte(groups.stdout), &listed); err != nil {
		t.Fatalf("group ls --json: %q %v", groups.stdout, err)
	}
	if len(listed.Groups) != 1 || listed.Groups[0].Group != "billing" || listed.Groups[0].Committed != 3 || listed.Groups[0].Type != "work" {
		t.Fatalf("group ls: %+v", listed.Groups)
	}
	info := runCLI(t, "group", "info", "--data-dir", dataDir, "--stream", "orders", "--group", "billing")
	expectCode(t, info, exitClean)
	if !strings.Contains(info.stdout, "orders/0 billing: work, committed 3 of 3") {
		t.Fatalf("group info: %q", info.stdout)
	}
	missing := runCLI(t, "group", "info", "--data-dir", dataDir, "--stream", "orders", "--group", "nobody")
	expectCode(t, missing, exitNotFound)

	queues := runCLI(t, "dlq", "ls", "--data-dir", dataDir)
	expectCode(t, queues, exitClean)
	if !strings.Contains(queues.stdout, "orders: 3 records") || !strings.Contains(queues.stdout, ".dlq.orders") {
		t.Fatalf("dlq ls: %q", queues.stdout)
	}
	peek := runCLI(t, "dlq", "peek", "--data-dir", dataDir, "--stream", "orders")
	expectCode(t, peek, exitClean)
	if !strings.Contains(peek.stdout, "#0 from orders/0#0 group=billing attempts=5 reason=max-deliver payload=line-0") {
		t.Fatalf("dlq peek: %q", peek.stdout)
	}
	verify := runCLI(t, "verify", "--data-dir", dataDir)
	expectCode(t, verify, exitClean)
	if !strings.Contains(verify.stdout, "dead-letter queues (deadletters/):") || !strings.Contains(verify.stdout, "verified 2 logs") {
		t.Fatalf("verify does not cover the dead-letter queues:\n%s", verify.stdout)
	}
	for round, want := range []string{`"republished":3`, `"republished":0`} {
		redrive := runCLI(t, "dlq", "redrive", "--data-dir", dataDir, "--stream", "orders", "--json")
		expectCode(t, redrive, exitClean)
		if !strings.Contains(redrive.stdout, want) {
			t.Fatalf("offline redrive round %d: %s", round+1, redrive.stdout)
		}
	}
	dump := runCLI(t, "dump", "--data-dir", dataDir, "--stream", "orders", "--limit", "0")
	expectCode(t, dump, exitClean)
	if lines := strings.Count(dump.stdout, "\n"); lines != 6 || strings.Count(dump.stdout, "ironbus-redriven-from") != 3 {
		t.Fatalf("after two offline redrives the stream holds %d records:\n%s", lines, dump.stdout)
	}
	empty := runCLI(t, "dlq", "ls", "--data-dir", t.TempDir())
	expectCode(t, empty, exitNotFound)
}
