package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// brokerProcess is a real `ironbus serve` (or `dev`) process.
type brokerProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	// healthAddr is where the health endpoints listen ("" when off).
	healthAddr string
	mu         sync.Mutex
	stderr     bytes.Buffer
	stdout     bytes.Buffer
	exited     chan error
}

var (
	addrPattern       = regexp.MustCompile(`msg=serving .*addr=(\S+)`)
	healthAddrPattern = regexp.MustCompile(`msg="health endpoints listening".* health_addr=(\S+)`)
)

// startBroker runs the binary with args and waits until it logs the address
// it serves on.
func startBroker(t *testing.T, args ...string) *brokerProcess {
	t.Helper()
	if backend := os.Getenv("IRONBUS_TEST_LOOP"); backend != "" && (args[0] == "serve" || args[0] == "dev") {
		args = append(args, "--loop", backend)
	}
	if args[0] == "serve" && !slices.Contains(args, "--health-addr") {
		// Tests run brokers side by side: each gets a free port rather
		// than the fixed default.
		args = append(args, "--health-addr", "127.0.0.1:0")
	}
	return startBrokerCommand(t, ironbusCommand(args...))
}

// startBrokerCommand runs a prepared broker command (another ironbus
// binary, such as an older release) and waits until it serves.
func startBrokerCommand(t *testing.T, command *exec.Cmd) *brokerProcess {
	t.Helper()
	p := &brokerProcess{t: t, cmd: command, exited: make(chan error, 1)}
	// An os.Pipe rather than StderrPipe: Wait closes a StderrPipe when the
	// process exits and can cut off its last log lines ("stopped cleanly").
	stderr, logWriter, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = logWriter
	p.cmd.Stdout = &lockedWriter{mu: &p.mu, w: &p.stdout}
	err = p.cmd.Start()
	_ = logWriter.Close()
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	logRead := make(chan struct{})
	go func() {
		defer close(logRead)
		defer stderr.Close()
		p.scan(stderr, found)
	}()
	go func() {
		err := p.cmd.Wait()
		<-logRead // every line the process wrote is in the log first
		p.exited <- err
	}()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	select {
	case p.addr = <-found:
	case err := <-p.exited:
		t.Fatalf("broker exited before serving: %v\n%s", err, p.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("broker did not start:\n%s", p.logs())
	}
	return p
}

func (p *brokerProcess) scan(stderr io.Reader, found chan<- string) {
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		line := lines.Text()
		p.mu.Lock()
		p.stderr.WriteString(line + "\n")
		if m := healthAddrPattern.FindStringSubmatch(line); m != nil && p.healthAddr == "" {
			p.healthAddr = m[1]
		}
		p.mu.Unlock()
		if m := addrPattern.FindStringSubmatch(line); m != nil {
			select {
			case found <- m[1]:
			default:
			}
		}
	}
}

func (p *brokerProcess) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// health returns where the broker's health endpoints listen.
func (p *brokerProcess) health() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthAddr
}

func (p *brokerProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// stop sends sig and returns the exit code.
func (p *brokerProcess) stop(sig os.Signal) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case err := <-p.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return 0
	case <-time.After(40 * time.Second):
		p.t.Fatalf("broker did not exit after %v:\n%s", sig, p.logs())
		return -1
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

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
	producer := c.NewProducer("orders", client.ProducerOptions{Window: window})
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
	broker := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	acked := produceUntil(t, broker.addr, 10_000, 256, 3_000, func() {
		_ = broker.cmd.Process.Signal(syscall.SIGKILL)
	})
	<-broker.exited
	if len(acked) < 3_000 {
		t.Fatalf("only %d records acknowledged before the kill", len(acked))
	}
	restarted := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	stored := readAllRecords(t, restarted.addr)
	checkAcknowledged(t, acked, stored)
	t.Logf("%d acknowledged before kill -9, %d stored after restart", len(acked), len(stored))
	if code := restarted.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}

func TestServePipelinedTenThousand(t *testing.T) {
	broker := startBroker(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	acked := produceUntil(t, broker.addr, 10_000, 1024, 0, nil)
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
			t.Logf("broker log:\n%s", broker.logs())
		}
	})
	checkAcknowledged(t, acked, readAllRecords(t, broker.addr))
}

func TestServeDrainUnderLoad(t *testing.T) {
	dataDir := t.TempDir()
	broker := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	exitCode := make(chan int, 1)
	acked := produceUntil(t, broker.addr, 200_000, 512, 2_000, func() {
		go func() { exitCode <- broker.stop(syscall.SIGTERM) }()
	})
	if code := <-exitCode; code != 0 {
		t.Fatalf("SIGTERM drain exited %d:\n%s", code, broker.logs())
	}
	if !strings.Contains(broker.logs(), "stopped cleanly") {
		t.Fatalf("no clean stop in the log:\n%s", broker.logs())
	}
	restarted := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	checkAcknowledged(t, acked, readAllRecords(t, restarted.addr))
	t.Logf("%d acknowledged before the drain finished", len(acked))
}

func TestPubSubCommands(t *testing.T) {
	broker := startBroker(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, fmt.Sprint("line-", i))
	}
	pub := ironbusCommand("pub", "--addr", broker.addr, "--window", "8")
	pub.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := pub.Output()
	if err != nil {
		t.Fatalf("pub: %v", err)
	}
	offsets := strings.Fields(string(out))
	if len(offsets) != 100 || offsets[0] != "0" || offsets[99] != "99" {
		t.Fatalf("pub printed %d offsets: %q", len(offsets), offsets)
	}
	sub := runCLI(t, "sub", "--addr", broker.addr, "--group", "g", "--max", "100", "--ack", "--wait", "2s")
	expectCode(t, sub, exitClean)
	got := strings.Split(strings.TrimSpace(sub.stdout), "\n")
	if len(got) != 100 || got[5] != "#5 key= payload=line-5" {
		t.Fatalf("sub printed %d lines, line 5 %q", len(got), got[min(5, len(got)-1)])
	}
	again := runCLI(t, "sub", "--addr", broker.addr, "--group", "g", "--wait", "300ms")
	if strings.TrimSpace(again.stdout) != "" {
		t.Fatalf("acked records came back: %q", again.stdout)
	}
	unreachable := runCLI(t, "pub", "--addr", "127.0.0.1:1", "x")
	expectCode(t, unreachable, exitLocked)

	pubJSON := runCLI(t, "pub", "--addr", broker.addr, "--json", "--key", "k1", "json payload")
	expectCode(t, pubJSON, exitClean)
	var ack struct{ Offset, Partition uint64 }
	if err := json.Unmarshal([]byte(pubJSON.stdout), &ack); err != nil || ack.Offset != 100 {
		t.Fatalf("pub --json: %q %v", pubJSON.stdout, err)
	}
	subJSON := runCLI(t, "sub", "--addr", broker.addr, "--group", "json", "--max", "1", "--json", "--wait", "1s")
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
	first := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	second := runCLI(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--health-addr", "off")
	expectCode(t, second, exitLocked)
	if !strings.Contains(second.stderr, "held by ironbus serve (pid") {
		t.Fatalf("the lock error should name the holder:\n%s", second.stderr)
	}
	if code := first.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	open := startBroker(t, "serve", "--data-dir", t.TempDir(), "--addr", "0.0.0.0:0", "--insecure-plaintext-wire", "--auth-config", writeAuthConfig(t))
	open.stop(syscall.SIGTERM)
}

func TestDevRunsAThrowawayBroker(t *testing.T) {
	dev := startBroker(t, "dev", "--addr", "127.0.0.1:0", "--seed", "5")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(dev.output(), "ironbus sub --addr") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	output := dev.output()
	if !strings.Contains(output, "ironbus pub --addr "+dev.addr) || !strings.Contains(output, "Seeded 5") {
		t.Fatalf("dev output:\n%s", output)
	}
	sub := runCLI(t, "sub", "--addr", dev.addr, "--group", "g", "--max", "5", "--wait", "2s")
	if lines := strings.Count(sub.stdout, "\n"); lines != 5 {
		t.Fatalf("read %d seeded records:\n%s", lines, sub.stdout)
	}
	dataDir := regexp.MustCompile(`data in (\S+),`).FindStringSubmatch(output)
	if code := dev.stop(syscall.SIGINT); code != 0 {
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
