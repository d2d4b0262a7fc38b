package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironbus/ironbus/benchrig/logbench"
)

// report is bench-results/peers.json.
type report struct {
	Schema      int          `json:"schema"`
	Date        string       `json:"date"`
	Machine     string       `json:"machine"`
	Command     string       `json:"command"`
	Runs        int          `json:"runs"`
	Quick       bool         `json:"quick"`
	Seconds     float64      `json:"seconds"`
	Peers       []string     `json:"peers"`
	Rows        []Row        `json:"rows"`
	LabelChecks []labelCheck `json:"label_checks"`
	Notes       []string     `json:"notes"`
}

func newReport(cfg *config, rows []Row, checks []labelCheck, took time.Duration) report {
	streamConfig, _ := json.Marshal(benchStreamConfig("BENCH"))
	return report{
		Schema: 1, Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Machine: machine(cfg.dir),
		Command: cfg.command, Runs: cfg.runs, Quick: cfg.quick, Seconds: took.Seconds(), Rows: rows, LabelChecks: checks,
		Peers: []string{
			fmt.Sprintf("ironbus-sync: in-process broker (benchrig/netbench.InProcess), durability sync, io mode buffered (the serve default), backend %s", cfg.backend),
			"jetstream-always: embedded nats-server v2.15.2, JetStream file store, sync_interval: always (SyncAlways, fsync before each ack)",
			"jetstream-default: the same with the default sync_interval (2 min): acks from the page cache, not power-loss safe",
			"nats-core: the same server, core pub/sub: memory only, at most once",
			"JetStream stream: " + string(streamConfig) + " (new stream per row); client nats.go v1.55.0, jetstream API",
		},
		Notes: []string{
			fmt.Sprintf("Medians of %d runs; each throughput cell %v, L1 %v at %d msg/s. Ratios are IronBus / peer "+
				"(for latency rows lower is better). Only acks that arrived before the end of a cell count, on both sides.",
				cfg.runs, cfg.duration, cfg.latencyDuration, cfg.rate),
			"Same client concurrency both sides: P2b = 8 connections with 512 unacknowledged each (JetStream: async publish, max pending 512); " +
				"P2c = 1 connection with 4,096 (max pending 4,096).",
			"L1 counts from the intended send time when the previous answer was late (no coordinated omission), exact sorted samples.",
		},
	}
}

// machine describes the host and the disk under dir.
func machine(dir string) string {
	description := logbench.Host()
	if cpuinfo, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(cpuinfo)) {
			if rest, found := strings.CutPrefix(line, "model name"); found {
				description += ", " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	if release, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		description += ", Linux " + strings.TrimSpace(string(release))
	}
	return description + ", data under " + dir
}

func printReport(w io.Writer, rep report) {
	fmt.Fprintf(w, "\nhead to head, %s, %s\n%s\n\n", rep.Date, rep.Machine, rep.Command)
	printTable(w, rep.Rows)
	fmt.Fprintln(w)
	for _, check := range rep.LabelChecks {
		fmt.Fprintf(w, "label check %-17s %-20s %7d msgs %6d fsync %6d fdatasync  %.3f/msg  %s\n", check.Side, check.Workload,
			check.Messages, check.Fsync, check.Fdatasync, check.PerMessage, check.Conclusion)
	}
	for _, peer := range rep.Peers {
		fmt.Fprintln(w, "peer:", peer)
	}
	fmt.Fprintf(w, "took %.0f s\n", rep.Seconds)
}

func writeReport(path string, rep report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
