// Command peers is the head-to-head rig: IronBus against NATS JetStream
// (fsync before every ack, and its default of acking from the page
// cache), NATS core as the at-most-once reference, and the disk's own
// limits, one after another in the same run on the same disk, with the
// same payloads and client concurrency. The disk's small-write loop and
// the TCP floor run in slices around the IronBus cells they are compared
// with, while its broker idles (phases.go). It prints one table, writes it
// as JSON, and can regenerate the marked block of docs/BENCHMARKS.md from
// that JSON:
//
//	go run . -dir /var/tmp -runs 3 -json ../../bench-results/peers.json -docs ../../docs/BENCHMARKS.md
//	go run . -quick -json ../../bench-results/peers.json
//	go run . -render ../../bench-results/peers.json -docs ../../docs/BENCHMARKS.md
//
// -suite subjects runs the subject rows instead (subjects.go): publish over
// 1, 1,000 and 10,000 subjects against NATS core, and a 1-in-100 filtered
// read against JetStream's filtered consumer:
//
//	go run . -suite subjects -runs 3 -json ../../bench-results/peers-subjects.json
//
// -suite filtered runs only the filtered-read rows of that suite (the
// quick loop while working on filtered reads).
//
// -suite cluster runs three IronBus nodes with a replicated partition
// against a three-server JetStream cluster with an R3 stream (cluster.go):
//
//	go run . -suite cluster -runs 3 -json ../../bench-results/peers-cluster.json
//
// It is its own module so that the broker's module never depends on NATS.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type config struct {
	dir             string
	runs            int
	duration        time.Duration // each throughput measurement
	latencyDuration time.Duration // each L1 measurement
	verifyDuration  time.Duration // each strace-counted run
	rate            int           // L1 sends per second
	sizes           []int
	consumeMessages int
	consumers       int
	verify          bool
	quick           bool
	jsonPath        string
	docsPath        string
	command         string
	suite           string // "all" (the default table) or "subjects"
	backend         string // the network backend IronBus's auto picked
}

func main() {
	cfg, renderFrom, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	if renderFrom != "" {
		err = renderDocs(renderFrom, cfg.docsPath)
	} else {
		err = run(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func parseFlags() (*config, string, error) {
	cfg := &config{}
	var sizes, renderFrom string
	flag.StringVar(&cfg.dir, "dir", "/var/tmp", "directory on the disk to measure (temporary directories are made under it)")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of every row; the median is reported with min–max")
	flag.DurationVar(&cfg.duration, "duration", 1500*time.Millisecond, "length of each throughput measurement")
	flag.DurationVar(&cfg.latencyDuration, "latency-duration", 3*time.Second, "length of each L1 measurement")
	flag.DurationVar(&cfg.verifyDuration, "verify-duration", time.Second, "length of each fsync-counting run under strace")
	flag.IntVar(&cfg.rate, "rate", 1000, "L1: produces per second (open loop)")
	flag.StringVar(&sizes, "sizes", "256,1024", "payload sizes in bytes, comma-separated")
	flag.IntVar(&cfg.consumeMessages, "consume-messages", 200_000, "C1: stored messages to consume")
	flag.IntVar(&cfg.consumers, "consumers", 4, "C1 work rows: competing consumer connections on each side")
	flag.BoolVar(&cfg.verify, "verify", true, "count each side's fsync/fdatasync calls with strace")
	flag.BoolVar(&cfg.quick, "quick", false, "one run with shorter measurements (the docs block is not rewritten)")
	flag.StringVar(&cfg.jsonPath, "json", "", "write the table as JSON here")
	flag.StringVar(&cfg.docsPath, "docs", "", "regenerate the peers block of this markdown file from the JSON")
	flag.StringVar(&renderFrom, "render", "", "only regenerate -docs from this JSON file")
	flag.StringVar(&cfg.command, "command", "", "the command to quote in the report (default: this one)")
	flag.StringVar(&cfg.suite, "suite", "all", "all: the main table; subjects: issue 9's subject routing and filtered consume rows; filtered: only the filtered consume rows; cluster: three nodes with 3 replicas against a JetStream R3 cluster")
	flag.Parse()
	for _, field := range strings.Split(sizes, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || size <= 0 {
			return nil, "", fmt.Errorf("-sizes %q: want positive byte counts", sizes)
		}
		cfg.sizes = append(cfg.sizes, size)
	}
	if cfg.quick {
		cfg.runs, cfg.duration, cfg.latencyDuration, cfg.verifyDuration = 1, time.Second, 2*time.Second, 700*time.Millisecond
	}
	if cfg.command == "" {
		cfg.command = strings.Join(os.Args, " ")
	}
	if renderFrom != "" && cfg.docsPath == "" {
		return nil, "", fmt.Errorf("-render needs -docs")
	}
	switch {
	case cfg.suite != "all" && cfg.suite != "subjects" && cfg.suite != "filtered" && cfg.suite != "cluster":
		return nil, "", fmt.Errorf("-suite %q: want all, subjects, filtered or cluster", cfg.suite)
	case cfg.suite != "all" && cfg.docsPath != "":
		return nil, "", fmt.Errorf("-suite %s has no docs block: leave out -docs (docs/STREAMS.md and docs/BENCHMARKS.md quote its numbers)", cfg.suite)
	}
	return cfg, renderFrom, nil
}

func run(cfg *config) error {
	began := time.Now()
	measured := samples{}
	measure, specs := measureRun, rowSpecs
	switch cfg.suite {
	case "subjects":
		measure, specs = measureSubjects, subjectRowSpecs
	case "filtered":
		measure, specs = measureFiltered, filteredRowSpecs
	case "cluster":
		measure, specs = measureCluster, clusterRowSpecs
	}
	for index := range cfg.runs {
		progress("run %d of %d", index+1, cfg.runs)
		if err := measure(cfg, measured); err != nil {
			return err
		}
	}
	var checks []labelCheck
	if cfg.verify && cfg.suite == "all" {
		progress("counting fsync/fdatasync per side under strace")
		var err error
		if checks, err = verifyLabels(cfg); err != nil {
			progress("label check: %v", err)
		}
	}
	rows, err := build(specs(cfg), measured)
	if err != nil {
		return err
	}
	rep := newReport(cfg, rows, checks, time.Since(began))
	printReport(os.Stdout, rep)
	if cfg.jsonPath == "" {
		return nil
	}
	if err := writeReport(cfg.jsonPath, rep); err != nil {
		return err
	}
	if cfg.docsPath == "" || cfg.quick {
		return nil
	}
	return renderDocs(cfg.jsonPath, cfg.docsPath)
}
