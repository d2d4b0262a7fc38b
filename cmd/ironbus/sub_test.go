package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// publishNumbered publishes line-0 … line-(n-1) to stream through `ironbus pub`.
func publishNumbered(t *testing.T, addr, stream string, n int) {
	t.Helper()
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprint("line-", i))
	}
	pub := ironbus.Command("pub", "--addr", addr, "--stream", stream)
	pub.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := pub.CombinedOutput(); err != nil {
		t.Fatalf("pub: %v\n%s", err, out)
	}
}

func subLines(t *testing.T, args ...string) []string {
	t.Helper()
	result := runCLI(t, append([]string{"sub"}, args...)...)
	expectCode(t, result, exitClean)
	text := strings.TrimSpace(result.stdout)
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// TestSubGroupTypesAndStarts drives every group type and start position
// through the CLI against a real broker.
func TestSubGroupTypesAndStarts(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	publishNumbered(t, broker.Addr(), "events", 10)
	at := []string{"--addr", broker.Addr(), "--stream", "events", "--wait", "300ms"}

	if got := subLines(t, append(at, "--group", "late", "--from", "7", "--ack")...); len(got) != 3 || got[0] != "#7 key= payload=line-7" {
		t.Fatalf("--from 7 printed %q", got)
	}
	if got := subLines(t, append(at, "--group", "tail", "--from", "latest")...); len(got) != 0 {
		t.Fatalf("--from latest printed %q", got)
	}
	if got := subLines(t, append(at, "--group", "future", "--from-time", "2999-01-01T00:00:00Z")...); len(got) != 0 {
		t.Fatalf("--from-time in the future printed %q", got)
	}

	// Broadcast: --ack moves the cursor, so a second reader starts after it.
	if got := subLines(t, append(at, "--group", "fan", "--broadcast", "--max", "4", "--ack")...); len(got) != 4 {
		t.Fatalf("broadcast printed %q", got)
	}
	if got := subLines(t, append(at, "--group", "fan", "--broadcast", "--max", "1")...); len(got) != 1 || got[0] != "#4 key= payload=line-4" {
		t.Fatalf("broadcast after a cumulative ack printed %q", got)
	}
	settle := runCLI(t, "cumulative-ack", "--addr", broker.Addr(), "--stream", "events", "--group", "fan", "--up-to", "5", "--json")
	expectCode(t, settle, exitClean)
	if !strings.Contains(settle.stdout, `"up_to":5`) {
		t.Fatalf("cumulative-ack --json printed %q", settle.stdout)
	}
	if got := subLines(t, append(at, "--group", "fan", "--broadcast", "--max", "1")...); len(got) != 1 || got[0] != "#5 key= payload=line-5" {
		t.Fatalf("broadcast after cumulative-ack printed %q", got)
	}
	beyond := runCLI(t, "cumulative-ack", "--addr", broker.Addr(), "--stream", "events", "--group", "fan", "--up-to", "9")
	expectCode(t, beyond, exitDamage)
	if !strings.Contains(beyond.stderr, "out_of_range") {
		t.Fatalf("settling past what was read: %q", beyond.stderr)
	}

	// Streaming: --ack commits the position.
	if got := subLines(t, append(at, "--group", "replay", "--streaming", "--max", "5", "--ack")...); len(got) != 5 {
		t.Fatalf("streaming printed %q", got)
	}
	if got := subLines(t, append(at, "--group", "replay", "--streaming", "--max", "1")...); len(got) != 1 || got[0] != "#5 key= payload=line-5" {
		t.Fatalf("streaming after a commit printed %q", got)
	}

	// A group keeps its type: consuming it as another is refused by name.
	mismatch := runCLI(t, append([]string{"sub"}, append(at, "--group", "replay", "--key-shared")...)...)
	expectCode(t, mismatch, exitDamage)
	if !strings.Contains(mismatch.stderr, "streaming") || !strings.Contains(mismatch.stderr, "key-shared") {
		t.Fatalf("type mismatch does not name both types: %q", mismatch.stderr)
	}
}

// TestSubSettleFlags: --term settles for good, --nack with --nack-delay
// brings the records back after the delay.
func TestSubSettleFlags(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	publishNumbered(t, broker.Addr(), "jobs", 3)
	at := []string{"--addr", broker.Addr(), "--stream", "jobs", "--wait", "300ms"}
	if got := subLines(t, append(at, "--group", "w", "--max", "1", "--term")...); len(got) != 1 {
		t.Fatalf("--term printed %q", got)
	}
	if got := subLines(t, append(at, "--group", "w", "--max", "2", "--nack", "--nack-delay", "200ms")...); len(got) != 2 {
		t.Fatalf("--nack printed %q", got)
	}
	again := subLines(t, append(at, "--group", "w", "--wait", "2s", "--max", "2", "--ack")...)
	if len(again) != 2 || !strings.HasPrefix(again[0], "#1 ") || !strings.Contains(again[0], "(attempt 2)") {
		t.Fatalf("after --nack-delay the group gave %q, want #1 and #2 on their second attempt", again)
	}
	for _, args := range [][]string{
		{"--group", "w", "--ack", "--term"},
		{"--group", "w", "--broadcast", "--streaming"},
		{"--group", "w", "--nack-delay", "1s"},
		{"--group", "w", "--from", "soon"},
		{"--group", "w", "--from-time", "yesterday"},
		{"--group", "w", "--from", "1", "--from-time", "2026-01-01T00:00:00Z"},
		{"--group", "w", "--broadcast", "--term"},
	} {
		result := runCLI(t, append([]string{"sub", "--addr", broker.Addr()}, args...)...)
		expectCode(t, result, exitUsage)
	}
}

// TestServeConsumerKnobs: --max-deliver and --consume-longpoll-ms reach
// the groups a broker serves.
func TestServeConsumerKnobs(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0",
		"--max-deliver", "2", "--consume-longpoll-ms", "200", "--visibility-timeout", "5s")
	publishNumbered(t, broker.Addr(), "jobs", 1)
	at := []string{"--addr", broker.Addr(), "--stream", "jobs", "--group", "w"}
	for range 2 {
		if got := subLines(t, append(at, "--max", "1", "--nack", "--nack-delay", "1ms", "--wait", "1s")...); len(got) != 1 {
			t.Fatalf("delivery before max-deliver: %q", got)
		}
	}
	if got := subLines(t, append(at, "--wait", "1s")...); len(got) != 0 {
		t.Fatalf("a record delivered twice with --max-deliver 2 came a third time: %q", got)
	}
	// sub itself fetches again until --wait passes; one fetch is capped.
	c := dialConsumer(t, broker.Addr())
	began := time.Now()
	if _, err := c.Fetch(context.Background(), "jobs", "w", client.FetchOptions{Wait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited > 3*time.Second {
		t.Fatalf("an idle fetch asking to wait 5 s parked %v: --consume-longpoll-ms 200 should cap it", waited)
	}
	if got := subLines(t, "--addr", broker.Addr(), "--stream", ".dlq.jobs", "--group", "t", "--wait", "1s"); len(got) != 1 {
		t.Fatalf("the dead-letter queue holds %q", got)
	}
}

// TestCumulativeAckOffline moves a stopped broker's broadcast group forward
// only, under the directory lock.
func TestCumulativeAckOffline(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	publishNumbered(t, broker.Addr(), "events", 10)
	subLines(t, "--addr", broker.Addr(), "--stream", "events", "--group", "fan", "--broadcast", "--max", "2", "--ack", "--wait", "1s")
	subLines(t, "--addr", broker.Addr(), "--stream", "events", "--group", "work", "--max", "1", "--wait", "1s")
	running := runCLI(t, "cumulative-ack", "--data-dir", dataDir, "--stream", "events", "--group", "fan", "--up-to", "6")
	expectCode(t, running, exitLocked)
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop exited %d", code)
	}
	at := []string{"cumulative-ack", "--data-dir", dataDir, "--stream", "events"}
	expectCode(t, runCLI(t, append(at, "--group", "fan", "--up-to", "6")...), exitClean)
	expectCode(t, runCLI(t, append(at, "--group", "fan", "--up-to", "3")...), exitClean) // behind the cursor: nothing
	expectCode(t, runCLI(t, append(at, "--group", "fan", "--up-to", "99")...), exitDamage)
	expectCode(t, runCLI(t, append(at, "--group", "work", "--up-to", "1")...), exitDamage)
	info := runCLI(t, "group", "info", "--data-dir", dataDir, "--stream", "events", "--group", "fan")
	expectCode(t, info, exitClean)
	if !strings.Contains(info.stdout, "committed 6 of 10") {
		t.Fatalf("after an offline cumulative-ack to 6: %s", info.stdout)
	}
}

// freeAddr is a loopback address no one listens on, so a broker can be
// restarted on the address a client knows.
func freeAddr(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	_ = listener.Close()
	return addr
}

// TestSubReconnects stops the broker under a running sub: restarted within
// --reconnect-wait, sub carries on where its group was (the acknowledged
// record is not printed again); not restarted, sub exits 5 saying the
// connection was lost, never 0.
func TestSubReconnects(t *testing.T) {
	dataDir, addr := t.TempDir(), freeAddr(t)
	serve := []string{"serve", "--data-dir", dataDir, "--addr", addr, "--health-addr", "off"}
	broker := ironbus.Serve(t, serve...)
	publishNumbered(t, addr, "events", 1)

	var stdout, stderr lockedBuffer
	sub := ironbus.Command("sub", "--addr", addr, "--stream", "events", "--group", "g", "--max", "2", "--wait", "30s", "--ack")
	sub.Stdout, sub.Stderr = &stdout, &stderr
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first record", func() bool { return strings.Contains(stdout.String(), "payload=line-0") })
	time.Sleep(200 * time.Millisecond) // its ack is on the wire
	broker.Stop(syscall.SIGTERM)
	waitFor(t, "the reconnect notice", func() bool { return strings.Contains(stderr.String(), "reconnecting") })
	restarted := broker.Restart()
	pub := runCLI(t, "pub", "--addr", addr, "--stream", "events", "after-restart")
	expectCode(t, pub, exitClean)
	if err := sub.Wait(); err != nil {
		t.Fatalf("sub across a restart: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if got := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(got) != 2 || got[1] != "#1 key= payload=after-restart" {
		t.Fatalf("sub across a restart printed %q", got)
	}

	// Not restarted: a bounded wait, then exit 5.
	lost := ironbus.Command("sub", "--addr", addr, "--stream", "events", "--group", "h", "--max", "0", "--wait", "30s", "--reconnect-wait", "500ms")
	var lostOut, lostErr lockedBuffer
	lost.Stdout, lost.Stderr = &lostOut, &lostErr
	if err := lost.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the records", func() bool { return strings.Contains(lostOut.String(), "payload=after-restart") })
	restarted.Stop(syscall.SIGTERM)
	err := lost.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitUnreachable || !strings.Contains(lostErr.String(), "lost the connection") {
		t.Fatalf("sub with its broker gone: %v\nstderr:\n%s", err, lostErr.String())
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
