package session

import (
	"testing"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/segment"
)

func budgetLines(t *testing.T, engine broker.Config, cfg Config) map[string]int64 {
	t.Helper()
	budget := arena.NewBudget()
	if err := cfg.RegisterMemory(budget, engine); err != nil {
		t.Fatal(err)
	}
	lines := map[string]int64{}
	for _, line := range budget.Lines() {
		if line.Bytes <= 0 || line.Knob == "" {
			t.Errorf("line %q: %d bytes, knob %q: every line needs a size and the knob that scales it", line.Name, line.Bytes, line.Knob)
		}
		lines[line.Name] = line.Bytes
	}
	return lines
}

// TestRegisterMemoryScalesWithItsKnobs checks each line moves with the knob
// it names, so an operator who turns that knob gets the saving the budget
// promised.
func TestRegisterMemoryScalesWithItsKnobs(t *testing.T) {
	engine := broker.Config{MaxConnections: 10, MaxStreams: 4, Storage: segment.Options{StagingBytes: 1 << 20}}
	cfg := Config{ConnectionOutput: 1 << 20, MaxFrame: 8 << 20}
	before := budgetLines(t, engine, cfg)
	doubled := engine
	doubled.MaxConnections, doubled.MaxStreams = 20, 8
	after := budgetLines(t, doubled, cfg)
	for name, bytes := range before {
		if after[name] != 2*bytes {
			t.Errorf("%q: %d bytes, then %d after doubling connections and streams; want twice", name, bytes, after[name])
		}
	}
	if got := before["reply queues"]; got != 10<<20 {
		t.Errorf("reply queues: %d bytes, want 10 connections × 1 MiB", got)
	}
}

// TestRegisterMemoryLargeRecords checks that without a shared pool every
// stream is charged for its own large records, and with one the pool's
// capacity (registered by whoever built it) stands in for them.
func TestRegisterMemoryLargeRecords(t *testing.T) {
	engine := broker.Config{MaxStreams: 2, Storage: segment.Options{StagingBytes: 1 << 20}}
	cfg := Config{MaxFrame: 8 << 20}
	const line = "large records being written (no shared pool)"
	if got := budgetLines(t, engine, cfg)[line]; got != 2*2*(8<<20) {
		t.Errorf("without a pool: %d bytes for large records, want 2 streams × 2 × 8 MiB", got)
	}
	budget := arena.NewBudget()
	pool, err := arena.NewAdmission(budget, "large records", "--large-frame-pool", 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	cfg.LargeRecords = pool
	if got, found := budgetLines(t, engine, cfg)[line]; found {
		t.Errorf("with a pool: %d bytes still charged per stream", got)
	}
}

func TestRegisterMemoryRejectsABadConfig(t *testing.T) {
	if err := (Config{MaxFrame: 1}).RegisterMemory(arena.NewBudget(), broker.Config{}); err == nil {
		t.Fatal("a config with a max frame below the minimum registered its memory")
	}
}
