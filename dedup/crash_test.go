package dedup

import (
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

// TestCrashAtEveryWriteOfASeal cuts power at each write the window makes
// (generation files, their renames, the directory syncs, deletions) while
// ids are published, some of their records never durable. After each cut
// the window reopens on the crash image and replays the log from
// CoversUpTo, as the broker does; then every durable id must be found at
// its own offset (the oracle), and no id past the durable end may be.
func TestCrashAtEveryWriteOfASeal(t *testing.T) {
	const published, durable = 120, 100
	for k := int64(0); ; k++ {
		mem := vfs.NewMemFS()
		cut := crashtest.CutAtWrite(mem, k)
		clock := &fakeClock{}
		clock.now.Store(int64(time.Hour))
		opts := Options{Window: time.Minute, MaxIDs: 80, GenerationIDs: 16, Now: clock.Now, Durable: durableUpTo(durable)}
		w, err := Open(cut.FS(), "log/dedup", opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range published {
			w.Insert(idOf(i), uint64(i))
			clock.advance(time.Millisecond)
		}
		_ = w.Close()
		if !cut.Cut() {
			if k == 0 {
				t.Fatal("the workload made no write")
			}
			t.Logf("swept %d writes", k)
			return
		}
		w, err = Open(cut.Image(), "log/dedup", opts)
		if err != nil {
			t.Fatalf("cut at write %d: reopening: %v", k, err)
		}
		for i := w.CoversUpTo(); i < durable; i++ {
			w.Replay(idOf(int(i)), i)
		}
		remembered := 0
		for i := range published {
			offset, ok := w.Lookup(idOf(i))
			switch {
			case ok && offset != uint64(i):
				t.Fatalf("cut at write %d: id %d maps to offset %d", k, i, offset)
			case ok && i >= durable:
				t.Fatalf("cut at write %d: id %d of a record that never became durable is remembered", k, i)
			case ok:
				remembered++
			}
		}
		// The newest durable ids are always there: the count cap forgets
		// only the oldest, and never more than MaxIDs remain.
		for i := durable - 40; i < durable; i++ {
			expectFound(t, w, idOf(i), uint64(i))
		}
		if remembered > opts.MaxIDs+opts.GenerationIDs {
			t.Fatalf("cut at write %d: %d ids remembered with a cap of %d", k, remembered, opts.MaxIDs)
		}
		_ = w.Close()
	}
}
