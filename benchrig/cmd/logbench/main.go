// Command logbench measures the durable log engine against the raw limits
// of the disk in the same run and prints a table (or JSON with -json).
//
//	go run ./benchrig/cmd/logbench -dir /var/tmp -duration 3s -runs 3
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ironbus/ironbus/benchrig/logbench"
	"github.com/ironbus/ironbus/segment"
)

type options struct {
	dir           string
	duration      time.Duration
	runs          int
	sizes         []int
	producers     []int
	logs          []int
	inFlight      int
	ioMode        string
	preallocation string
	jsonOutput    bool
	skipRaw       bool
	cpuProfile    string
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "logbench:", err)
		os.Exit(1)
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "logbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var opts options
	flags := flag.NewFlagSet("logbench", flag.ContinueOnError)
	flags.StringVar(&opts.dir, "dir", os.TempDir(), "directory on the disk to measure")
	flags.DurationVar(&opts.duration, "duration", 3*time.Second, "length of each measurement")
	flags.IntVar(&opts.runs, "runs", 3, "runs per configuration; the median is reported")
	sizes := flags.String("sizes", "256,1024,16384", "record body sizes in bytes")
	producers := flags.String("producers", "1,8,64", "producer counts (one log)")
	logs := flags.String("logs", "1,4,16", "active log counts for the committer-cycle table (2 producers per log, 256 B records)")
	flags.IntVar(&opts.inFlight, "inflight", 256, "appends each producer keeps in flight")
	flags.StringVar(&opts.ioMode, "io-mode", "buffered", "buffered, direct or auto")
	flags.StringVar(&opts.preallocation, "preallocation", "fallocate", "fallocate, zero or none")
	flags.BoolVar(&opts.jsonOutput, "json", false, "print JSON instead of tables")
	flags.BoolVar(&opts.skipRaw, "skip-raw", false, "do not measure the raw device limits")
	flags.StringVar(&opts.cpuProfile, "cpuprofile", "", "write a CPU profile of the append runs to this file")
	if err := flags.Parse(args); err != nil {
		return opts, err
	}
	var err error
	if opts.sizes, err = parseInts(*sizes); err != nil {
		return opts, err
	}
	if opts.producers, err = parseInts(*producers); err != nil {
		return opts, err
	}
	if opts.logs, err = parseInts(*logs); err != nil {
		return opts, err
	}
	return opts, nil
}

func parseInts(list string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(list, ",") {
		if field = strings.TrimSpace(field); field == "" {
			continue
		}
		n, err := strconv.Atoi(field)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q in %q", field, list)
		}
		out = append(out, n)
	}
	return out, nil
}

type report struct {
	Host    string               `json:"host"`
	Raw     []logbench.RawResult `json:"raw_runs"`
	Appends []logbench.Result    `json:"appends"`
	Cycles  []logbench.Result    `json:"committer_cycles"`
}

func run(opts options) error {
	mode, err := segment.ParseIOMode(opts.ioMode)
	if err != nil {
		return err
	}
	prealloc, err := segment.ParsePreallocation(opts.preallocation)
	if err != nil {
		return err
	}
	segOpts := segment.Options{IOMode: mode, Preallocation: prealloc}
	rep := report{Host: logbench.Host()}
	if opts.cpuProfile != "" {
		file, err := os.Create(opts.cpuProfile)
		if err != nil {
			return err
		}
		defer file.Close()
		if err := pprof.StartCPUProfile(file); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for i := 0; i < opts.runs && !opts.skipRaw; i++ {
		raw, err := logbench.MeasureRaw(opts.dir, opts.duration)
		if err != nil {
			return fmt.Errorf("raw limits: %w", err)
		}
		rep.Raw = append(rep.Raw, raw)
	}
	for _, size := range opts.sizes {
		for _, producers := range opts.producers {
			res, err := median(opts, logbench.Config{Dir: opts.dir, RecordBytes: size, Producers: producers,
				InFlight: opts.inFlight, Logs: 1, Duration: opts.duration, Options: segOpts})
			if err != nil {
				return err
			}
			rep.Appends = append(rep.Appends, res)
		}
	}
	for _, logs := range opts.logs {
		res, err := median(opts, logbench.Config{Dir: opts.dir, RecordBytes: 256, Producers: logs * 2,
			InFlight: opts.inFlight, Logs: logs, Duration: opts.duration, Options: segOpts})
		if err != nil {
			return err
		}
		rep.Cycles = append(rep.Cycles, res)
	}
	if opts.jsonOutput {
		encoder := json.NewEncoder(os.Stdout)
		encoder.SetIndent("", "  ")
		return encoder.Encode(rep)
	}
	printReport(rep)
	return nil
}

// median runs a configuration opts.runs times and keeps the run with the
// median records per second.
func median(opts options, cfg logbench.Config) (logbench.Result, error) {
	var results []logbench.Result
	for i := 0; i < opts.runs; i++ {
		res, err := logbench.Run(cfg)
		if err != nil {
			return res, err
		}
		results = append(results, res)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].RecordsPerSec < results[j].RecordsPerSec })
	return results[len(results)/2], nil
}

func printReport(rep report) {
	fmt.Println("host:", rep.Host)
	if len(rep.Raw) > 0 {
		var small, warm, fallocated, direct []float64
		for _, r := range rep.Raw {
			small, warm = append(small, r.SmallSyncsPerSec), append(warm, r.BandwidthMBps)
			fallocated, direct = append(fallocated, r.FallocateMBps), append(direct, r.DirectMBps)
		}
		fmt.Printf("raw device (min/median/max of %d runs):\n", len(rep.Raw))
		fmt.Printf("  256 B write + fdatasync, zero-filled file:        %s per second\n", spread(small))
		fmt.Printf("  1 MiB write + fdatasync, zero-filled, page cache: %s MB/s\n", spread(warm))
		fmt.Printf("  1 MiB write + fdatasync, fallocated file:         %s MB/s\n", spread(fallocated))
		fmt.Printf("  1 MiB O_DIRECT write + fdatasync, fallocated:     %s MB/s\n", spread(direct))
	}
	fmt.Println()
	fmt.Printf("%-8s %-9s %-5s %12s %9s %9s %10s %9s %9s %-8s\n", "record", "producers", "logs", "records/s",
		"MB/s", "syncs/s", "rec/sync", "sync µs", "dev B/B", "io")
	for _, r := range append(rep.Appends, rep.Cycles...) {
		fmt.Printf("%-8d %-9d %-5d %12.0f %9.1f %9.0f %10.1f %9.0f %9.2f %-8s\n", r.RecordBytes, r.Producers, r.Logs,
			r.RecordsPerSec, r.MBPerSec, r.SyncsPerSec, r.RecordsPerSync, r.MeanSyncMicros, r.DeviceBytesPerPayloadByte, r.IOMode)
	}
}

func spread(values []float64) string {
	sort.Float64s(values)
	return fmt.Sprintf("%.0f/%.0f/%.0f", values[0], values[len(values)/2], values[len(values)-1])
}
