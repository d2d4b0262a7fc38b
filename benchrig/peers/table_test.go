package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	if _, ok := summarize(nil); ok {
		t.Fatal("an empty series summarized")
	}
	odd, _ := summarize([]float64{3, 1, 2})
	if odd != (summary{Median: 2, Min: 1, Max: 3, Runs: 3}) {
		t.Fatalf("odd: %+v", odd)
	}
	even, _ := summarize([]float64{4, 1, 3, 2})
	if even != (summary{Median: 2.5, Min: 1, Max: 4, Runs: 4}) {
		t.Fatalf("even: %+v", even)
	}
}

func TestBuildRefusesMixedDurability(t *testing.T) {
	measured := samples{}
	ironbus, unsynced := metric{labelIronBus, "P1", 256}, metric{labelJetStreamDefault, "P1", 256}
	measured.add(ironbus, 10)
	measured.add(unsynced, 5)
	cases := []struct {
		name    string
		spec    rowSpec
		refused bool
	}{
		{"not declared", rowSpec{id: "P1", title: "P1: IronBus fsynced vs JetStream unsynced", ironbus: ironbus, peer: unsynced}, true},
		{"declared, title silent", rowSpec{id: "P1", title: "P1", crossDurability: true, ironbus: ironbus, peer: unsynced}, true},
		{"declared and named", rowSpec{id: "P1", title: "P1: IronBus fsynced vs JetStream unsynced", crossDurability: true,
			ironbus: ironbus, peer: unsynced}, false},
	}
	for _, c := range cases {
		rows, err := build([]rowSpec{c.spec}, measured)
		if c.refused {
			if !errors.Is(err, errMixedDurability) {
				t.Errorf("%s: err %v, want errMixedDurability", c.name, err)
			}
			continue
		}
		if err != nil || len(rows) != 1 || rows[0].Ratio != 2 {
			t.Errorf("%s: rows %+v, err %v; want one row with ratio 2", c.name, rows, err)
		}
	}
}

func TestBuildTargets(t *testing.T) {
	measured := samples{}
	measured.add(metric{labelIronBus, "L1-p99", 256}, 120)
	measured.add(metric{labelRawDisk, "L1-p99", 256}, 100)
	measured.add(metric{labelIronBus, "P1", 256}, 30)
	measured.add(metric{labelJetStreamAlways, "P1", 256}, 10)
	specs := []rowSpec{
		{id: "L1-p99", lowerIsBetter: true, target: 1.2,
			ironbus: metric{labelIronBus, "L1-p99", 256}, peer: metric{labelRawDisk, "L1-p99", 256}},
		{id: "P1", target: 2, ironbus: metric{labelIronBus, "P1", 256}, peer: metric{labelJetStreamAlways, "P1", 256}},
		// A side that was not measured leaves the row out.
		{id: "P2a", target: 5, ironbus: metric{labelIronBus, "P2a", 256}, peer: metric{labelJetStreamAlways, "P2a", 256}},
	}
	rows, err := build(specs, measured)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v, err %v; want 2 rows", rows, err)
	}
	if rows[0].Target != "≤ 1.2×" || rows[0].Meets == nil || !*rows[0].Meets {
		t.Errorf("a latency 1.2× the peer's must meet ≤ 1.2×: %+v", rows[0])
	}
	if rows[1].Target != "≥ 2×" || rows[1].Meets == nil || !*rows[1].Meets || verdict(rows[1]) != "≥ 2× ok" {
		t.Errorf("3× must meet ≥ 2×: %+v", rows[1])
	}
	measured[metric{labelIronBus, "P1", 256}] = []float64{19}
	rows, _ = build(specs, measured)
	if *rows[1].Meets || verdict(rows[1]) != "≥ 2× MISS" {
		t.Errorf("1.9× must miss ≥ 2×: %+v", rows[1])
	}
}

// TestDeclaredTableBuilds measures every metric the declared table names
// and builds it: no declared row divides different durability labels
// without saying so, and every side's label is a known one.
func TestDeclaredTableBuilds(t *testing.T) {
	cfg := &config{sizes: []int{256, 1024}, consumeMessages: 1000, consumers: 2}
	specs := rowSpecs(cfg)
	measured := samples{}
	for _, spec := range specs {
		for _, side := range []metric{spec.ironbus, spec.peer} {
			if _, known := durabilityClass[side.side]; !known {
				t.Errorf("row %s: unknown label %q", spec.id, side.side)
			}
			measured.add(side, 1)
		}
		if spec.crossDurability && !strings.Contains(spec.title, " vs ") {
			t.Errorf("row %s crosses durability and its title does not say so: %q", spec.id, spec.title)
		}
	}
	rows, err := build(specs, measured)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(specs) {
		t.Fatalf("%d rows built from %d declared", len(rows), len(specs))
	}
}

func TestFormatting(t *testing.T) {
	for value, want := range map[float64]string{1234567: "1,234,567 msg/s", 999.6: "1,000 msg/s", 12.34: "12.3 msg/s"} {
		if got := formatValue(value, "msg/s"); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", value, got, want)
		}
	}
	if got := percentile([]time.Duration{3 * time.Microsecond, time.Microsecond, 2 * time.Microsecond}, 0.5); got != 2 {
		t.Errorf("median of 1, 2, 3 µs = %v", got)
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}
