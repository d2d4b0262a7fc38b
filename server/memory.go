package server

import (
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
)

// readBufferSize is each connection's read buffer: one read takes up to
// this much, hundreds of small frames at once.
const readBufferSize = 64 << 10

// BudgetLine is one pool of the RAM budget: what it is for, the settings
// that size it, and the bytes it may ever hold.
type BudgetLine struct {
	Name  string
	Knob  string
	Bytes int64
}

// Budget is the RAM budget of a configuration: the worst case of every
// pool the broker may hold, checked against the ceiling at boot.
type Budget struct {
	Lines   []BudgetLine
	Total   int64
	Ceiling int64 // RAMCeiling; 0: none
}

// Fits reports whether the total fits the ceiling (always, without one).
func (b Budget) Fits() bool { return b.Ceiling == 0 || b.Total <= b.Ceiling }

// Budget validates cfg and returns its RAM budget, without opening
// anything: the pools are reserved and released again. A budget over the
// ceiling is no error here (Fits says so); New refuses it.
func (cfg Config) Budget() (Budget, error) {
	if err := cfg.Validate(); err != nil {
		return Budget{}, err
	}
	if cfg.DataDir == "" && cfg.Storage == StorageDisk {
		// The engine's share of the budget wants a directory name; nothing
		// opens it.
		cfg.DataDir = "unset"
	}
	mapped, err := mapConfig(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return Budget{}, err
	}
	plan, err := planMemory(cfg, &mapped)
	if err != nil {
		return Budget{}, err
	}
	defer plan.close()
	out := Budget{Total: plan.budget.Total(), Ceiling: cfg.RAMCeiling}
	for _, line := range plan.budget.Lines() {
		out.Lines = append(out.Lines, BudgetLine{Name: line.Name, Knob: line.Knob, Bytes: line.Bytes})
	}
	return out, nil
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

func overBudget(knob string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrOverBudget, knob, err)
}

// planMemory builds the pools the configuration allows (their memory is
// reserved, not touched) and registers every line of the budget; the
// sessions get the large-record pool and the engine the staging slab.
func planMemory(cfg Config, mapped *parts) (*memoryPlan, error) {
	maxBuffer := cfg.MaxFrame + readBufferSize
	pool := cfg.LargeFramePool
	if pool == 0 {
		pool = 2 * maxBuffer
	}
	plan := &memoryPlan{budget: arena.NewBudget(), maxBuffer: int(maxBuffer),
		output: int(cfg.ConnectionOutput), loops: runtime.GOMAXPROCS(0)}
	plan.budget.Register("Go runtime and fixed structures", "fixed", broker.RuntimeBaseline)
	if cfg.Storage == StorageMemory {
		plan.budget.Register("in-memory storage", "--memory-storage-cap", cfg.MemoryStorageCap)
	}
	if err := plan.reserve(cfg, mapped, pool); err != nil {
		plan.close()
		return nil, err
	}
	return plan, nil
}

func (plan *memoryPlan) reserve(cfg Config, mapped *parts, pool int64) error {
	engine := &mapped.engine
	var err error
	if plan.readBuffers, err = arena.NewSlab(plan.budget, "connection read buffers", "--max-connections × 64 KiB",
		readBufferSize, cfg.MaxConnections, true); err != nil {
		return overBudget("reserving read buffers", err)
	}
	perReactor, explanation := loop.ReactorMemory(cfg.Loop, readBufferSize)
	if perReactor > 0 {
		plan.budget.Register("network reactors", explanation, int64(plan.loops)*perReactor)
	}
	// The batch being sent and the one filling, each up to the limit. The
	// slab is shared: the write that crosses a connection's limit takes
	// a chunk another connection is not using (when every connection is
	// full at once, that chunk comes from the heap).
	chunks := int64(cfg.MaxConnections) * 2 * ((cfg.ConnectionOutput + loop.OutputChunkSize - 1) / loop.OutputChunkSize)
	if chunks > math.MaxInt32 {
		return fmt.Errorf("%w: --max-connections × 2 × --connection-output is %s: lower one of them", ErrOverBudget,
			arena.FormatBytes(chunks*loop.OutputChunkSize))
	}
	if plan.outputChunks, err = arena.NewLazySlab(plan.budget, "socket output queues", "--max-connections × 2 × --connection-output",
		loop.OutputChunkSize, int(chunks)); err != nil {
		return overBudget("--max-connections, --connection-output", err)
	}
	if err := registerSecurityMemory(plan.budget, cfg); err != nil {
		return err
	}
	if plan.largeFrames, err = arena.NewSharedPool(plan.budget, "large frames being read", "--large-frame-pool", pool); err != nil {
		return overBudget("--large-frame-pool", err)
	}
	if plan.largeRecords, err = arena.NewAdmission(plan.budget, "large records being written", "--large-frame-pool", pool); err != nil {
		return overBudget("--large-frame-pool", err)
	}
	mapped.session.LargeRecords = plan.largeRecords
	perLog := segment.StagingBuffersPerLog(engine.Storage.IOMode)
	if plan.staging, err = arena.NewLazySlab(plan.budget, "append staging",
		fmt.Sprintf("--max-streams × %d × --staging-bytes", perLog),
		segment.StagingBufferSize(engine.Storage), cfg.MaxStreams*perLog); err != nil {
		return overBudget("--max-streams, --staging-bytes", err)
	}
	engine.Storage.StagingBuffers = plan.staging
	if err := engine.RegisterMemory(plan.budget); err != nil {
		return invalid("%w", err)
	}
	if err := mapped.session.RegisterMemory(plan.budget, *engine); err != nil {
		return invalid("%w", err)
	}
	return nil
}

// registerSecurityMemory adds what TLS and password checks hold to the
// RAM budget: crypto/tls record buffers per connection, and one Argon2id
// verification (the broker runs one at a time) at the file's largest
// memory parameter (unknown users are hashed with the same parameters).
func registerSecurityMemory(budget *arena.Budget, cfg Config) error {
	if cfg.TLSCert != "" {
		budget.Register("TLS record buffers", "--max-connections × 40 KiB (crypto/tls)", int64(cfg.MaxConnections)*security.TLSConnectionMemory)
	}
	if cfg.AuthConfig == "" {
		return nil
	}
	file, err := security.LoadAuthFile(cfg.AuthConfig)
	if err != nil {
		return securityFileError("--auth-config", err)
	}
	if hashing := security.PasswordMemory(file); hashing > 0 {
		budget.Register("password verification", "one Argon2id hash at a time (the largest m in --auth-config)", hashing)
	}
	return nil
}

// enforce refuses a budget over the ceiling and hands the rest of the
// ceiling to the Go runtime as its memory limit (the off-heap pools are
// outside what the runtime counts).
func (plan *memoryPlan) enforce(ceiling int64) error {
	if ceiling == 0 {
		return nil
	}
	if err := plan.budget.Check(ceiling); err != nil {
		return fmt.Errorf("%w: %w", ErrOverBudget, err)
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
	for _, slab := range []*arena.Slab{plan.readBuffers, plan.outputChunks, plan.staging} {
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

// Check returns nil when the budget fits its ceiling; otherwise an error
// wrapping ErrOverBudget that lists every line with the settings that
// size it, so the refusal says what to change.
func (b Budget) Check() error {
	budget := arena.NewBudget()
	for _, line := range b.Lines {
		budget.Register(line.Name, line.Knob, line.Bytes)
	}
	if err := budget.Check(b.Ceiling); err != nil {
		return fmt.Errorf("%w: %w", ErrOverBudget, err)
	}
	return nil
}
