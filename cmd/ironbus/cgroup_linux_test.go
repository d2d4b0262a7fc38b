package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// memoryCgroup is a memory cgroup made for one test: v2 (memory.max,
// memory.events) or v1 (memory.limit_in_bytes, memory.oom_control).
type memoryCgroup struct {
	path string
	v2   bool
}

// newMemoryCgroup makes a child of this process's memory cgroup limited
// to limit bytes (swap included), or skips the test where that is not
// allowed (not root, no memory controller).
func newMemoryCgroup(t *testing.T, limit int64) *memoryCgroup {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	var parent string
	var v2 bool
	for line := range strings.Lines(string(self)) {
		fields := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(fields) != 3 {
			continue
		}
		if slices := strings.Split(fields[1], ","); contains(slices, "memory") {
			parent, v2 = filepath.Join("/sys/fs/cgroup/memory", fields[2]), false
			break
		}
		if fields[0] == "0" && fields[1] == "" {
			if controllers, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", fields[2], "cgroup.controllers")); err == nil &&
				bytes.Contains(controllers, []byte("memory")) {
				parent, v2 = filepath.Join("/sys/fs/cgroup", fields[2]), true
			}
		}
	}
	if parent == "" {
		t.Skip("no memory cgroup controller is mounted here")
	}
	group := &memoryCgroup{path: filepath.Join(parent, fmt.Sprintf("ironbus-test-%d", os.Getpid())), v2: v2}
	if err := os.Mkdir(group.path, 0o755); err != nil {
		t.Skipf("cannot create a memory cgroup (%v): run as root", err)
	}
	t.Cleanup(func() { _ = os.Remove(group.path) })
	limits := map[string]string{"memory.limit_in_bytes": strconv.FormatInt(limit, 10), "memory.memsw.limit_in_bytes": strconv.FormatInt(limit, 10)}
	if v2 {
		limits = map[string]string{"memory.max": strconv.FormatInt(limit, 10), "memory.swap.max": "0"}
	}
	for _, name := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max", "memory.swap.max"} {
		value, ok := limits[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(group.path, name), []byte(value), 0o644); err != nil && !strings.Contains(name, "sw") {
			t.Skipf("cannot limit the cgroup's memory (%s: %v)", name, err)
		}
	}
	return group
}

func contains(list []string, want string) bool {
	for _, item := range list {
		if item == want {
			return true
		}
	}
	return false
}

// enter moves pid into the cgroup.
func (g *memoryCgroup) enter(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving the broker into the cgroup: %v", err)
	}
}

// oomKills reads how many processes the kernel killed in the cgroup.
func (g *memoryCgroup) oomKills(t *testing.T) int64 {
	t.Helper()
	name := "memory.oom_control"
	if g.v2 {
		name = "memory.events"
	}
	text, err := os.ReadFile(filepath.Join(g.path, name))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(text)) {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == "oom_kill" {
			kills, _ := strconv.ParseInt(fields[1], 10, 64)
			return kills
		}
	}
	return 0
}

// peak reads the cgroup's peak charge (page cache included), or -1.
func (g *memoryCgroup) peak() int64 {
	name := "memory.max_usage_in_bytes"
	if g.v2 {
		name = "memory.peak"
	}
	text, err := os.ReadFile(filepath.Join(g.path, name))
	if err != nil {
		return -1
	}
	value, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
	if err != nil {
		return -1
	}
	return value
}

// TestSixtyFourMiBCgroupFastProducerSlowConsumer runs an --edge broker in
// a 64 MiB memory cgroup (the whole of a small device's allowance, page
// cache included) while pipelined producers outrun a slow consumer: the
// kernel must never kill it, producers are held back by acknowledgement
// (backpressure), and the backlog goes to disk rather than memory.
func TestSixtyFourMiBCgroupFastProducerSlowConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test of several seconds")
	}
	group := newMemoryCgroup(t, 64<<20)
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--edge", "--ram-ceiling", "64MiB")
	group.enter(t, broker.Pid())

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// 160 MiB of records: more than the whole cgroup may hold, so the
	// backlog can only be on disk.
	const perProducer = 40_000
	loadFor := 20 * time.Second
	started := time.Now()
	var produced, consumed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() {
			n, err := produceFor(ctx, broker.Addr(), "backlog", 1<<10, perProducer)
			produced.Add(int64(n))
			if err != nil {
				errs <- fmt.Errorf("producer %d: %w", i, err)
			}
		})
	}
	wg.Go(func() {
		n, err := consumeSlowly(ctx, broker.Addr(), "backlog", &produced, 4*perProducer, loadFor)
		consumed.Add(int64(n))
		if err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("%v\n%s", err, broker.Logs())
	}
	if kills := group.oomKills(t); kills != 0 {
		t.Fatalf("the kernel killed %d process(es) in the 64 MiB cgroup", kills)
	}
	select {
	case <-broker.Exited():
		t.Fatalf("the broker died under the load (exit %d):\n%s", broker.Wait(), broker.Logs())
	default:
	}
	backlog := produced.Load() - consumed.Load()
	onDisk := directoryBytes(t, dataDir)
	elapsed := time.Since(started)
	t.Logf("64 MiB cgroup: %d records of 1 KiB acknowledged in %v (%.0f/s), %d consumed, backlog %d (%d MiB on disk); cgroup peak %d MiB",
		produced.Load(), elapsed.Round(time.Millisecond), float64(produced.Load())/elapsed.Seconds(), consumed.Load(), backlog, onDisk>>20, group.peak()>>20)
	if produced.Load() != 4*perProducer {
		t.Errorf("%d of %d records acknowledged", produced.Load(), 4*perProducer)
	}
	if backlog <= 0 || onDisk < backlog*1024 {
		t.Errorf("the backlog of %d records should be on disk; the data directory holds %d bytes", backlog, onDisk)
	}
}

// produceFor publishes count size-byte records through a pipelined
// producer and returns how many were acknowledged. Send blocks while the
// window is full: that wait is the backpressure a producer sees.
func produceFor(ctx context.Context, addr, stream string, size, count int) (int, error) {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// Stored as sent: the backlog must be the bytes published.
	producer := c.NewProducer(stream, client.ProducerOptions{Compression: client.CompressNone})
	acked := make(chan int, 1)
	var firstErr error
	go func() {
		n := 0
		for result := range producer.Results() {
			if result.Err == nil {
				n++
			} else if firstErr == nil {
				firstErr = result.Err
			}
		}
		acked <- n
	}()
	// Random: the SDK compresses with lz4 by default, and repeated bytes
	// would shrink the backlog this test wants on disk about 6:1.
	payload := make([]byte, size)
	_, _ = rand.Read(payload) // crypto/rand never fails since Go 1.24
	var blocked time.Duration
	for range count {
		before := time.Now()
		if err := producer.Send(ctx, client.Record{Payload: payload}); err != nil {
			break
		}
		if waited := time.Since(before); waited > 100*time.Microsecond {
			blocked += waited // the window was full: waiting for acknowledgements
		}
	}
	_ = producer.Close()
	n := <-acked
	if blocked == 0 {
		return n, fmt.Errorf("%d sends never waited for the window: no backpressure reached the producer (%v)", count, firstErr)
	}
	return n, firstErr
}

// consumeSlowly fetches ten records every 50 ms and acknowledges them,
// until the producers are done (produced reaches total) or d passes.
func consumeSlowly(ctx context.Context, addr, stream string, produced *atomic.Int64, total int64, d time.Duration) (int, error) {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	consumed := 0
	for stop := time.Now().Add(d); time.Now().Before(stop) && produced.Load() < total; {
		result, err := c.Fetch(ctx, stream, "slow", client.FetchOptions{MaxRecords: 10, Wait: 100 * time.Millisecond})
		var refused *wire.Error
		if errors.As(err, &refused) && refused.Code == wire.CodeNotFound {
			time.Sleep(50 * time.Millisecond) // the producers have not created the stream yet
			continue
		}
		if err != nil {
			return consumed, fmt.Errorf("slow consumer fetch: %w", err)
		}
		if len(result.Messages) > 0 {
			if _, err := c.Ack(ctx, stream, "slow", result.Messages...); err != nil {
				return consumed, fmt.Errorf("slow consumer ack: %w", err)
			}
			consumed += len(result.Messages)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return consumed, nil
}

func directoryBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			// The broker is live: a checkpoint's temporary file can be
			// renamed away between the directory read and its lstat.
			return nil
		}
		if err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
