package broker

import (
	"testing"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/txn"
)

func budgetLines(t *testing.T, cfg Config) map[string]int64 {
	t.Helper()
	budget := arena.NewBudget()
	if err := cfg.RegisterMemory(budget); err != nil {
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
	base := Config{DataDir: t.TempDir(), MaxConnections: 10, MaxStreams: 4, MaxGroups: 3, MaxInFlight: 100,
		Storage: segment.Options{StagingBytes: 1 << 20}}
	before := budgetLines(t, base)
	doubled := base
	doubled.MaxStreams, doubled.MaxGroups, doubled.Transactions.MaxOpen = 8, 6, 2*txn.DefaultMaxOpen
	after := budgetLines(t, doubled)
	for name, bytes := range before {
		if name == "producer registry" {
			continue // scales with producer names, per data directory
		}
		if name == "key compaction" { // one log at a time, whatever the streams
			if after[name] != bytes {
				t.Errorf("%q: %d bytes, then %d after doubling streams", name, bytes, after[name])
			}
			continue
		}
		if after[name] != 2*bytes {
			t.Errorf("%q: %d bytes, then %d after doubling streams and groups; want twice", name, bytes, after[name])
		}
	}
	if got := before["consumer group leases"]; got != 3*100*leaseCost {
		t.Errorf("consumer group leases: %d bytes, want 3 groups × 100 × %d", got, leaseCost)
	}
}

func TestRegisterMemoryRejectsABadConfig(t *testing.T) {
	if err := (Config{}).RegisterMemory(arena.NewBudget()); err == nil {
		t.Fatal("a config without a data directory registered its memory")
	}
}
