package main

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/session"
	"github.com/ironbus/ironbus/wire"
)

// readBufferSize is each connection's read buffer: one read takes up to
// this much, hundreds of small frames at once.
const readBufferSize = 64 << 10

// memoryOptions are the knobs that bound what the broker may hold.
type memoryOptions struct {
	ceiling          int64
	edge             bool
	printBudget      bool
	maxFrame         int64
	largeFramePool   int64 // 0: two largest frames
	window           int
	connectionOutput int64
	maxStreams       int
	maxGroups        int
	maxInFlight      int
	stagingBytes     int64
}

func defaultMemoryOptions() memoryOptions {
	return memoryOptions{maxFrame: wire.DefaultMaxFrame, window: session.DefaultWindow,
		connectionOutput: session.DefaultConnectionOutput, maxStreams: broker.DefaultMaxStreams,
		maxGroups: broker.DefaultMaxGroups, maxInFlight: consumer.DefaultMaxInFlight,
		stagingBytes: segment.DefaultStagingBytes}
}

func addMemoryFlags(cmd *cobra.Command, memory *memoryOptions) {
	flags := cmd.Flags()
	flags.Var(sizeValue{&memory.ceiling}, "ram-ceiling", "refuse to start unless the RAM budget fits in this (64MiB); also the Go runtime's memory limit")
	flags.BoolVar(&memory.edge, "edge", false, "deprecated: the same as --profile edge-tiny")
	flags.BoolVar(&memory.printBudget, "print-budget", false, "print the RAM budget line by line and exit")
	flags.Var(sizeValue{&memory.maxFrame}, "max-frame", "largest frame a client may send (a record plus about 100 bytes)")
	flags.Var(sizeValue{&memory.largeFramePool}, "large-frame-pool", "memory shared by frames larger than the 64KiB read buffer (default two largest frames)")
	flags.IntVar(&memory.window, "window", memory.window, "produce requests a connection may have unacknowledged")
	flags.Var(sizeValue{&memory.connectionOutput}, "connection-output", "reply bytes queued per connection before it stops reading")
	flags.IntVar(&memory.maxStreams, "max-streams", memory.maxStreams, "streams served; more are refused")
	flags.IntVar(&memory.maxGroups, "max-groups", memory.maxGroups, "consumer groups across all streams; more are refused")
	flags.IntVar(&memory.maxInFlight, "max-in-flight", memory.maxInFlight, "deliveries a consumer group may have leased and unacknowledged")
	flags.Var(sizeValue{&memory.stagingBytes}, "staging-bytes", "records a stream buffers while its previous batch is written")
}

// memoryPlan is the budget of a configuration and the pools built for it.
type memoryPlan struct {
	budget       *arena.Budget
	readBuffers  *arena.Slab
	outputChunks *arena.Slab
	staging      *arena.Slab
	largeFrames  *arena.SharedPool
	largeRecords *arena.SharedPool
	maxBuffer    int
	output       int
	loops        int
}

// planMemory builds the pools the configuration allows (their memory is
// reserved, not touched) and registers every line of the budget; cfg gets
// the large-record pool.
func planMemory(serve *serveOptions, cfg *brokerSettings) (*memoryPlan, error) {
	memory := serve.memory
	if memory.maxFrame < wire.MinMaxFrame || memory.maxFrame > 1<<30 {
		return nil, exitErrorf(exitUsage, "--max-frame %s: want between %s and 1GiB", formatSize(memory.maxFrame), formatSize(wire.MinMaxFrame))
	}
	maxBuffer := memory.maxFrame + readBufferSize
	pool := memory.largeFramePool
	if pool == 0 {
		pool = 2 * maxBuffer
	}
	if pool < maxBuffer {
		return nil, exitErrorf(exitUsage, "--large-frame-pool %s cannot hold one largest frame: it needs at least --max-frame + 64KiB (%s)",
			formatSize(pool), arena.FormatBytes(maxBuffer))
	}
	plan := &memoryPlan{budget: arena.NewBudget(), maxBuffer: int(maxBuffer),
		output: int(memory.connectionOutput), loops: runtime.GOMAXPROCS(0)}
	plan.budget.Register("Go runtime and fixed structures", "fixed", broker.RuntimeBaseline)
	serve.storage.registerMemory(plan.budget)
	var err error
	if plan.readBuffers, err = arena.NewSlab(plan.budget, "connection read buffers", "--max-connections × 64 KiB",
		readBufferSize, serve.maxConnections, true); err != nil {
		return nil, exitErrorf(exitUsage, "reserving read buffers: %w", err)
	}
	perReactor, explanation := loop.ReactorMemory(serve.loop, readBufferSize)
	if perReactor > 0 {
		plan.budget.Register("network reactors", explanation, int64(plan.loops)*perReactor)
	}
	// The batch being sent and the one filling, each up to the limit. The
	// slab is shared: the write that crosses a connection's limit takes
	// a chunk another connection is not using (when every connection is
	// full at once, that chunk comes from the heap).
	chunksPerConnection := 2 * int((memory.connectionOutput+loop.OutputChunkSize-1)/loop.OutputChunkSize)
	if plan.outputChunks, err = arena.NewLazySlab(plan.budget, "socket output queues", "--max-connections × 2 × --connection-output",
		loop.OutputChunkSize, serve.maxConnections*chunksPerConnection); err != nil {
		plan.close()
		return nil, exitErrorf(exitUsage, "--max-connections, --connection-output: %w", err)
	}
	if err := registerSecurityMemory(plan.budget, serve.security, serve.maxConnections); err != nil {
		plan.close()
		return nil, err
	}
	if plan.largeFrames, err = arena.NewSharedPool(plan.budget, "large frames being read", "--large-frame-pool", pool); err != nil {
		plan.close()
		return nil, exitErrorf(exitUsage, "--large-frame-pool: %w", err)
	}
	if plan.largeRecords, err = arena.NewAdmission(plan.budget, "large records being written", "--large-frame-pool", pool); err != nil {
		plan.close()
		return nil, exitErrorf(exitUsage, "--large-frame-pool: %w", err)
	}
	cfg.Session.LargeRecords = plan.largeRecords
	perLog := segment.StagingBuffersPerLog(cfg.Storage.IOMode)
	if plan.staging, err = arena.NewLazySlab(plan.budget, "append staging",
		fmt.Sprintf("--max-streams × %d × --staging-bytes", perLog),
		segment.StagingBufferSize(cfg.Storage), memory.maxStreams*perLog); err != nil {
		plan.close()
		return nil, exitErrorf(exitUsage, "--max-streams, --staging-bytes: %w", err)
	}
	cfg.Storage.StagingBuffers = plan.staging
	if err := cfg.RegisterMemory(plan.budget); err != nil {
		plan.close()
		return nil, exitErrorf(exitUsage, "%w", err)
	}
	if err := cfg.Session.RegisterMemory(plan.budget, cfg.Config); err != nil {
		plan.close()
		return nil, exitErrorf(exitUsage, "%w", err)
	}
	return plan, nil
}

// enforce refuses a budget over the ceiling and hands the rest of the
// ceiling to the Go runtime as its memory limit (the off-heap read buffers
// are outside what the runtime counts).
func (plan *memoryPlan) enforce(ceiling int64) error {
	if ceiling == 0 {
		return nil
	}
	if err := plan.budget.Check(ceiling); err != nil {
		return exitErrorf(exitUsage, "%w", err)
	}
	var offHeap int64
	for _, slab := range []*arena.Slab{plan.readBuffers, plan.outputChunks, plan.staging} {
		offHeap += int64(slab.Capacity()) * int64(slab.BufferSize())
	}
	debug.SetMemoryLimit(ceiling - offHeap)
	return nil
}

// loopConfig is the network backend's share of the plan.
func (plan *memoryPlan) loopConfig(logger *slog.Logger) loop.Config {
	return loop.Config{Logger: logger, ReadBufferSize: readBufferSize, MaxBuffer: plan.maxBuffer,
		OutputLimit: plan.output, Loops: plan.loops, Buffers: plan.readBuffers, LargeFrames: plan.largeFrames, OutputBuffers: plan.outputChunks}
}

func (plan *memoryPlan) close() {
	if plan.readBuffers != nil {
		_ = plan.readBuffers.Close()
	}
	for _, slab := range []*arena.Slab{plan.outputChunks, plan.staging} {
		if slab != nil {
			_ = slab.Close()
		}
	}
}

func ceilingText(ceiling int64) string {
	if ceiling == 0 {
		return "none"
	}
	return arena.FormatBytes(ceiling)
}

// budgetOutput is the --json form of serve --print-budget.
type budgetOutput struct {
	Schema  string       `json:"schema"`
	Lines   []budgetLine `json:"lines"`
	Total   int64        `json:"total_bytes"`
	Ceiling int64        `json:"ceiling_bytes"`
	Fits    bool         `json:"fits"`
}

type budgetLine struct {
	Name  string `json:"name"`
	Knob  string `json:"knob"`
	Bytes int64  `json:"bytes"`
}

func printBudget(opts *globalOptions, budget *arena.Budget, ceiling int64) error {
	total := budget.Total()
	fits := ceiling == 0 || total <= ceiling
	if opts.json {
		out := budgetOutput{Schema: "ironbus.cli.budget.v1", Total: total, Ceiling: ceiling, Fits: fits}
		for _, line := range budget.Lines() {
			out.Lines = append(out.Lines, budgetLine{Name: line.Name, Knob: line.Knob, Bytes: line.Bytes})
		}
		return writeJSON(opts.stdout, out)
	}
	for _, line := range budget.Lines() {
		fmt.Fprintf(opts.stdout, "  %-44s %10s  (%s)\n", line.Name, arena.FormatBytes(line.Bytes), line.Knob)
	}
	fmt.Fprintf(opts.stdout, "  %-44s %10s  (ceiling %s)\n", "total", arena.FormatBytes(total), ceilingText(ceiling))
	if !fits {
		return exitErrorf(exitUsage, "the budget does not fit the ceiling; lower a knob above or raise --ram-ceiling")
	}
	return nil
}
