// Command awaitbench measures the awaited produce shapes of the
// head-to-head table (P1: one connection, one record in flight; P2a:
// eight such connections; L1: one awaited produce at a fixed rate)
// against the raw 256 B write + fdatasync loop, in interleaved rounds on
// the same disk, so the cost of the broker's hand-offs can be read as a
// ratio to the disk's own latency. The broker runs in this process, as in
// benchrig/peers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/benchrig"
	"github.com/ironbus/ironbus/benchrig/netbench"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func main() {
	dir := flag.String("dir", "/var/tmp", "directory on the disk to measure")
	rounds := flag.Int("rounds", 3, "interleaved rounds; medians are reported")
	duration := flag.Duration("duration", 2*time.Second, "length of each throughput measurement")
	rate := flag.Int("rate", 1000, "L1: produces per second (open loop)")
	size := flag.Int("size", 256, "payload bytes")
	backend := flag.String("loop", "", "network backend (auto when empty)")
	ioMode := flag.String("io-mode", "auto", "buffered, direct or auto")
	shapes := flag.String("shapes", "raw,raw-l1,p1,l1,p2a", "shapes to run, comma-separated (raw-l1: the raw loop at the L1 rate; p1-wire: P1 without the SDK)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the broker rounds here")
	tracePath := flag.String("trace", "", "write an execution trace of a short run of -trace-connections awaited producers here, and stop")
	traceConnections := flag.Int("trace-connections", 1, "connections of the traced run (1: P1, 8: P2a; 0: L1 at -rate)")
	flag.Parse()
	if *tracePath != "" {
		if err := traceAwaited(*dir, *tracePath, *size, *traceConnections, *rate); err != nil {
			fmt.Fprintln(os.Stderr, "awaitbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*dir, *rounds, *duration, *rate, *size, *backend, *ioMode, *shapes, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "awaitbench:", err)
		os.Exit(1)
	}
}

type result struct {
	perSecond float64
	p50, p99  float64 // µs
}

// settings are the flags a run measures with.
type settings struct {
	dir                string
	rounds, rate, size int
	duration           time.Duration
	backend, ioMode    string
	mode               segment.IOMode
	want               map[string]bool
}

// shapeOrder is the order shapes are measured and printed in.
var shapeOrder = []string{"raw", "raw-l1", "p1", "p1-wire", "l1", "p2a"}

func run(dir string, rounds int, duration time.Duration, rate, size int, backend, ioMode, shapes, cpuProfile string) error {
	mode, err := segment.ParseIOMode(ioMode)
	if err != nil {
		return err
	}
	cfg := settings{dir: dir, rounds: rounds, rate: rate, size: size, duration: duration, backend: backend,
		ioMode: ioMode, mode: mode, want: map[string]bool{}}
	for _, s := range strings.Split(shapes, ",") {
		cfg.want[strings.TrimSpace(s)] = true
	}
	stopProfile, err := benchrig.StartCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	results := map[string][]result{}
	for round := range rounds {
		if err := measureRound(cfg, round, results); err != nil {
			return err
		}
	}
	report(results)
	return nil
}

// measureRound runs the raw loops, then each broker shape on a fresh
// in-process broker, adding one result per shape.
func measureRound(cfg settings, round int, results map[string][]result) error {
	if cfg.want["raw"] {
		r, err := raw(cfg.dir, cfg.size, 0, cfg.duration)
		if err != nil {
			return err
		}
		results["raw"] = append(results["raw"], r)
	}
	if cfg.want["raw-l1"] {
		r, err := raw(cfg.dir, cfg.size, cfg.rate, cfg.duration+time.Second)
		if err != nil {
			return err
		}
		results["raw-l1"] = append(results["raw-l1"], r)
	}
	addr, served, stop, err := netbench.InProcess(cfg.dir, segment.Options{IOMode: cfg.mode}, cfg.backend)
	if err != nil {
		return err
	}
	defer stop()
	if round == 0 {
		fmt.Printf("backend %s, io mode %s, payload %d B, %d rounds\n", served, cfg.ioMode, cfg.size, cfg.rounds)
	}
	for _, shape := range []string{"p1", "p1-wire", "l1", "p2a"} {
		if !cfg.want[shape] {
			continue
		}
		var r result
		switch shape {
		case "p1":
			r, err = awaited(addr, 1, cfg.size, cfg.duration)
		case "p1-wire":
			r, err = rawWire(addr, cfg.size, cfg.duration)
		case "p2a":
			r, err = awaited(addr, 8, cfg.size, cfg.duration)
		case "l1":
			r, err = openLoop(addr, cfg.size, cfg.rate, cfg.duration+time.Second)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", shape, err)
		}
		results[shape] = append(results[shape], r)
	}
	return nil
}

// report prints each shape's medians and runs, then the ratios to the raw
// loops measured in the same rounds.
func report(results map[string][]result) {
	rate := func(r result) float64 { return r.perSecond }
	p50 := func(r result) float64 { return r.p50 }
	p99 := func(r result) float64 { return r.p99 }
	for _, shape := range shapeOrder {
		rs := results[shape]
		if len(rs) == 0 {
			continue
		}
		fmt.Printf("%-6s %9.0f/s  p50 %7.1f µs  p99 %7.1f µs   runs:", shape, median(rs, rate), median(rs, p50), median(rs, p99))
		for _, r := range rs {
			fmt.Printf(" %.0f/%.0f/%.0f", r.perSecond, r.p50, r.p99)
		}
		fmt.Println()
	}
	raws, p1s, l1 := results["raw"], results["p1"], results["l1"]
	if len(raws) > 0 && len(p1s) > 0 {
		fmt.Printf("P1 / raw rate %.2f×", median(p1s, rate)/median(raws, rate))
		if len(l1) > 0 {
			fmt.Printf("   L1 p50 / raw p50 %.2f×   L1 p99 / raw p99 %.2f×", median(l1, p50)/median(raws, p50),
				median(l1, p99)/median(raws, p99))
		}
		fmt.Println()
	}
	if rawL1 := results["raw-l1"]; len(rawL1) > 0 && len(l1) > 0 {
		fmt.Printf("L1 against the raw loop at the same rate: p50 %.2f×   p99 %.2f×\n",
			median(l1, p50)/median(rawL1, p50), median(l1, p99)/median(rawL1, p99))
	}
}

func median(rs []result, field func(result) float64) float64 {
	values := make([]float64, len(rs))
	for i, r := range rs {
		values[i] = field(r)
	}
	slices.Sort(values)
	return values[len(values)/2]
}

func summarize(latencies []time.Duration, elapsed time.Duration) result {
	slices.Sort(latencies)
	at := func(q float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[min(int(q*float64(len(latencies))), len(latencies)-1)]) / 1e3
	}
	return result{perSecond: float64(len(latencies)) / elapsed.Seconds(), p50: at(0.5), p99: at(0.99)}
}

// raw is the write + fdatasync loop on a zero-filled file, as in
// benchrig/peers: back to back, or rate times a second (open loop, as L1
// sends) when rate > 0.
func raw(dir string, size, rate int, duration time.Duration) (result, error) {
	var fsys vfs.OS
	path := fmt.Sprintf("%s/awaitbench-raw-%d.bin", dir, os.Getpid())
	file, err := fsys.OpenFile(path, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return result{}, err
	}
	defer func() { _ = file.Close(); _ = fsys.Remove(path) }()
	const fileBytes = 64 << 20
	zeros := make([]byte, 1<<20)
	for at := int64(0); at < fileBytes; at += int64(len(zeros)) {
		if _, err := file.WriteAt(zeros, at); err != nil {
			return result{}, err
		}
	}
	if err := file.Sync(); err != nil {
		return result{}, err
	}
	buffer := make([]byte, size)
	var offset int64
	writeAndSync := func() error {
		if offset+int64(size) > fileBytes {
			offset = 0
		}
		if _, err := file.WriteAt(buffer, offset); err != nil {
			return err
		}
		offset += int64(size)
		return file.SyncData()
	}
	start := time.Now()
	if rate > 0 {
		latencies, err := benchrig.OpenLoop(rate, duration, writeAndSync)
		if err != nil {
			return result{}, err
		}
		return summarize(latencies, time.Since(start)), nil
	}
	var latencies []time.Duration
	for time.Since(start) < duration {
		began := time.Now()
		if err := writeAndSync(); err != nil {
			return result{}, err
		}
		latencies = append(latencies, time.Since(began))
	}
	return summarize(latencies, time.Since(start)), nil
}

func awaited(addr string, connections, size int, duration time.Duration) (result, error) {
	record := client.Record{Payload: make([]byte, size)}
	stopAt := time.Now().Add(duration)
	var mu sync.Mutex
	var all []time.Duration
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			c, err := client.Dial(ctx, addr, client.Options{ClientName: "awaitbench", Window: 1, Compression: client.CompressNone})
			if err != nil {
				failed.Store(&err)
				return
			}
			defer c.Close()
			var mine []time.Duration
			for time.Now().Before(stopAt) {
				began := time.Now()
				if _, err := c.Produce(ctx, "bench", record); err != nil {
					failed.Store(&err)
					return
				}
				mine = append(mine, time.Since(began))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return result{}, *err
	}
	return summarize(all, time.Since(start)), nil
}

// openLoop sends one awaited produce rate times a second
// (benchrig.OpenLoop: latency from the intended send time when the
// previous answer was late).
func openLoop(addr string, size, rate int, duration time.Duration) (result, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "awaitbench", Window: 1, Compression: client.CompressNone})
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	record := client.Record{Payload: make([]byte, size)}
	start := time.Now()
	latencies, err := benchrig.OpenLoop(rate, duration, func() error {
		_, err := c.Produce(ctx, "bench", record)
		return err
	})
	if err != nil {
		return result{}, err
	}
	return summarize(latencies, time.Since(start)), nil
}

// traceAwaited writes an execution trace of 200 ms of awaited produces on
// connections connections, after a warm-up, so each hand-off of an awaited
// produce can be read off its goroutines.
func traceAwaited(dir, path string, size, connections, rate int) error {
	addr, _, stop, err := netbench.InProcess(dir, segment.Options{IOMode: segment.IOAuto}, "")
	if err != nil {
		return err
	}
	defer stop()
	run := func(d time.Duration) error {
		if connections == 0 {
			r, err := openLoop(addr, size, rate, d)
			fmt.Printf("traced L1: p50 %.1f µs, p99 %.1f µs\n", r.p50, r.p99)
			return err
		}
		_, err := awaited(addr, connections, size, d)
		return err
	}
	if err := run(500 * time.Millisecond); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := trace.Start(f); err != nil {
		return err
	}
	length := 200 * time.Millisecond
	if connections == 0 {
		length = 2 * time.Second
	}
	err = run(length)
	trace.Stop()
	return err
}
