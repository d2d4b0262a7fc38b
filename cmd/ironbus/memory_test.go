package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRAMCeilingRefusesAnOverBudget checks a broker whose knobs cannot fit
// the ceiling never starts, and says which knob to turn.
func TestRAMCeilingRefusesAnOverBudget(t *testing.T) {
	result := runCLI(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--ram-ceiling", "8MiB")
	expectCode(t, result, exitUsage)
	for _, want := range []string{"ceiling", "--max-connections", "--ram-ceiling", "8 MiB", "over the ceiling by"} {
		if !strings.Contains(result.stderr, want) {
			t.Errorf("the refusal does not mention %q:\n%s", want, result.stderr)
		}
	}
	if strings.Contains(result.stderr, "serving") {
		t.Fatalf("the broker served before refusing:\n%s", result.stderr)
	}
}

// TestEdgeBudgetFitsSixtyFourMiB checks the promise of --edge: every knob's
// small-device value together fits a 64 MiB ceiling, and the budget is
// printed in a form a program can read.
func TestEdgeBudgetFitsSixtyFourMiB(t *testing.T) {
	result := runCLI(t, "serve", "--json", "--data-dir", t.TempDir(), "--edge", "--ram-ceiling", "64MiB", "--print-budget")
	expectCode(t, result, exitClean)
	var budget budgetOutput
	if err := json.Unmarshal([]byte(result.stdout), &budget); err != nil {
		t.Fatalf("--print-budget --json printed %q: %v", result.stdout, err)
	}
	if !budget.Fits || budget.Total > 64<<20 || budget.Ceiling != 64<<20 {
		t.Fatalf("edge budget %d bytes against ceiling %d (fits %v)", budget.Total, budget.Ceiling, budget.Fits)
	}
	var sum int64
	for _, line := range budget.Lines {
		sum += line.Bytes
	}
	if sum != budget.Total || len(budget.Lines) < 8 {
		t.Fatalf("%d lines summing to %d, total %d", len(budget.Lines), sum, budget.Total)
	}
	t.Logf("edge budget %.1f MiB over %d lines", float64(budget.Total)/(1<<20), len(budget.Lines))

	// A knob the operator sets wins over the edge value.
	larger := runCLI(t, "serve", "--data-dir", t.TempDir(), "--edge", "--max-connections", "4096",
		"--ram-ceiling", "64MiB", "--print-budget")
	expectCode(t, larger, exitUsage)
	if !strings.Contains(larger.stdout, "--max-connections") {
		t.Fatalf("the over-budget listing does not name the knob:\n%s", larger.stdout)
	}
}

func TestMemoryFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"--max-frame", "1KiB"},
		{"--large-frame-pool", "1MiB"},
	} {
		result := runCLI(t, append([]string{"serve", "--data-dir", t.TempDir(), "--print-budget"}, args...)...)
		expectCode(t, result, exitUsage)
		if !strings.Contains(result.stderr, args[0]) {
			t.Errorf("%v: the error does not name the flag:\n%s", args, result.stderr)
		}
	}
}
