// Command consumebench measures consuming stored records over loopback
// through the Go SDK, next to the raw disk rate measured in the same run:
// the streaming tier (DeliverBatch runs, periodic commit) and work groups
// acked with one AckRange per fetch.
//
//	go run ./benchrig/cmd/consumebench -dir /var/tmp -records 1000000 -runs 5
//	go run ./benchrig/cmd/consumebench -loop std,epoll -sizes 256 -cpuprofile cpu.out
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
	"github.com/ironbus/ironbus/benchrig/consumebench"
	"github.com/ironbus/ironbus/benchrig/logbench"
	"github.com/ironbus/ironbus/benchrig/netbench"
	"github.com/ironbus/ironbus/segment"
)

type options struct {
	dir, cpuProfile          string
	records, runs, consumers int
	fetch, producers         int
	backends, shapes         []string
	sizes                    []int
	jsonOutput, skipRaw      bool
}

type report struct {
	Host    string                `json:"host"`
	Date    string                `json:"date"`
	Raw     logbench.RawResult    `json:"raw_disk"`
	Fill    []fillRow             `json:"fill"`
	Results []consumebench.Result `json:"consume_medians"`
}

type fillRow struct {
	Backend     string  `json:"backend"`
	RecordBytes int     `json:"record_bytes"`
	PerSecond   float64 `json:"records_per_sec"`
}

func main() {
	var opts options
	var backends, sizes, shapes string
	flag.StringVar(&opts.dir, "dir", os.TempDir(), "directory on the disk to measure")
	flag.IntVar(&opts.records, "records", 1_000_000, "records stored, then consumed per run")
	flag.IntVar(&opts.runs, "runs", 5, "runs per configuration; the median is reported")
	flag.IntVar(&opts.consumers, "consumers", 4, "work-group consumers (connections)")
	flag.IntVar(&opts.fetch, "fetch", 1000, "work-group records per Fetch (one AckRange each)")
	flag.IntVar(&opts.producers, "producers", 4, "connections filling the stream")
	flag.StringVar(&backends, "loop", "auto", "network backends, comma-separated (auto, uring, epoll, std)")
	flag.StringVar(&sizes, "sizes", "256,1024", "record payload sizes in bytes, comma-separated")
	flag.StringVar(&shapes, "shapes", "streaming,work", "what to measure: streaming, work")
	flag.BoolVar(&opts.skipRaw, "skip-raw", false, "skip the raw disk measurement")
	flag.BoolVar(&opts.jsonOutput, "json", false, "print JSON")
	flag.StringVar(&opts.cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	opts.backends, opts.shapes = strings.Split(backends, ","), strings.Split(shapes, ",")
	var err error
	if opts.sizes, err = benchrig.ParseSizes(sizes); err != nil {
		fmt.Fprintln(os.Stderr, "consumebench:", err)
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "consumebench:", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	stopProfile, err := benchrig.StartCPUProfile(opts.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep := report{Host: logbench.Host(), Date: time.Now().UTC().Format(time.DateOnly)}
	if !opts.skipRaw {
		raw, err := logbench.MeasureRaw(opts.dir, time.Second)
		if err != nil {
			return err
		}
		rep.Raw = raw
		if !opts.jsonOutput {
			fmt.Printf("raw disk: %.0f syncs/s (256 B + fdatasync), %.0f MB/s (1 MiB + fdatasync)\n", raw.SmallSyncsPerSec, raw.BandwidthMBps)
		}
	}
	for _, backend := range opts.backends {
		for _, size := range opts.sizes {
			if err := measureSize(&rep, opts, backend, size); err != nil {
				return fmt.Errorf("%s backend, %d B: %w", backend, size, err)
			}
		}
	}
	if opts.jsonOutput {
		encoder := json.NewEncoder(os.Stdout)
		encoder.SetIndent("", "  ")
		return encoder.Encode(rep)
	}
	return nil
}

// measureSize fills one broker with the records once, then consumes them
// runs times per shape with a new group each time.
func measureSize(rep *report, opts options, backend string, size int) error {
	addr, served, stop, err := netbench.InProcess(opts.dir, segment.Options{}, backend)
	if err != nil {
		return err
	}
	defer stop()
	stream := fmt.Sprintf("consume-%d", size)
	rate, err := consumebench.Fill(addr, stream, opts.records, size, opts.producers)
	if err != nil {
		return err
	}
	rep.Fill = append(rep.Fill, fillRow{Backend: served, RecordBytes: size, PerSecond: rate})
	if !opts.jsonOutput {
		fmt.Printf("%s backend: stored %d records of %d B at %.0f/s\n", served, opts.records, size, rate)
	}
	for _, shape := range opts.shapes {
		var results []consumebench.Result
		for run := range max(opts.runs, 1) {
			group := fmt.Sprintf("%s-%d", shape, run)
			var result consumebench.Result
			switch shape {
			case "streaming":
				result, err = consumebench.Stream(addr, stream, group, opts.records, size)
			case "work":
				result, err = consumebench.WorkGroup(addr, stream, group, opts.records, size, opts.consumers, opts.fetch)
			default:
				return fmt.Errorf("unknown shape %q", shape)
			}
			if err != nil {
				return err
			}
			results = append(results, result)
		}
		sort.Slice(results, func(i, j int) bool { return results[i].PerSecond < results[j].PerSecond })
		median := results[len(results)/2]
		median.Shape = served + "/" + median.Shape
		rep.Results = append(rep.Results, median)
		if !opts.jsonOutput {
			fmt.Printf("  median of %d: %v (min %.0f, max %.0f)\n", len(results), median,
				results[0].PerSecond, results[len(results)-1].PerSecond)
		}
	}
	return nil
}
