//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

var (
	consumerProcOnce sync.Once
	consumerProcPath string
	consumerProcErr  error
)

// consumerProc is a real consumer process (testdata/consumerproc) holding
// leases until told to acknowledge them.
type consumerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startConsumerProc(t *testing.T, addr, stream, group string, count int, lease time.Duration) *consumerProc {
	t.Helper()
	consumerProcOnce.Do(func() {
		consumerProcPath = filepath.Join(buildDir, "consumerproc")
		build := exec.Command("go", "build", "-o", consumerProcPath, "./testdata/consumerproc")
		if out, err := build.CombinedOutput(); err != nil {
			consumerProcErr = &buildError{err: err, out: string(out)}
		}
	})
	if consumerProcErr != nil {
		t.Fatal(consumerProcErr)
	}
	cmd := ironbus.CommandOf(consumerProcPath, addr, stream, group, strconv.Itoa(count), lease.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	proc := &consumerProc{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	if line := proc.next(t); line != "leased "+strconv.Itoa(count) {
		t.Fatalf("consumer process said %q", line)
	}
	return proc
}

func (p *consumerProc) next(t *testing.T) string {
	t.Helper()
	if !p.lines.Scan() {
		t.Fatalf("the consumer process ended: %v", p.lines.Err())
	}
	return p.lines.Text()
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "building consumerproc: " + e.err.Error() + "\n" + e.out }

// drainGroup fetches and acknowledges until want records came back or
// the deadline passes, checking each is a redelivery.
func drainGroup(t *testing.T, c *client.Client, stream, group string, want int, deadline time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline+5*time.Second)
	defer cancel()
	got := map[uint64]bool{}
	for began := time.Now(); len(got) < want && time.Since(began) < deadline; {
		result, err := c.Fetch(ctx, stream, group, client.FetchOptions{MaxRecords: want, Wait: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range result.Messages {
			if !m.Redelivered || m.Attempt < 2 {
				t.Fatalf("offset %d came as attempt %d (redelivered %v): want a redelivery", m.Offset, m.Attempt, m.Redelivered)
			}
			got[m.Offset] = true
		}
		if _, err := c.Ack(ctx, stream, group, result.Messages...); err != nil {
			t.Fatal(err)
		}
	}
	return len(got)
}

// TestKilledConsumerProcessLeasesComeBackAtOnce: a consumer process
// holding 1,000 one-minute leases is killed with -9; the kernel closes its
// socket and another consumer gets all 1,000 within seconds.
func TestKilledConsumerProcessLeasesComeBackAtOnce(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	if acked := produceUntil(t, broker.Addr(), 1000, 256, 0, nil); len(acked) != 1000 {
		t.Fatalf("%d of 1,000 records acknowledged", len(acked))
	}
	doomed := startConsumerProc(t, broker.Addr(), "orders", "workers", 1000, time.Minute)
	if err := doomed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if got := drainGroup(t, dialConsumer(t, broker.Addr()), "orders", "workers", 1000, 10*time.Second); got != 1000 {
		t.Fatalf("%d of 1,000 leases of the killed consumer came back", got)
	}
	t.Logf("1,000 leases redelivered %v after kill -9", time.Since(killed).Round(time.Millisecond))
}

// TestFrozenConsumerIsFenced: a consumer process frozen with SIGSTOP keeps
// its connection, so its leases lapse only with the visibility timeout;
// then another consumer gets the records, and when the frozen one resumes
// its late acks are fenced: nothing is settled twice.
func TestFrozenConsumerIsFenced(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	if acked := produceUntil(t, broker.Addr(), 10, 16, 0, nil); len(acked) != 10 {
		t.Fatalf("%d of 10 records acknowledged", len(acked))
	}
	frozen := startConsumerProc(t, broker.Addr(), "orders", "workers", 10, time.Second)
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	survivor := dialConsumer(t, broker.Addr())
	early, err := survivor.Fetch(context.Background(), "orders", "workers", client.FetchOptions{})
	if err != nil || len(early.Messages) != 0 {
		t.Fatalf("the frozen consumer's leases went elsewhere before they lapsed: %d (%v)", len(early.Messages), err)
	}
	if got := drainGroup(t, survivor, "orders", "workers", 10, 10*time.Second); got != 10 {
		t.Fatalf("%d of 10 lapsed leases were redelivered", got)
	}
	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(frozen.stdin, "ack\n"); err != nil {
		t.Fatal(err)
	}
	if line := frozen.next(t); line != "acked ok=0 fenced=10" {
		t.Fatalf("the resumed consumer's late acks: %q, want all fenced", line)
	}
}
