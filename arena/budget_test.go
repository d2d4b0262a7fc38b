package arena_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/ironbus/ironbus/arena"
)

func TestBudgetLinesAndTotal(t *testing.T) {
	budget := arena.NewBudget()
	if budget.Total() != 0 || len(budget.Lines()) != 0 {
		t.Fatalf("new budget: total %d, lines %v; want empty", budget.Total(), budget.Lines())
	}
	budget.Register("connection read buffers", "--max-connections × 64 KiB", 64<<20)
	budget.Register("append buffers", "--append-buffers × 1 MiB", 16<<20)
	if got, want := budget.Total(), int64(80<<20); got != want {
		t.Errorf("Total = %d, want %d", got, want)
	}
	want := []arena.Line{
		{Name: "connection read buffers", Knob: "--max-connections × 64 KiB", Bytes: 64 << 20},
		{Name: "append buffers", Knob: "--append-buffers × 1 MiB", Bytes: 16 << 20},
	}
	lines := budget.Lines()
	if len(lines) != len(want) {
		t.Fatalf("Lines = %v, want %v", lines, want)
	}
	for index := range want {
		if lines[index] != want[index] {
			t.Errorf("line %d = %+v, want %+v", index, lines[index], want[index])
		}
	}
	lines[0].Bytes = 1 // a copy: must not change the budget
	if budget.Total() != 80<<20 {
		t.Errorf("changing the slice returned by Lines changed the budget")
	}
}

func TestBudgetCheck(t *testing.T) {
	budget := arena.NewBudget()
	budget.Register("connection read buffers", "--max-connections × 64 KiB", 64<<20)
	budget.Register("append buffers", "--append-buffers × 1 MiB", 16<<20)
	budget.Register("large frames", "", 1536<<20)
	total := budget.Total()
	for _, ceiling := range []int64{0, total, total + 1, math.MaxInt64} {
		if err := budget.Check(ceiling); err != nil {
			t.Errorf("Check(%d) with total %d = %v, want nil", ceiling, total, err)
		}
	}
	err := budget.Check(64 << 20)
	if !errors.Is(err, arena.ErrOverCeiling) {
		t.Fatalf("Check(64 MiB) = %v, want ErrOverCeiling", err)
	}
	message := err.Error()
	for _, want := range []string{
		"ceiling",
		"64 MiB",
		"  connection read buffers: 64 MiB (--max-connections × 64 KiB)\n",
		"  append buffers: 16 MiB (--append-buffers × 1 MiB)\n",
		"  large frames: 1.5 GiB\n", // no knob, no parentheses
		"total: 1.58 GiB",
		"lower one of these knobs, or raise --ram-ceiling",
	} {
		if !strings.Contains(message, want) {
			t.Errorf("message lacks %q:\n%s", want, message)
		}
	}
	if strings.Count(message, "\n") < 4 {
		t.Errorf("message is not multi-line:\n%s", message)
	}
	if err := budget.Check(-1); !errors.Is(err, arena.ErrInvalidArgument) {
		t.Errorf("Check(-1) = %v, want ErrInvalidArgument", err)
	}
}

// One byte over must be visible even though both round to "64 MiB".
func TestBudgetCheckShowsExactBytesWhenRounded(t *testing.T) {
	budget := arena.NewBudget()
	budget.Register("read buffers", "--max-connections × 64 KiB", 64<<20+1)
	err := budget.Check(64 << 20)
	if !errors.Is(err, arena.ErrOverCeiling) {
		t.Fatalf("Check = %v, want ErrOverCeiling", err)
	}
	for _, want := range []string{"(67108865 bytes)", "is 64 MiB\n", "over the ceiling by 1 B"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
}

func TestBudgetTotalSaturates(t *testing.T) {
	budget := arena.NewBudget()
	budget.Register("huge", "", math.MaxInt64)
	budget.Register("one more", "", 1)
	if budget.Total() != math.MaxInt64 {
		t.Errorf("Total = %d, want saturation at MaxInt64", budget.Total())
	}
	if err := budget.Check(1 << 30); !errors.Is(err, arena.ErrOverCeiling) {
		t.Errorf("Check = %v, want ErrOverCeiling", err)
	}
}

func TestBudgetRegisterNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Register with negative bytes did not panic")
		}
	}()
	arena.NewBudget().Register("bad", "", -1)
}

func TestBudgetConcurrentRegister(t *testing.T) {
	budget := arena.NewBudget()
	var group sync.WaitGroup
	for range 8 {
		group.Go(func() {
			for range 100 {
				budget.Register("pool", "knob", 10)
				_ = budget.Total()
				_ = budget.Check(1 << 20)
			}
		})
	}
	group.Wait()
	if budget.Total() != 8*100*10 || len(budget.Lines()) != 800 {
		t.Errorf("after concurrent registers: total %d, %d lines", budget.Total(), len(budget.Lines()))
	}
}

func TestFormatBytes(t *testing.T) {
	cases := []struct {
		bytes int64
		want  string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{64 << 10, "64 KiB"},
		{1<<20 - 1, "1 MiB"}, // 1023.999 KiB rounds up a unit
		{1 << 20, "1 MiB"},
		{1234567, "1.18 MiB"},
		{64 << 20, "64 MiB"},
		{3 << 29, "1.5 GiB"},
		{1 << 40, "1 TiB"},
		{1 << 50, "1 PiB"},
		{1 << 60, "1 EiB"},
		{math.MaxInt64, "8 EiB"},
		{-512, "-512 B"},
		{-64 << 20, "-64 MiB"},
		{math.MinInt64, "-8 EiB"},
	}
	for _, test := range cases {
		if got := arena.FormatBytes(test.bytes); got != test.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", test.bytes, got, test.want)
		}
	}
}
