package testbroker

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"
)

// Timeouts of a broker process: to serve after it starts, and to exit
// after a signal (a drain under load takes a while on a loaded machine).
const (
	serveTimeout = 20 * time.Second
	exitTimeout  = 40 * time.Second
)

var (
	addrPattern       = regexp.MustCompile(`msg=serving .*addr=(\S+)`)
	healthAddrPattern = regexp.MustCompile(`msg="health endpoints listening".* health_addr=(\S+)`)
)

// Serve runs the binary with args (`serve …` or `dev …`) and returns once
// it logs the address it serves on. On the network backend
// IRONBUS_TEST_LOOP names, and, for serve without --health-addr, with the
// health endpoints on a free port rather than the fixed default, since
// tests run brokers side by side.
func (b *Binary) Serve(t testing.TB, args ...string) *Process {
	t.Helper()
	if backend := os.Getenv("IRONBUS_TEST_LOOP"); backend != "" && len(args) > 0 && (args[0] == "serve" || args[0] == "dev") {
		args = append(args, "--loop", backend)
	}
	if len(args) > 0 && args[0] == "serve" && !slices.Contains(args, "--health-addr") {
		args = append(args, "--health-addr", "127.0.0.1:0")
	}
	return StartProcess(t, b.Command(args...))
}

// Process is a broker running as its own process.
type Process struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	err    error // the process's exit, once exited is closed

	mu         sync.Mutex
	healthAddr string
	stderr     bytes.Buffer
	stdout     bytes.Buffer
}

// StartProcess runs a prepared broker command (the binary under test,
// or another build of ironbus such as an older release) and returns once
// it logs the address it serves on. The process is killed when the test
// ends.
func StartProcess(t testing.TB, command *exec.Cmd) *Process {
	t.Helper()
	p := &Process{t: t, cmd: command, exited: make(chan struct{})}
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
		_ = stderr.Close()
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
		p.err = err
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select { // gone before the test's other cleanups (an unmount) run
		case <-p.exited:
		case <-time.After(exitTimeout):
		}
	})
	select {
	case p.addr = <-found:
	case <-p.exited:
		t.Fatalf("broker exited before serving: %v\n%s", p.err, p.Logs())
	case <-time.After(serveTimeout):
		t.Fatalf("broker did not start within %v:\n%s", serveTimeout, p.Logs())
	}
	return p
}

func (p *Process) scan(stderr io.Reader, found chan<- string) {
	lines := bufio.NewScanner(stderr)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
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
	// Keep draining after an overlong line, so the process never blocks
	// on a full pipe.
	_, _ = io.Copy(io.Discard, stderr)
}

// Addr is where the broker serves clients.
func (p *Process) Addr() string { return p.addr }

// HealthAddr is where the broker's health endpoints listen ("" when off).
func (p *Process) HealthAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthAddr
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Logs is what the process wrote to stderr so far (its log).
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Output is what the process wrote to stdout so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// Signal sends sig and returns at once.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed once the process has exited and its log is read.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Wait waits until the process exits and returns its exit code (-1 for a
// death by signal), failing the test after 40 s.
func (p *Process) Wait() int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
		p.t.Fatalf("broker did not exit within %v:\n%s", exitTimeout, p.Logs())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// Stop sends sig and returns the exit code.
func (p *Process) Stop(sig os.Signal) int {
	p.t.Helper()
	_ = p.Signal(sig)
	return p.Wait()
}

// Kill kills the process with SIGKILL (kill -9: no drain, no final sync)
// and waits until it is gone, so another broker can take its data
// directory.
func (p *Process) Kill() {
	p.t.Helper()
	_ = p.cmd.Process.Kill()
	p.Wait()
}

// Restart starts the same command line again (the same binary, data
// directory and flags) once the process has exited, as an operator
// restarts a broker that crashed or stopped, and returns once the new
// process serves. A port of 0 gets a new free port; a fixed one is taken
// again.
func (p *Process) Restart() *Process {
	p.t.Helper()
	select {
	case <-p.exited:
	default:
		p.t.Fatal("Restart of a broker that is still running: Stop or Kill it first")
	}
	command := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	command.Env, command.Dir = p.cmd.Env, p.cmd.Dir
	return StartProcess(p.t, command)
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
