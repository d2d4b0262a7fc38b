package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// produceUntil sends records "m-<i>" through a pipelined producer until n
// are sent or the connection breaks, and returns every acknowledged
// offset with its payload. stopAfter, when > 0, is called once that many
// acks arrived.
func produceUntil(t *testing.T, addr string, n, window int, stopAfter int, onStop func()) map[uint64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Window: window})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Callers stop or kill the broker under it and count what was acked:
	// a producer that kept reconnecting would only wait out its timeout.
	producer := c.NewProducer("orders", client.ProducerOptions{Window: window, ReconnectTimeout: -1})
	acked := map[uint64]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for result := range producer.Results() {
			if result.Err != nil {
				continue
			}
			acked[result.Ack.Offset] = fmt.Sprint("m-", result.Sequence)
			if len(acked) == stopAfter && onStop != nil {
				onStop()
			}
		}
	}()
	for i := 0; i < n; i++ {
		if err := producer.Send(ctx, client.Record{Payload: []byte(fmt.Sprint("m-", i))}); err != nil {
			break
		}
	}
	_ = producer.Close()
	<-done
	return acked
}

// readAllRecords reads a stream from the start through a new work group.
func readAllRecords(t *testing.T, addr string) []client.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var all []client.Message
	for {
		result, err := c.Fetch(ctx, "orders", "audit", client.FetchOptions{MaxRecords: 5000, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(result.Messages) == 0 {
			return all
		}
		all = append(all, result.Messages...)
		if _, err := c.Ack(ctx, "orders", "audit", result.Messages...); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAcknowledged asserts every acknowledged record is present, in
// offset order, with its payload.
func checkAcknowledged(t *testing.T, acked map[uint64]string, stored []client.Message) {
	t.Helper()
	byOffset := map[uint64]string{}
	for i, m := range stored {
		if i > 0 && m.Offset <= stored[i-1].Offset {
			t.Fatalf("offsets out of order: %d after %d", m.Offset, stored[i-1].Offset)
		}
		byOffset[m.Offset] = string(m.Payload)
	}
	for offset, payload := range acked {
		if got, ok := byOffset[offset]; !ok || got != payload {
			t.Fatalf("acknowledged offset %d (%s) came back as %q (present %v)", offset, payload, got, ok)
		}
	}
}

func TestServeKill9LosesNothingAcknowledged(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	acked := produceUntil(t, broker.Addr(), 10_000, 256, 3_000, func() {
		_ = broker.Signal(syscall.SIGKILL)
	})
	broker.Wait()
	if len(acked) < 3_000 {
		t.Fatalf("only %d records acknowledged before the kill", len(acked))
	}
	restarted := broker.Restart()
	stored := readAllRecords(t, restarted.Addr())
	checkAcknowledged(t, acked, stored)
	t.Logf("%d acknowledged before kill -9, %d stored after restart", len(acked), len(stored))
	if code := restarted.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}

func TestServePipelinedTenThousand(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	acked := produceUntil(t, broker.Addr(), 10_000, 1024, 0, nil)
	if len(acked) != 10_000 {
		t.Fatalf("%d of 10,000 acknowledged", len(acked))
	}
	for offset := uint64(0); offset < 10_000; offset++ {
		if acked[offset] != fmt.Sprint("m-", offset) {
			t.Fatalf("offset %d holds %q: one connection's records must keep their order", offset, acked[offset])
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log:\n%s", broker.Logs())
		}
	})
	checkAcknowledged(t, acked, readAllRecords(t, broker.Addr()))
}

func TestServeDrainUnderLoad(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	exitCode := make(chan int, 1)
	acked := produceUntil(t, broker.Addr(), 200_000, 512, 2_000, func() {
		go func() { exitCode <- broker.Stop(syscall.SIGTERM) }()
	})
	if code := <-exitCode; code != 0 {
		t.Fatalf("SIGTERM drain exited %d:\n%s", code, broker.Logs())
	}
	if !strings.Contains(broker.Logs(), "stopped cleanly") {
		t.Fatalf("no clean stop in the log:\n%s", broker.Logs())
	}
	restarted := broker.Restart()
	checkAcknowledged(t, acked, readAllRecords(t, restarted.Addr()))
	t.Logf("%d acknowledged before the drain finished", len(acked))
}

func TestPubSubCommands(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, fmt.Sprint("line-", i))
	}
	pub := ironbus.Command("pub", "--addr", broker.Addr(), "--window", "8")
	pub.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := pub.Output()
	if err != nil {
		t.Fatalf("pub: %v", err)
	}
	offsets := strings.Fields(string(out))
	if len(offsets) != 100 || offsets[0] != "0" || offsets[99] != "99" {
		t.Fatalf("pub printed %d offsets: %q", len(offsets), offsets)
	}
	sub := runCLI(t, "sub", "--addr", broker.Addr(), "--group", "g", "--max", "100", "--ack", "--wait", "2s")
	expectCode(t, sub, exitClean)
	got := strings.Split(strings.TrimSpace(sub.stdout), "\n")
	if len(got) != 100 || got[5] != "#5 key= payload=line-5" {
		t.Fatalf("sub printed %d lines, line 5 %q", len(got), got[min(5, len(got)-1)])
	}
	again := runCLI(t, "sub", "--addr", broker.Addr(), "--group", "g", "--wait", "300ms")
	if strings.TrimSpace(again.stdout) != "" {
		t.Fatalf("acked records came back: %q", again.stdout)
	}
	unreachable := runCLI(t, "pub", "--addr", "127.0.0.1:1", "x")
	expectCode(t, unreachable, exitLocked)

	pubJSON := runCLI(t, "pub", "--addr", broker.Addr(), "--json", "--key", "k1", "json payload")
	expectCode(t, pubJSON, exitClean)
	var ack struct{ Offset, Partition uint64 }
	if err := json.Unmarshal([]byte(pubJSON.stdout), &ack); err != nil || ack.Offset != 100 {
		t.Fatalf("pub --json: %q %v", pubJSON.stdout, err)
	}
	subJSON := runCLI(t, "sub", "--addr", broker.Addr(), "--group", "json", "--max", "1", "--json", "--wait", "1s")
	var message subMessage
	if err := json.Unmarshal([]byte(strings.TrimSpace(subJSON.stdout)), &message); err != nil || message.Payload != "line-0" {
		t.Fatalf("sub --json: %q %v", subJSON.stdout, err)
	}
}

func TestServeAddressAndLockSafety(t *testing.T) {
	refused := runCLI(t, "serve", "--data-dir", t.TempDir(), "--addr", "0.0.0.0:0")
	expectCode(t, refused, exitUsage)
	if !strings.Contains(refused.stderr, "--insecure-plaintext-wire") {
		t.Fatalf("the refusal should say how to opt in:\n%s", refused.stderr)
	}
	dataDir := t.TempDir()
	first := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	second := runCLI(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--health-addr", "off")
	expectCode(t, second, exitLocked)
	if !strings.Contains(second.stderr, "held by ironbus serve (pid") {
		t.Fatalf("the lock error should name the holder:\n%s", second.stderr)
	}
	if code := first.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	open := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "0.0.0.0:0", "--insecure-plaintext-wire", "--auth-config", writeAuthConfig(t))
	open.Stop(syscall.SIGTERM)
}

func TestDevRunsAThrowawayBroker(t *testing.T) {
	dev := ironbus.Serve(t, "dev", "--addr", "127.0.0.1:0", "--seed", "5")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(dev.Output(), "ironbus sub --addr") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	output := dev.Output()
	if !strings.Contains(output, "ironbus pub --addr "+dev.Addr()) || !strings.Contains(output, "Seeded 5") {
		t.Fatalf("dev output:\n%s", output)
	}
	sub := runCLI(t, "sub", "--addr", dev.Addr(), "--group", "g", "--max", "5", "--wait", "2s")
	if lines := strings.Count(sub.stdout, "\n"); lines != 5 {
		t.Fatalf("read %d seeded records:\n%s", lines, sub.stdout)
	}
	dataDir := regexp.MustCompile(`data in (\S+),`).FindStringSubmatch(output)
	if code := dev.Stop(syscall.SIGINT); code != 0 {
		t.Fatalf("dev exit %d", code)
	}
	if len(dataDir) < 2 {
		t.Fatalf("dev did not say where its data is:\n%s", output)
	}
	if _, err := os.Stat(dataDir[1]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dev left its data directory behind: %v", err)
	}
}

// TestServeRefusesBadDataDirAndBounds: a --data-dir that is a file is a
// clear "not a directory" (exit 2), and a setting out of its bounds is a
// usage error naming the flag, the value and the range, from a flag or a
// file alike, before anything is opened.
func TestServeRefusesBadDataDirAndBounds(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	result := runCLI(t, "serve", "--data-dir", file, "--addr", "127.0.0.1:0", "--health-addr", "off")
	expectCode(t, result, exitNotFound)
	if !strings.Contains(result.stderr, "is a file") {
		t.Errorf("a data directory that is a file:\n%s", result.stderr)
	}
	config := writeConfig(t, "", "segment_bytes = 12\n")
	for _, args := range [][]string{
		{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--segment-bytes", "12"},
		{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--config", config},
		{"config", "check", config},
	} {
		result := runCLI(t, args...)
		expectCode(t, result, exitUsage)
		if !strings.Contains(result.stderr, "--segment-bytes 12 B (segment_bytes): out of bounds, want 64 KiB to 1 GiB") {
			t.Errorf("%v:\n%s", args, result.stderr)
		}
	}
}
