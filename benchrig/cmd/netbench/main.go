// Command netbench measures the broker over loopback through the Go SDK,
// next to the raw fdatasync rate and latency measured in the same run, on
// each network backend asked for:
//
//	go run ./benchrig/cmd/netbench -dir /var/tmp -duration 3s -runs 5
//	go run ./benchrig/cmd/netbench -loop std,epoll,uring -sizes 256
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ironbus/ironbus/benchrig"
	"github.com/ironbus/ironbus/benchrig/logbench"
	"github.com/ironbus/ironbus/benchrig/netbench"
	"github.com/ironbus/ironbus/segment"
)

type report struct {
	Host       string                `json:"host"`
	RawSync    netbench.Latency      `json:"raw_sync_latency"`
	RawPerSec  float64               `json:"raw_syncs_per_sec"`
	Throughput []netbench.Throughput `json:"throughput"`
	AckLatency []latencyRow          `json:"ack_latency_one_in_flight"`
}

type latencyRow struct {
	Backend     string `json:"backend"`
	RecordBytes int    `json:"record_bytes"`
	netbench.Latency
}

type options struct {
	dir, addr, ioMode, cpuProfile string
	duration                      time.Duration
	runs, idle, brokerPID         int
	backends                      []string
	sizes                         []int
	jsonOutput                    bool
}

func main() {
	var opts options
	var backends, sizes string
	flag.StringVar(&opts.dir, "dir", os.TempDir(), "directory on the disk to measure")
	flag.DurationVar(&opts.duration, "duration", 3*time.Second, "length of each measurement")
	flag.IntVar(&opts.runs, "runs", 3, "runs per configuration; the median is reported")
	flag.StringVar(&opts.addr, "addr", "", "measure a running broker instead of an in-process one")
	flag.StringVar(&opts.ioMode, "io-mode", "buffered", "buffered, direct or auto (in-process broker)")
	flag.StringVar(&backends, "loop", "auto", "network backends to measure, comma-separated (auto, uring, epoll, std)")
	flag.StringVar(&sizes, "sizes", "256,1024", "record sizes in bytes, comma-separated")
	flag.IntVar(&opts.brokerPID, "pid", 0, "with -addr: the broker's pid, to report its peak anonymous RSS per row")
	flag.IntVar(&opts.idle, "idle", 1000, "idle connections held open in the idle shape (0 skips it)")
	flag.BoolVar(&opts.jsonOutput, "json", false, "print JSON")
	flag.StringVar(&opts.cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	opts.backends = strings.Split(backends, ",")
	var err error
	if opts.sizes, err = benchrig.ParseSizes(sizes); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

// shape is one row of the benchmark: busy pipelined producers, optionally
// beside a crowd of idle connections.
type shape struct{ connections, window, idle int }

func run(opts options) error {
	mode, err := segment.ParseIOMode(opts.ioMode)
	if err != nil {
		return err
	}
	stopProfile, err := benchrig.StartCPUProfile(opts.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep := report{Host: logbench.Host()}
	if err := measureRaw(&rep, opts.dir, opts.duration); err != nil {
		return err
	}
	shapes := []shape{{1, 4096, 0}, {8, 512, 0}}
	if opts.idle > 0 {
		shapes = append(shapes, shape{8, 512, opts.idle})
	}
	for _, backend := range opts.backends {
		target := func() (string, string, func(), error) {
			if opts.addr != "" {
				return opts.addr, "remote", func() {}, nil
			}
			return netbench.InProcess(opts.dir, segment.Options{IOMode: mode}, backend)
		}
		for _, size := range opts.sizes {
			for _, s := range shapes {
				best, err := medianThroughput(opts.runs, func() (netbench.Throughput, error) {
					return measureShape(target, s, size, opts.duration, opts.brokerPID)
				})
				if err != nil {
					return fmt.Errorf("%s backend: %w", backend, err)
				}
				rep.Throughput = append(rep.Throughput, best)
			}
		}
		for _, size := range opts.sizes {
			at, served, stop, err := target()
			if err != nil {
				return err
			}
			latency, err := netbench.AckLatency(at, "latency", size, opts.duration*time.Duration(max(opts.runs, 1)))
			stop()
			if err != nil {
				return err
			}
			rep.AckLatency = append(rep.AckLatency, latencyRow{Backend: served, RecordBytes: size, Latency: latency})
		}
	}
	if opts.jsonOutput {
		encoder := json.NewEncoder(os.Stdout)
		encoder.SetIndent("", "  ")
		return encoder.Encode(rep)
	}
	printReport(rep)
	return nil
}

func measureShape(target func() (string, string, func(), error), s shape, size int, duration time.Duration, brokerPID int) (netbench.Throughput, error) {
	at, served, stop, err := target()
	if err != nil {
		return netbench.Throughput{}, err
	}
	defer stop()
	if s.idle > 0 {
		release, err := netbench.HoldIdle(at, s.idle)
		if err != nil {
			return netbench.Throughput{}, err
		}
		defer release()
	}
	result, err := netbench.Produce(at, "bench", s.connections, s.window, size, duration, brokerPID)
	result.Backend, result.Idle = served, s.idle
	return result, err
}

func measureRaw(rep *report, dir string, duration time.Duration) error {
	samples, err := logbench.SyncLatencies(dir, duration)
	if err != nil {
		return err
	}
	rep.RawPerSec = float64(len(samples)) / duration.Seconds()
	rep.RawSync, err = netbench.Summarize(samples)
	return err
}

func medianThroughput(runs int, once func() (netbench.Throughput, error)) (netbench.Throughput, error) {
	var results []netbench.Throughput
	for i := 0; i < max(runs, 1); i++ {
		r, err := once()
		if err != nil {
			return r, err
		}
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].PerSecond < results[j].PerSecond })
	return results[len(results)/2], nil
}

func printReport(rep report) {
	fmt.Println("host:", rep.Host)
	fmt.Printf("raw 256 B write + fdatasync: %.0f/s; %s\n\n", rep.RawPerSec, rep.RawSync)
	fmt.Printf("%-8s %-6s %-11s %-6s %-7s %14s %10s %14s\n", "backend", "record", "connections", "idle", "window", "durable msg/s", "MB/s", "broker RssAnon")
	for _, t := range rep.Throughput {
		memory := "-"
		if t.PeakAnonymous > 0 {
			memory = fmt.Sprintf("%.1f MiB", float64(t.PeakAnonymous)/(1<<20))
		}
		fmt.Printf("%-8s %-6d %-11d %-6d %-7d %14.0f %10.1f %14s\n", t.Backend, t.RecordBytes, t.Connections, t.Idle, t.Window,
			t.PerSecond, t.MBPerSecond, memory)
	}
	fmt.Println()
	for _, l := range rep.AckLatency {
		fmt.Printf("%-8s ack latency, %d B, one in flight: %s  (%.2fx raw p50, %.2fx raw p99)\n", l.Backend, l.RecordBytes, l.Latency,
			l.P50/rep.RawSync.P50, l.P99/rep.RawSync.P99)
	}
}
