package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTopOnceAndJSONAgainstALiveBroker(t *testing.T) {
	t.Parallel()
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--disk-budget", "1GiB")
	workload(t, broker.Addr(), 5)
	addr := broker.HealthAddr()

	screen := runCLI(t, "top", "--once", "--health-addr", addr, "--interval", "200ms")
	expectCode(t, screen, exitClean)
	for _, want := range []string{"IronBus top · live " + addr, "ready", "durability sync", "Throughput", "rec/s", "Fsync", "p99",
		"RAM", "Disk       budget ", "of 1 GiB used", "Streams (1 of 1)", "orders/0", "Groups (1 of 1) · sorted by lag", "workers", "Recovery · 1 logs clean"} {
		if !strings.Contains(screen.stdout, want) {
			t.Errorf("top --once lacks %q:\n%s", want, screen.stdout)
		}
	}
	if strings.Contains(screen.stdout, "\x1b[") {
		t.Errorf("top --once printed escape codes:\n%q", screen.stdout)
	}

	totals := runCLI(t, "top", "--once", "--health-addr", addr, "--interval", "0")
	expectCode(t, totals, exitClean)
	if !strings.Contains(totals.stdout, "Totals since start") || !strings.Contains(totals.stdout, "produced   5 records") {
		t.Errorf("top --once --interval 0 should show totals:\n%s", totals.stdout)
	}

	machine := runCLI(t, "top", "--json", "--health-addr", addr, "--interval", "200ms", "--filter", "work")
	expectCode(t, machine, exitClean)
	var out struct {
		Schema string `json:"schema"`
		Mode   string `json:"mode"`
		Rates  *struct {
			Seconds  float64            `json:"interval_seconds"`
			Produced float64            `json:"produced_records_per_second"`
			Streams  map[string]float64 `json:"stream_records_per_second"`
		} `json:"rates"`
		Admin struct {
			Schema string `json:"schema"`
			Groups []struct {
				Name string `json:"name"`
				Lag  uint64 `json:"lag"`
			} `json:"groups"`
			Streams []json.RawMessage `json:"streams"`
		} `json:"admin"`
	}
	if err := json.Unmarshal([]byte(machine.stdout), &out); err != nil {
		t.Fatalf("top --json: %v\n%s", err, machine.stdout)
	}
	if out.Schema != topSchema || out.Mode != "live" || out.Admin.Schema != "ironbus.admin.v1" {
		t.Errorf("top --json heads: %+v", out)
	}
	if out.Rates == nil || out.Rates.Seconds < 0.2 || out.Rates.Streams == nil {
		t.Errorf("top --json should carry rates over the interval: %s", machine.stdout)
	}
	if len(out.Admin.Groups) != 1 || out.Admin.Groups[0].Name != "workers" || out.Admin.Groups[0].Lag != 1 {
		t.Errorf("top --json groups: %+v", out.Admin.Groups)
	}
	if len(out.Admin.Streams) != 0 {
		t.Errorf("--filter work should hide the stream orders: %d streams", len(out.Admin.Streams))
	}

	expectCode(t, runCLI(t, "top", "--once", "--health-addr", addr, "--sort", "size"), exitUsage)
	expectCode(t, runCLI(t, "top", "--health-addr", addr), exitUsage) // stdout is not a terminal
}

func TestTopAgainstNothing(t *testing.T) {
	t.Parallel()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := listener.Addr().String()
	_ = listener.Close()
	once := runCLI(t, "top", "--once", "--health-addr", nothing)
	expectCode(t, once, exitUnreachable)
	if !strings.Contains(once.stderr, "no broker answers") {
		t.Errorf("top --once against nothing should say so:\n%s", once.stderr)
	}
	machine := runCLI(t, "top", "--json", "--health-addr", nothing)
	expectCode(t, machine, exitUnreachable)
	if !strings.Contains(machine.stdout, `"schema":"ironbus.cli.error.v1"`) {
		t.Errorf("top --json against nothing: %s", machine.stdout)
	}
}

func TestTopOfflineBesideAndAfterABroker(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	workload(t, broker.Addr(), 5)

	// While the broker holds the lock: read without it, streams only.
	beside := runCLI(t, "top", "--data-dir", dataDir, "--once")
	expectCode(t, beside, exitClean)
	for _, want := range []string{"offline " + dataDir, "directory locked", "orders/0", "Groups (0 of 0)"} {
		if !strings.Contains(beside.stdout, want) {
			t.Errorf("top --data-dir beside a broker lacks %q:\n%s", want, beside.stdout)
		}
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker exited %d:\n%s", code, broker.Logs())
	}

	after := runCLI(t, "top", "--data-dir", dataDir, "--once")
	expectCode(t, after, exitClean)
	for _, want := range []string{"read under the directory's lock", "orders/0", "workers", "Recovery · 1 logs clean"} {
		if !strings.Contains(after.stdout, want) {
			t.Errorf("top --data-dir after the broker lacks %q:\n%s", want, after.stdout)
		}
	}
	machine := runCLI(t, "top", "--data-dir", dataDir, "--json")
	expectCode(t, machine, exitClean)
	if !strings.Contains(machine.stdout, `"mode":"offline"`) || !strings.Contains(machine.stdout, `"rates":null`) ||
		!strings.Contains(machine.stdout, `"name":"workers"`) {
		t.Errorf("top --data-dir --json: %s", machine.stdout)
	}
	expectCode(t, runCLI(t, "top", "--data-dir", t.TempDir(), "--once"), exitNotFound)

	// The offline screen: read once, g reads again, q quits.
	session := startTmux(t, "top", "--data-dir", dataDir)
	session.waitFor("IronBus top · offline "+dataDir, "read under the directory's lock", "orders/0", "workers")
	session.keys("g", "s")
	session.waitFor("sorted by in flight", "workers")
	session.keys("q")
	if screen := session.waitFor("TOP-EXITED-"); !strings.Contains(screen, "TOP-EXITED-0") {
		t.Errorf("offline top did not exit cleanly on q:\n%s", screen)
	}
}

// tmuxSession is `ironbus top` running in a detached tmux session of a
// fixed size, on a server of its own so parallel tests never meet.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func startTmux(t *testing.T, args ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("SKIP: tmux is not installed (apt-get install tmux); the TUI test drives top inside it")
	}
	session := &tmuxSession{t: t, socket: fmt.Sprintf("ironbus-top-%d", time.Now().UnixNano())}
	command := shellQuote(ironbus.Path())
	if ironbus.Emulator() != "" {
		command = shellQuote(ironbus.Emulator()) + " " + command
	}
	for _, arg := range args {
		command += " " + shellQuote(arg)
	}
	// The shell prints top's exit code and stays, so the test can read it.
	script := command + "; echo TOP-EXITED-$?; sleep 600"
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", session.socket, "kill-server").Run() })
	session.run("new-session", "-d", "-s", "top", "-x", "160", "-y", "50", "-e", "TERM=xterm-256color", script)
	return session
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (s *tmuxSession) capture() string { return s.run("capture-pane", "-p", "-t", "top") }

// waitFor polls the screen until it holds every wanted string.
func (s *tmuxSession) waitFor(wants ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		screen := s.capture()
		missing := ""
		for _, want := range wants {
			if !strings.Contains(screen, want) {
				missing = want
				break
			}
		}
		if missing == "" {
			return screen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %q:\n%s", missing, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *tmuxSession) keys(keys ...string) {
	s.run(append([]string{"send-keys", "-t", "top"}, keys...)...)
}

func TestTopScreenInTmux(t *testing.T) {
	t.Parallel()
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	workload(t, broker.Addr(), 5)
	session := startTmux(t, "top", "--health-addr", broker.HealthAddr(), "--interval", "200ms")

	session.waitFor("IronBus top · live "+broker.HealthAddr(), "ready", "Throughput (per second", "orders/0", "workers",
		"Groups (1 of 1) · sorted by lag ↓", "s sort · r reverse")
	session.keys("s")
	session.waitFor("sorted by in flight ↓")
	session.keys("r")
	session.waitFor("sorted by in flight ↑")
	session.keys("/", "z", "z", "z", "Enter")
	session.waitFor(`Groups (0 of 1)`, `filter "zzz"`)
	session.keys("/", "Escape")
	session.waitFor("Groups (1 of 1)")
	session.keys("?")
	session.waitFor("keys: s  sort groups")

	// The broker goes away: the screen says so and keeps the last figures.
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker exited %d:\n%s", code, broker.Logs())
	}
	session.waitFor("STALE (showing the last snapshot)", "no broker answers", "workers")

	session.keys("q")
	screen := session.waitFor("TOP-EXITED-")
	if !strings.Contains(screen, "TOP-EXITED-0") {
		t.Errorf("top did not exit cleanly on q:\n%s", screen)
	}
}
