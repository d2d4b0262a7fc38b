// Command netbench measures the broker over loopback through the Go SDK,
// next to the raw fdatasync rate and latency measured in the same run:
//
//	go run ./benchrig/cmd/netbench -dir /var/tmp -duration 3s -runs 5
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/ironbus/ironbus/benchrig/logbench"
	"github.com/ironbus/ironbus/benchrig/netbench"
	"github.com/ironbus/ironbus/segment"
)

type report struct {
	Host       string                `json:"host"`
	RawSync    netbench.Latency      `json:"raw_sync_latency"`
	RawPerSec  float64               `json:"raw_syncs_per_sec"`
	Throughput []netbench.Throughput `json:"throughput"`
	AckLatency []netbench.Latency    `json:"ack_latency_one_in_flight"`
}

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure")
	duration := flag.Duration("duration", 3*time.Second, "length of each measurement")
	runs := flag.Int("runs", 3, "runs per configuration; the median is reported")
	addr := flag.String("addr", "", "measure a running broker instead of an in-process one")
	ioMode := flag.String("io-mode", "buffered", "buffered, direct or auto (in-process broker)")
	jsonOutput := flag.Bool("json", false, "print JSON")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if err := run(*dir, *duration, *runs, *addr, *ioMode, *jsonOutput, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

func run(dir string, duration time.Duration, runs int, addr, ioMode string, jsonOutput bool, cpuProfile string) error {
	mode, err := segment.ParseIOMode(ioMode)
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		file, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer file.Close()
		_ = pprof.StartCPUProfile(file)
		defer pprof.StopCPUProfile()
	}
	rep := report{Host: logbench.Host()}
	if err := measureRaw(&rep, dir, duration); err != nil {
		return err
	}
	target := func() (string, func(), error) {
		if addr != "" {
			return addr, func() {}, nil
		}
		return netbench.InProcess(dir, segment.Options{IOMode: mode})
	}
	for _, size := range []int{256, 1024} {
		for _, shape := range []struct{ connections, window int }{{1, 4096}, {8, 512}} {
			best, err := medianThroughput(runs, func() (netbench.Throughput, error) {
				at, stop, err := target()
				if err != nil {
					return netbench.Throughput{}, err
				}
				defer stop()
				return netbench.Produce(at, "bench", shape.connections, shape.window, size, duration)
			})
			if err != nil {
				return err
			}
			rep.Throughput = append(rep.Throughput, best)
		}
	}
	for _, size := range []int{256, 1024} {
		at, stop, err := target()
		if err != nil {
			return err
		}
		latency, err := netbench.AckLatency(at, "latency", size, duration*time.Duration(max(runs, 1)))
		stop()
		if err != nil {
			return err
		}
		rep.AckLatency = append(rep.AckLatency, latency)
	}
	if jsonOutput {
		encoder := json.NewEncoder(os.Stdout)
		encoder.SetIndent("", "  ")
		return encoder.Encode(rep)
	}
	printReport(rep)
	return nil
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
	fmt.Printf("%-6s %-11s %-7s %14s %10s\n", "record", "connections", "window", "durable msg/s", "MB/s")
	for _, t := range rep.Throughput {
		fmt.Printf("%-6d %-11d %-7d %14.0f %10.1f\n", t.RecordBytes, t.Connections, t.Window, t.PerSecond, t.MBPerSecond)
	}
	fmt.Println()
	for i, l := range rep.AckLatency {
		size := []int{256, 1024}[i]
		fmt.Printf("ack latency, %d B, one in flight: %s  (%.2fx raw p50, %.2fx raw p99)\n", size, l,
			l.P50/rep.RawSync.P50, l.P99/rep.RawSync.P99)
	}
}
