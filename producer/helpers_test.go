package producer

import (
	"testing"
	"time"
)

// fakeGenerations is a registry stand-in: Init gives the next id or
// raises a known one's generation.
type fakeGenerations struct {
	last uint64
	ids  map[uint64]uint64 // id -> generation of its latest Init
}

func newFakeGenerations() *fakeGenerations { return &fakeGenerations{ids: map[uint64]uint64{}} }

func (f *fakeGenerations) Generation() uint64 { return f.last }

func (f *fakeGenerations) InitGeneration(id uint64) (uint64, bool) {
	g, ok := f.ids[id]
	return g, ok
}

// init registers (or re-registers) id.
func (f *fakeGenerations) init(id uint64) {
	f.last++
	f.ids[id] = f.last
}

// manualClock is a broker clock moved by hand.
type manualClock struct{ now time.Duration }

func (c *manualClock) read() time.Duration { return c.now }

func mustCheck(t *testing.T, table *Table, id, seq uint64) Verdict {
	t.Helper()
	v, err := table.Check(id, seq)
	if err != nil {
		t.Fatalf("Check(%d, %d): %v", id, seq, err)
	}
	return v
}
