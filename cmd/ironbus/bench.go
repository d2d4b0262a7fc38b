package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/benchrig"
	"github.com/ironbus/ironbus/benchrig/brokerproc"
	"github.com/ironbus/ironbus/benchrig/floor"
	"github.com/ironbus/ironbus/benchrig/load"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
)

// bench parses its flags into a benchrig/load run against a broker that
// benchrig/brokerproc starts (or a live one) and prints the result.
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
	commitLinger time.Duration
	floor        bool
	profile      string // started broker's configuration profile ("": serve's default)
	profileOut   string
	tls          bool
	compress     string
	payloadFile  string
	subjects     int
	filter       string
	filterSparse int
	idempotence  string
	messageIDs   bool
}

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
	flags.DurationVar(&bench.commitLinger, "commit-linger", 0, "started broker: how long a busy stream's fdatasync may wait to cover more records (flash-wear mode; 0: never)")
	flags.BoolVar(&bench.floor, "floor", false, "measure the TCP floor and the raw disk loop on this disk just before and after the broker, and report the broker's rate as a ratio of each")
	flags.StringVar(&bench.profile, "profile", "", "started broker: configuration profile (edge-tiny, balanced, throughput); --loop and --io-mode then follow it unless given")
	flags.StringVar(&bench.profileOut, "profile-out", "", "started broker: write CPU and heap profiles of the run into this directory")
	flags.BoolVar(&opts.json, "json", false, "print one flat JSON object (schema "+load.Schema+")")
	// A started broker serves TLS with a throwaway certificate; a live one
	// (--addr) is reached with the shared --tls-* and credential flags.
	flags.BoolVar(&bench.tls, "tls", false,
		"started broker: serve TLS 1.3 with a throwaway self-signed certificate made in a temporary directory (the load verifies it)")
	markClientVerb(cmd)
	flags.StringVar(&bench.compress, "compress", "none",
		"producer compression: none, lz4 or zstd (the default payloads are zeros, so give --payload-file for numbers that mean anything)")
	flags.StringVar(&bench.payloadFile, "payload-file", "",
		"fill payloads with this file's bytes, --payload-bytes at a time, cycling through its first 64 MiB")
	flags.IntVar(&bench.subjects, "subjects", 0, "publish over this many distinct subjects, routed by subject through a binding bench makes ("+load.BindingPattern+" → the stream)")
	flags.StringVar(&bench.filter, "filter", "", "subscribe: consumers read through this subject filter (the subjects are "+load.SubjectPrefix+"0 …)")
	flags.IntVar(&bench.filterSparse, "filter-sparse", 0, "subscribe: publish 1 record in K with subject "+load.SparseMatch+" (the rest "+load.SparseOther+") and filter for it")
	flags.StringVar(&bench.idempotence, "idempotence", "on", "producers stamp records with a producer id and sequence (on, the SDK's default) or not (off)")
	flags.BoolVar(&bench.messageIDs, "msg-id", false, "give every record a unique message id, checked against the stream's dedup window")
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
	load load.Config
	// addr is the live broker to load; "" starts one with brokerArgs,
	// serving TLS when tls is set.
	addr       string
	brokerArgs []string
	tls        bool
	floor      bool // measure the floors around the run
}

func (bench *benchOptions) plan(changed func(string) bool) (*benchPlan, error) {
	if err := bench.check(changed); err != nil {
		return nil, err
	}
	plan := &benchPlan{addr: bench.addr, tls: bench.tls, floor: bench.floor, load: load.Config{
		Mode: load.Mode(bench.mode), Producers: bench.producers, Consumers: bench.consumers, Window: bench.pubWindow,
		PayloadBytes: bench.payloadBytes, Count: bench.count, Rate: bench.rate, Tier: load.Tier(bench.consumeTier),
		Stream: bench.stream, Subjects: load.Subjects{Count: bench.subjects, Filter: bench.filter, Sparse: bench.filterSparse},
		Broker: "started", BrokerProfile: bench.profile, Durability: bench.durability, CommitLinger: bench.commitLinger,
		MessageIDs: bench.messageIDs,
	}}
	if bench.idempotence == "off" {
		plan.load.Idempotence = client.IdempotenceOff
	}
	if bench.addr != "" {
		plan.load.Broker = "live"
	}
	settings := brokerproc.Settings{Durability: bench.durability, Connections: bench.producers + bench.consumers,
		Profile: bench.profile, CommitLinger: bench.commitLinger, ProfileOut: bench.profileOut}
	// Without --profile serve's defaults go too; a profile sets its own.
	if bench.profile == "" || changed("loop") {
		settings.Loop = bench.loop
	}
	if bench.profile == "" || changed("io-mode") {
		settings.IOMode = bench.ioMode
	}
	plan.brokerArgs = settings.Args()
	payloads, err := bench.payloads()
	if err != nil {
		return nil, err
	}
	plan.load.Payloads = payloads
	if bench.count == 0 {
		plan.load.Duration = 10 * time.Second
		if bench.duration != "" {
			length, err := benchrig.ParseDuration(bench.duration)
			if err != nil {
				return nil, exitErrorf(exitUsage, "--duration %v", err)
			}
			plan.load.Duration = length
		}
	}
	return plan, nil
}

// check validates the flags against each other.
func (bench *benchOptions) check(changed func(string) bool) error {
	switch {
	case bench.mode != "publish" && bench.mode != "subscribe" && bench.mode != "round-trip":
		return exitErrorf(exitUsage, "--mode %q: want publish, subscribe or round-trip", bench.mode)
	case bench.producers < 1 || bench.consumers < 1 || bench.pubWindow < 1:
		return exitErrorf(exitUsage, "--producers, --consumers and --pubwindow must be at least 1")
	case bench.payloadBytes < load.StampBytes || bench.payloadBytes > 1<<20:
		return exitErrorf(exitUsage, "--payload-bytes %d: want 8 to 1048576 (round-trip stamps 8 bytes of send time)", bench.payloadBytes)
	case changed("duration") && changed("count"):
		return exitErrorf(exitUsage, "--duration and --count exclude each other: give one")
	case bench.count < 0 || bench.rate < 0:
		return exitErrorf(exitUsage, "--count and --rate must not be negative")
	case bench.idempotence != "on" && bench.idempotence != "off":
		return exitErrorf(exitUsage, "--idempotence %q: want on or off", bench.idempotence)
	case bench.consumeTier != "work" && bench.consumeTier != "streaming":
		return exitErrorf(exitUsage, "--consume-tier %q: want work or streaming", bench.consumeTier)
	case bench.addr != "" && !bench.live:
		return exitErrorf(exitUsage, "--addr %s is a running broker: bench would write records into it; add --i-understand-this-is-live", bench.addr)
	case bench.addr != "" && bench.profileOut != "":
		return exitErrorf(exitUsage, "--profile-out needs the broker bench starts itself (no --addr)")
	case bench.addr != "" && bench.profile != "":
		return exitErrorf(exitUsage, "--profile configures the broker bench starts itself (no --addr)")
	case bench.commitLinger < 0 || bench.commitLinger > segment.MaxCommitLinger:
		return exitErrorf(exitUsage, "--commit-linger %v: want 0 to %v", bench.commitLinger, segment.MaxCommitLinger)
	case bench.commitLinger != 0 && bench.durability != "sync":
		return exitErrorf(exitUsage, "--commit-linger holds fdatasyncs that --durability %s does not wait for: use it with --durability sync", bench.durability)
	case bench.addr != "" && (bench.commitLinger != 0 || bench.floor):
		return exitErrorf(exitUsage, "--commit-linger and --floor need the broker bench starts itself (no --addr): the floors measure this machine's disk")
	case bench.addr != "" && bench.tls:
		return exitErrorf(exitUsage, "--tls makes the started broker serve TLS; for a live broker (--addr) give --tls-ca instead")
	}
	return bench.checkSubjects()
}

// checkSubjects validates the subject flags against the mode.
func (bench *benchOptions) checkSubjects() error {
	switch {
	case bench.subjects < 0 || bench.filterSparse < 0:
		return exitErrorf(exitUsage, "--subjects and --filter-sparse must not be negative")
	case bench.filterSparse > 0 && bench.subjects > 0:
		return exitErrorf(exitUsage, "--filter-sparse picks its own two subjects: leave out --subjects")
	case bench.filterSparse > 0 && bench.filter != "":
		return exitErrorf(exitUsage, "--filter-sparse filters for %s itself: leave out --filter", load.SparseMatch)
	case (bench.filter != "" || bench.filterSparse > 0) && bench.mode != "subscribe":
		return exitErrorf(exitUsage, "--filter and --filter-sparse measure consumers: use them with --mode subscribe")
	case bench.filter != "" && bench.subjects == 0:
		return exitErrorf(exitUsage, "--filter needs subjects to filter: add --subjects N")
	}
	if bench.filter != "" {
		if err := subject.ValidatePattern([]byte(bench.filter)); err != nil {
			return exitErrorf(exitUsage, "--filter %q: %v", bench.filter, err)
		}
	}
	return nil
}

// payloads reads --compress and --payload-file.
func (bench *benchOptions) payloads() (load.Payloads, error) {
	payloads := load.Payloads{File: bench.payloadFile}
	compression, err := client.ParseCompression(bench.compress)
	if err != nil {
		return payloads, exitErrorf(exitUsage, "--compress %q: want none, lz4 or zstd", bench.compress)
	}
	payloads.Compression = compression
	if bench.payloadFile == "" {
		return payloads, nil
	}
	source, err := load.ReadPayloadFile(bench.payloadFile)
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, load.ErrEmptyPayloadFile):
		return payloads, exitErrorf(exitUsage, "--payload-file %s is empty: give a sample of the data you will publish", bench.payloadFile)
	case errors.As(err, &pathErr) && pathErr.Op == "open":
		return payloads, exitErrorf(exitNotFound, "--payload-file: %w", err)
	case err != nil:
		return payloads, exitErrorf(exitUnreadable, "--payload-file: %w", err)
	}
	payloads.Source = source
	return payloads, nil
}

func runBench(ctx context.Context, opts *globalOptions, plan *benchPlan) error {
	var result load.Result
	var runErr error
	measure := func() error {
		result, runErr = benchOnce(ctx, opts, plan)
		return runErr
	}
	if plan.floor {
		// The floors use the temporary directory, where brokerproc puts
		// the broker's data directory: the same disk.
		floors, err := floor.Around(os.TempDir(), plan.load.PayloadBytes, floor.SliceFor(plan.load.Duration), measure)
		switch {
		case runErr != nil:
			return runErr
		case err != nil:
			return exitErrorf(exitUnreadable, "bench --floor: %w", err)
		}
		result.AddFloor(floors)
	} else if err := measure(); err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.stdout, result)
	}
	printBenchResult(opts, plan, &result)
	return nil
}

// benchOnce starts the broker (unless the plan names a live one), loads
// it and returns the run's figures.
func benchOnce(ctx context.Context, opts *globalOptions, plan *benchPlan) (load.Result, error) {
	addr := plan.addr
	var broker *brokerproc.Process
	if addr != "" {
		if err := opts.connect.apply(&plan.load.Connect); err != nil {
			return load.Result{}, fmt.Errorf("bench: %w", err)
		}
	} else {
		var err error
		if broker, err = startBenchBroker(plan); err != nil {
			return load.Result{}, err
		}
		defer broker.Remove()
		addr, plan.load.Connect.TLS = broker.Addr(), broker.ClientTLS()
	}
	progress := newProgress(opts, plan)
	result, err := load.Run(ctx, plan.load, addr)
	progress.done()
	if err != nil {
		if broker != nil {
			_, _ = broker.Stop()
		}
		if errors.Is(err, load.ErrInvalidConfig) {
			return result, exitErrorf(exitInternal, "bench: %w", err)
		}
		return result, exitErrorf(exitDamage, "bench: %w", err)
	}
	if broker != nil {
		usage, err := broker.Stop()
		if err != nil {
			return result, exitErrorf(exitInternal, "bench: %w", err)
		}
		result.AddBrokerUsage(usage)
	}
	return result, nil
}

// startBenchBroker starts this binary's serve as the broker under load.
func startBenchBroker(plan *benchPlan) (*brokerproc.Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, exitErrorf(exitInternal, "bench: finding this binary: %w", err)
	}
	broker, err := brokerproc.Start(brokerproc.Options{Binary: self, Args: plan.brokerArgs, TLS: plan.tls})
	switch {
	case errors.Is(err, brokerproc.ErrTemporaryDirectory):
		return nil, exitErrorf(exitUnreadable, "bench: %w", err)
	case err != nil:
		return nil, exitErrorf(exitInternal, "bench: %w", err)
	}
	return broker, nil
}

func printBenchResult(opts *globalOptions, plan *benchPlan, r *load.Result) {
	out := opts.stdout
	broker := r.Broker
	if r.BrokerProfile != "" {
		broker += " (profile " + r.BrokerProfile + ")"
	}
	fmt.Fprintf(out, "%s: %d producers × window %d, %d B payloads, durability %s, broker %s\n",
		r.Mode, r.Producers, r.PubWindow, r.PayloadBytes, r.Durability, broker)
	fmt.Fprintf(out, "  payloads    %s\n", plan.load.Payloads.Describe())
	fmt.Fprintf(out, "  producers   idempotence %s, %s\n", r.Idempotence, describeMessageIDs(r.MessageIDs))
	fmt.Fprintf(out, "  published   %d records in %.2f s: %.0f msg/s, %.1f MB/s\n", r.Records, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	fmt.Fprintf(out, "  ack latency p50 %.0f µs  p99 %.0f µs  p99.9 %.0f µs  max %.0f µs\n", r.AckP50, r.AckP99, r.AckP999, r.AckMax)
	if r.Subjects > 0 {
		fmt.Fprintf(out, "  subjects    %d distinct, routed by subject (%s → %s)\n", r.Subjects, load.BindingPattern, plan.load.Stream)
	}
	if r.ConsumedRecords > 0 {
		fmt.Fprintf(out, "  consumed    %d records (%s tier, %d consumers) in %.2f s: %.0f msg/s\n",
			r.ConsumedRecords, r.ConsumeTier, r.Consumers, r.ConsumeSeconds, r.ConsumePerSec)
	}
	if r.Filter != "" {
		fmt.Fprintf(out, "  filter      %s: %d records traversed, %.0f traversed/s (%.0f matching delivered/s)\n",
			r.Filter, r.TraversedRecords, r.TraversePerSec, r.ConsumePerSec)
	}
	if r.E2EP50 > 0 {
		fmt.Fprintf(out, "  end to end  p50 %.0f µs  p99 %.0f µs  p99.9 %.0f µs  max %.0f µs\n", r.E2EP50, r.E2EP99, r.E2EP999, r.E2EMax)
	}
	if r.Broker == "started" {
		fmt.Fprintf(out, "  broker      %.0f fdatasyncs/s, %.1f records per fdatasync, peak RSS %.1f MiB\n",
			r.FsyncsPerSec, r.RecordsPerFsync, float64(r.RSSBytes)/(1<<20))
		fmt.Fprintf(out, "  write amplification %.2f (disk bytes per payload byte)", r.DiskPerPayload)
		if r.CommitLinger != "" {
			fmt.Fprintf(out, ", commit linger %s", r.CommitLinger)
		}
		fmt.Fprintln(out)
	}
	if r.FloorTCPPerSec > 0 {
		fmt.Fprintf(out, "  floors      TCP+fdatasync %.0f msg/s (p50 %.0f µs), raw disk %.0f syncs/s (p50 %.0f µs), one message in flight, before and after\n",
			r.FloorTCPPerSec, r.FloorTCPP50, r.FloorRawPerSec, r.FloorRawP50)
		fmt.Fprintf(out, "  vs floors   %.2f× the TCP floor, %.2f× the raw disk loop\n", r.RatioToTCPFloor, r.RatioToRawDisk)
	}
	if r.Durability != "sync" {
		fmt.Fprintf(out, "  NOTE: --durability %s acknowledges before the fdatasync; a power cut loses acknowledged records\n", r.Durability)
	}
}

func describeMessageIDs(on bool) string {
	if on {
		return "a unique message id on every record (dedup window checked)"
	}
	return "no message ids"
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
			if plan.load.Count == 0 {
				fmt.Fprintf(opts.stderr, "\r\033[Kbench %s: %s of %s", plan.load.Mode, elapsed, plan.load.Duration)
			} else {
				fmt.Fprintf(opts.stderr, "\r\033[Kbench %s: %s, %d records", plan.load.Mode, elapsed, plan.load.Count)
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

--idempotence off sends records without a producer id and sequence (the
SDK's default, and bench's, is on), and --msg-id gives every record a unique
message id, which the broker checks against the stream's dedup window:
compare the three to see what each guarantee costs.

Beside the rates it reports what the broker did for them: fdatasyncs/s and
records per fdatasync, its peak anonymous RSS, and the bytes it wrote to disk
per payload byte, the write amplification (all read from the broker
process, so only when bench started it). --commit-linger D starts the
broker in flash-wear mode (serve --commit-linger D): compare the write
amplification and the ack latency with and without it.

--floor measures, on the same disk just before and just after the
broker, the raw write + fdatasync loop and a minimal TCP server that
fdatasyncs each message before answering (one message in flight), and
reports the broker's rate as a ratio of each: its own overhead on this
disk. Payloads are zeros and go uncompressed by default, so runs
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
  ironbus bench --producers 1 --pubwindow 1 --floor
  ironbus bench --producers 8 --pubwindow 1 --commit-linger 2ms
  ironbus bench --producers 8 --pubwindow 512 --idempotence off
  ironbus bench --producers 8 --pubwindow 512 --msg-id
  ironbus bench --tls --duration 5s
  ironbus bench --compress lz4 --payload-file sample.jsonl --payload-bytes 1024`
)
