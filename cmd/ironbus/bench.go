package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
)

type benchOptions struct {
	mode         string
	producers    int
	consumers    int
	pubWindow    int
	payloadBytes int
	duration     string
	count        int
	rate         float64
	consumeTier  string
	stream       string
	addr         string
	live         bool
	loop         string
	ioMode       string
	durability   string
	profile      string // started broker's configuration profile ("": serve's default)
	profileOut   string
	tls          bool // bench_tls.go

	payloadOptions benchCompressOptions // bench_compress.go
	subjectOptions benchSubjectOptions  // bench_subjects.go
}

// benchSchema names the --json object; a field is never renamed or
// repurposed, new ones are added.
const benchSchema = "ironbus.cli.bench.v1"

func newBenchCmd(opts *globalOptions) *cobra.Command {
	bench := &benchOptions{}
	cmd := &cobra.Command{
		Use:     "bench [--mode publish|subscribe|round-trip] [--duration D | --count N]",
		Short:   "Measure durable throughput and latency on this machine",
		Long:    benchLong,
		Example: benchExamples,
		Args:    cobra.NoArgs,
	}
	flags := cmd.Flags()
	flags.StringVar(&bench.mode, "mode", "publish", "publish, subscribe or round-trip")
	flags.IntVar(&bench.producers, "producers", 1, "publishing connections")
	flags.IntVar(&bench.consumers, "consumers", 1, "consuming connections (subscribe, round-trip)")
	flags.IntVar(&bench.pubWindow, "pubwindow", 256, "records in flight per producer (1: each publish awaited)")
	flags.IntVar(&bench.payloadBytes, "payload-bytes", 256, "payload size of each record")
	flags.StringVar(&bench.duration, "duration", "", "how long to publish: seconds or a Go duration such as 5s (default 10s)")
	flags.IntVar(&bench.count, "count", 0, "publish exactly this many records instead of --duration")
	flags.Float64Var(&bench.rate, "rate", 0, "open loop: records per second over all producers (0: as fast as acks allow)")
	flags.StringVar(&bench.consumeTier, "consume-tier", "work", "work (leases and acks) or streaming (position and commit)")
	flags.StringVar(&bench.stream, "stream", "bench", "stream to load")
	flags.StringVar(&bench.addr, "addr", "", "load a running broker instead of starting one (needs --i-understand-this-is-live)")
	flags.BoolVar(&bench.live, "i-understand-this-is-live", false, "allow --addr: bench writes records into that broker")
	flags.StringVar(&bench.loop, "loop", loop.BackendAuto, "started broker: network backend (auto, uring, epoll, std)")
	flags.StringVar(&bench.ioMode, "io-mode", "buffered", "started broker: buffered, direct or auto")
	flags.StringVar(&bench.durability, "durability", "sync", "started broker: sync, interval or none (the latter two are labelled unsafe)")
	flags.StringVar(&bench.profile, "profile", "", "started broker: configuration profile (edge-tiny, balanced, throughput); --loop and --io-mode then follow it unless given")
	flags.StringVar(&bench.profileOut, "profile-out", "", "started broker: write CPU and heap profiles of the run into this directory")
	flags.BoolVar(&opts.json, "json", false, "print one flat JSON object (schema "+benchSchema+")")
	addBenchTLSFlags(cmd, bench)
	addBenchCompressFlags(cmd, &bench.payloadOptions)
	addBenchSubjectFlags(cmd, &bench.subjectOptions)
	cmd.RunE = classified(func() error {
		plan, err := bench.plan(cmd.Flags().Changed)
		if err != nil {
			return err
		}
		return runBench(cmd.Context(), opts, plan)
	})
	return cmd
}

// benchPlan is a validated bench run.
type benchPlan struct {
	benchOptions
	length time.Duration // 0 when count is set
	// knobs are the broker flags bench passes on: each one given, and
	// without --profile the defaults too (a profile sets its own).
	knobs []string
	// connect is TLS and credentials of the load's connections.
	connect client.Options
	// payloads is what the producers send and compress with.
	payloads benchPayloads
}

func (bench *benchOptions) plan(changed func(string) bool) (*benchPlan, error) {
	plan := &benchPlan{benchOptions: *bench}
	switch {
	case bench.mode != "publish" && bench.mode != "subscribe" && bench.mode != "round-trip":
		return nil, exitErrorf(exitUsage, "--mode %q: want publish, subscribe or round-trip", bench.mode)
	case bench.producers < 1 || bench.consumers < 1 || bench.pubWindow < 1:
		return nil, exitErrorf(exitUsage, "--producers, --consumers and --pubwindow must be at least 1")
	case bench.payloadBytes < 8 || bench.payloadBytes > 1<<20:
		return nil, exitErrorf(exitUsage, "--payload-bytes %d: want 8 to 1048576 (round-trip stamps 8 bytes of send time)", bench.payloadBytes)
	case changed("duration") && changed("count"):
		return nil, exitErrorf(exitUsage, "--duration and --count exclude each other: give one")
	case bench.count < 0 || bench.rate < 0:
		return nil, exitErrorf(exitUsage, "--count and --rate must not be negative")
	case bench.consumeTier != "work" && bench.consumeTier != "streaming":
		return nil, exitErrorf(exitUsage, "--consume-tier %q: want work or streaming", bench.consumeTier)
	case bench.addr != "" && !bench.live:
		return nil, exitErrorf(exitUsage, "--addr %s is a running broker: bench would write records into it; add --i-understand-this-is-live", bench.addr)
	case bench.addr != "" && bench.profileOut != "":
		return nil, exitErrorf(exitUsage, "--profile-out needs the broker bench starts itself (no --addr)")
	case bench.addr != "" && bench.profile != "":
		return nil, exitErrorf(exitUsage, "--profile configures the broker bench starts itself (no --addr)")
	}
	for _, knob := range []struct{ flag, value string }{{"loop", bench.loop}, {"io-mode", bench.ioMode}} {
		if bench.profile == "" || changed(knob.flag) {
			plan.knobs = append(plan.knobs, "--"+knob.flag, knob.value)
		}
	}
	if bench.profile != "" {
		plan.knobs = append(plan.knobs, "--profile", bench.profile)
	}
	if err := bench.subjectOptions.check(bench.mode); err != nil {
		return nil, err
	}
	payloads, err := bench.payloadOptions.load()
	if err != nil {
		return nil, err
	}
	plan.payloads = payloads
	if bench.count == 0 {
		plan.length = 10 * time.Second
		if bench.duration != "" {
			length, err := parseBenchDuration(bench.duration)
			if err != nil {
				return nil, err
			}
			plan.length = length
		}
	}
	return plan, nil
}

// parseBenchDuration takes seconds ("5", "2.5") or a Go duration ("5s").
func parseBenchDuration(text string) (time.Duration, error) {
	if seconds, err := strconv.ParseFloat(text, 64); err == nil && seconds > 0 {
		return time.Duration(seconds * float64(time.Second)), nil
	}
	if length, err := time.ParseDuration(text); err == nil && length > 0 {
		return length, nil
	}
	return 0, exitErrorf(exitUsage, "--duration %q: want seconds (10) or a duration (10s, 1m)", text)
}

func runBench(ctx context.Context, opts *globalOptions, plan *benchPlan) error {
	target := &benchTarget{addr: plan.addr, live: plan.addr != ""}
	if target.live {
		if err := benchLiveConnect(opts, plan); err != nil {
			return err
		}
	} else {
		if err := target.start(plan); err != nil {
			return err
		}
		defer target.remove()
	}
	progress := newProgress(opts, plan)
	result, err := runLoad(ctx, plan, target, progress)
	progress.done()
	if err != nil {
		_ = target.stop()
		return exitErrorf(exitDamage, "bench: %w", err)
	}
	if !target.live {
		if err := target.stop(); err != nil {
			return err
		}
		target.addBrokerFigures(&result)
	}
	result.fill(plan)
	if opts.json {
		return writeJSON(opts.stdout, result)
	}
	result.print(opts, plan)
	return nil
}

// progress rewrites one status line on a terminal once a second; it is
// silent when stderr is not one, or with --json.
type progress struct {
	enabled bool
	began   time.Time
	stop    chan struct{}
	stopped chan struct{}
}

func newProgress(opts *globalOptions, plan *benchPlan) *progress {
	p := &progress{began: time.Now(), stop: make(chan struct{}), stopped: make(chan struct{})}
	info, err := os.Stderr.Stat()
	p.enabled = !opts.json && err == nil && info.Mode()&os.ModeCharDevice != 0
	if !p.enabled {
		close(p.stopped)
		return p
	}
	go p.run(opts, plan)
	return p
}

func (p *progress) run(opts *globalOptions, plan *benchPlan) {
	defer close(p.stopped)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			fmt.Fprint(opts.stderr, "\r\033[K")
			return
		case <-ticker.C:
			elapsed := time.Since(p.began).Truncate(time.Second)
			if plan.length > 0 {
				fmt.Fprintf(opts.stderr, "\r\033[Kbench %s: %s of %s", plan.mode, elapsed, plan.length)
			} else {
				fmt.Fprintf(opts.stderr, "\r\033[Kbench %s: %s, %d records", plan.mode, elapsed, plan.count)
			}
		}
	}
}

func (p *progress) done() {
	if p.enabled {
		close(p.stop)
	}
	<-p.stopped
}

// The help text lives in constants so the constructor stays a screen long.
const (
	benchLong = `Measure IronBus on this machine, the way its numbers are published.

By default bench starts its own broker (this binary, "serve") on a temporary
data directory, loads it, stops it and removes the directory, so it measures
the machine's disk as a real deployment would use it. Every publish is
acknowledged only after the fdatasync that covers it (--durability sync).

Modes:
  publish     producers send pipelined records (--pubwindow in flight each);
              reports durable msgs/s, MB/s and ack latency
  subscribe   stores the records first, then consumers read them all
              (--consume-tier work: leased fetches with acks; streaming:
              no leases, a committed position); reports consume msgs/s
  round-trip  producers and consumers at once; reports end-to-end latency
              (send to delivery) besides the ack latency

--subjects N spreads the records over N distinct subjects (bench.s0 …),
routed by subject through a binding bench makes (bench.> → the stream), to
measure routing. In subscribe mode, --filter PATTERN makes the consumers read
through a subject filter, and --filter-sparse K publishes 1 record in K with
the subject bench.match and filters for it; both report the matching records
delivered per second and the records traversed per second (delivered plus
skipped by the filter).

--rate R makes the producers open-loop: records are due at a fixed rate and
latency counts from when a record was due, not when it could be sent, so a
stall is not hidden (no coordinated omission).

Beside the rates it reports what the broker did for them: fdatasyncs/s and
records per fdatasync, its peak anonymous RSS, and the bytes it wrote to disk
per payload byte (all read from the broker process, so only when bench
started it). Payloads are zeros and go uncompressed by default, so runs
compare with earlier ones and with peers that store raw bytes; zeros shrink
to almost nothing, so --compress lz4|zstd means something only with
--payload-file, a sample of the data you will publish. Pointing bench at a running broker (--addr) writes load into it:
that needs --i-understand-this-is-live.`

	benchExamples = `  ironbus bench
  ironbus bench --producers 8 --pubwindow 512 --payload-bytes 1024 --duration 10s
  ironbus bench --mode round-trip --rate 1000 --duration 20s
  ironbus bench --mode subscribe --count 1000000 --consume-tier streaming
  ironbus bench --loop std --io-mode direct --json
  ironbus bench --subjects 10000 --duration 5s
  ironbus bench --mode subscribe --count 1000000 --consume-tier streaming --filter-sparse 100
  ironbus bench --tls --duration 5s
  ironbus bench --compress lz4 --payload-file sample.jsonl --payload-bytes 1024`
)
