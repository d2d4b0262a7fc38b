package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ironbus/ironbus/arena"
)

// benchTarget is the broker under load: one bench started (a child
// process it can measure) or a live one at --addr.
type benchTarget struct {
	addr string
	live bool

	dataDir string
	tlsDir  string // the throwaway certificate of --tls (bench_tls.go)
	cmd     *exec.Cmd
	exited  chan error
	logRead chan struct{} // closed once the broker's log ended (its stop line read)

	mu         sync.Mutex
	syncs      uint64
	stopped    bool
	logTail    []string
	peakRSS    int64
	writeStart int64
	writeEnd   int64
	sampling   chan struct{}
	sampled    chan struct{}
}

// start runs `ironbus serve` on a fresh temporary directory and waits
// until it serves.
func (t *benchTarget) start(plan *benchPlan) error {
	self, err := os.Executable()
	if err != nil {
		return exitErrorf(exitInternal, "bench: finding this binary: %w", err)
	}
	if t.dataDir, err = os.MkdirTemp("", "ironbus-bench-"); err != nil {
		return exitErrorf(exitUnreadable, "bench: temporary data directory: %w", err)
	}
	args := []string{"serve", "--json", "--data-dir", t.dataDir, "--addr", "127.0.0.1:0", "--health-addr", "off",
		"--durability", plan.durability, "--max-connections", strconv.Itoa(plan.producers + plan.consumers + 16)}
	args = append(args, plan.knobs...)
	if plan.durability != "sync" {
		args = append(args, "--accept-relaxed-durability")
	}
	if plan.profileOut != "" {
		args = append(args, "--profile-out", plan.profileOut)
	}
	if plan.tls {
		secure, err := t.prepareTLS(plan)
		if err != nil {
			t.remove()
			return err
		}
		args = append(args, secure...)
	}
	t.cmd = exec.Command(self, args...)
	// An os.Pipe rather than StderrPipe: Wait closes a StderrPipe as soon
	// as the process exits, which can cut off its last log line (the sync
	// count); this reader sees EOF only after the broker wrote everything.
	stderr, logWriter, err := os.Pipe()
	if err != nil {
		return exitErrorf(exitInternal, "bench: %w", err)
	}
	t.cmd.Stderr = logWriter
	err = t.cmd.Start()
	_ = logWriter.Close() // the child holds its own copy
	if err != nil {
		_ = stderr.Close()
		t.remove()
		return exitErrorf(exitInternal, "bench: starting the broker: %w", err)
	}
	t.exited, t.logRead = make(chan error, 1), make(chan struct{})
	serving := make(chan string, 1)
	go t.readLog(stderr, serving)
	go func() { t.exited <- t.cmd.Wait() }()
	select {
	case t.addr = <-serving:
	case err := <-t.exited:
		t.remove()
		return exitErrorf(exitInternal, "bench: the broker exited before serving (%v):\n%s", err, t.tail())
	case <-time.After(30 * time.Second):
		_ = t.cmd.Process.Kill()
		t.remove()
		return exitErrorf(exitInternal, "bench: the broker did not start within 30 s:\n%s", t.tail())
	}
	t.writeStart = readProcessField(t.cmd.Process.Pid, "io", "write_bytes")
	t.sampling, t.sampled = make(chan struct{}), make(chan struct{})
	go t.sampleRSS()
	return nil
}

// readLog follows the broker's JSON log: the serving line gives the
// address, the stopped line the fdatasync count.
func (t *benchTarget) readLog(stderr io.ReadCloser, serving chan<- string) {
	defer close(t.logRead)
	defer stderr.Close()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var line struct {
			Message string `json:"msg"`
			Addr    string `json:"addr"`
			Syncs   uint64 `json:"syncs"`
		}
		text := lines.Text()
		t.mu.Lock()
		t.logTail = append(t.logTail[max(0, len(t.logTail)-20):], text)
		t.mu.Unlock()
		if json.Unmarshal([]byte(text), &line) != nil {
			continue
		}
		switch line.Message {
		case "serving":
			select {
			case serving <- line.Addr:
			default:
			}
		case "stopped cleanly":
			t.mu.Lock()
			t.syncs, t.stopped = line.Syncs, true
			t.mu.Unlock()
		}
	}
}

func (t *benchTarget) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.logTail, "\n")
}

func (t *benchTarget) sampleRSS() {
	defer close(t.sampled)
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		if rss, err := arena.ReadAnonymousOf(t.cmd.Process.Pid); err == nil {
			t.mu.Lock()
			t.peakRSS = max(t.peakRSS, rss)
			t.mu.Unlock()
		}
		select {
		case <-t.sampling:
			return
		case <-ticker.C:
		}
	}
}

// stop drains the broker (SIGTERM) and waits for its last log line.
func (t *benchTarget) stop() error {
	if t.cmd == nil || t.sampling == nil {
		return nil
	}
	t.writeEnd = readProcessField(t.cmd.Process.Pid, "io", "write_bytes")
	close(t.sampling)
	<-t.sampled
	t.sampling = nil
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exitErrorf(exitInternal, "bench: the broker exited %d while draining:\n%s", exit.ExitCode(), t.tail())
		}
	case <-time.After(60 * time.Second):
		_ = t.cmd.Process.Kill()
		return exitErrorf(exitInternal, "bench: the broker did not drain within 60 s")
	}
	// The process has exited; its last log line (the sync count) may still
	// be on its way through the pipe.
	select {
	case <-t.logRead:
	case <-time.After(5 * time.Second):
	}
	return nil
}

func (t *benchTarget) remove() {
	if t.dataDir != "" {
		_ = os.RemoveAll(t.dataDir)
	}
	if t.tlsDir != "" {
		_ = os.RemoveAll(t.tlsDir)
	}
}

// addBrokerFigures copies what the broker process did into result.
func (t *benchTarget) addBrokerFigures(result *benchResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	result.RSSBytes = t.peakRSS
	if t.stopped {
		result.Fsyncs = t.syncs
	}
	if t.writeEnd > t.writeStart {
		result.diskBytes = t.writeEnd - t.writeStart
	}
}

// readProcessField reads "Name: value" from /proc/PID/<file> ("kB" values
// in bytes); 0 where the system does not say (not Linux, no permission).
func readProcessField(pid int, file, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		rest, found := strings.CutPrefix(line, field+":")
		if !found {
			continue
		}
		words := strings.Fields(rest)
		if len(words) == 0 {
			return 0
		}
		value, err := strconv.ParseInt(words[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(words) > 1 && words[1] == "kB" {
			value <<= 10
		}
		return value
	}
	return 0
}
