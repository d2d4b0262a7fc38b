package keyindex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestPropertyAgainstOracle drives random Puts, durability advances,
// flushes, lookups, clean reopens and crashes (unsynced writes kept at
// random, reordered, one torn) on small tables and overlays, and checks
// every answer against a map computed from the log: Last is the oracle's
// answer or ErrFull, never a wrong offset or a wrong "none".
func TestPropertyAgainstOracle(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runProperty(t, seed) })
	}
}

func runProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	opts := Options{Seed: seed + 1, Capacity: 10 + rng.IntN(200), Overlay: 2 + rng.IntN(30),
		DroppedBits: 64 * (1 + rng.IntN(4)), CoverStep: uint64(1 + rng.IntN(20))}
	opts.MaxCapacity = opts.Capacity * (1 + rng.IntN(8))
	subjects := 1 + rng.IntN(400)
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	index := openReplayed(t, mem, l, opts)
	for step := range 1500 {
		switch r := rng.IntN(100); {
		case r < 60:
			subject := ""
			if rng.IntN(10) > 0 {
				subject = fmt.Sprint("s", rng.IntN(subjects))
			}
			l.putAll(index, subject)
		case r < 72:
			l.durable += uint64(rng.IntN(int(l.head()-l.durable) + 1))
			index.Durable(l.durable)
		case r < 82:
			if err := index.Flush(); err != nil {
				t.Fatalf("step %d: flush: %v", step, err)
			}
		case r < 96:
			subject := fmt.Sprint("s", rng.IntN(subjects))
			checkOne(t, index, l, subject)
		case r < 98:
			l.durable = l.head()
			index.Durable(l.durable)
			if err := index.Close(); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			index = openReplayed(t, mem, l, opts)
		default:
			mem = mem.CrashClone(vfs.CrashOptions{Seed: rng.Uint64(), KeepUnsynced: rng.Float64(), Reorder: true, Tear: true})
			l.crash()
			index = openReplayed(t, mem, l, opts)
		}
	}
	checkAgainst(t, index, l, l.head(), true)
	l.durable = l.head()
	index.Durable(l.durable)
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	// Caught up and flushed: only a full table may still say ErrFull.
	if full := checkAgainst(t, index, l, l.head(), true); full > 0 && !index.isFull() {
		t.Fatalf("%d subjects answer ErrFull after a complete flush of a table that is not full", full)
	}
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkOne(t *testing.T, index *Index, l *fakeLog, subject string) {
	t.Helper()
	want, exists := l.oracle(l.head())[subject]
	got, found, err := index.Last([]byte(subject))
	switch {
	case errors.Is(err, ErrFull):
	case err != nil:
		t.Fatalf("Last(%q): %v", subject, err)
	case found != exists || found && got != want:
		t.Fatalf("Last(%q) = %d, %v; the log says %d, %v", subject, got, found, want, exists)
	}
}

func (i *Index) isFull() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.mu.full
}
