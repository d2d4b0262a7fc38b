package consumer

import (
	"maps"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

// TestFirstDeliverySurvivesRestart: a record delivered once and never
// settled comes back after a restart as attempt 2, not 1 again.
func TestFirstDeliverySurvivesRestart(t *testing.T) {
	mem := vfs.NewMemFS()
	r := mustRig(t, mem)
	r.appendRecords(3, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("w", Options{Now: clock.Now})
	if got, _, _ := g.Fetch(1, 10, 1<<20, 0); len(got) != 3 || got[0].Attempt != 1 {
		t.Fatalf("first fetch: %+v", got)
	}
	if err := g.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r2 := mustRig(t, mem.CrashClone(vfs.CrashOptions{}))
	after, _, _ := r2.open("w", Options{Now: clock.Now}).Fetch(1, 10, 1<<20, 0)
	if len(after) != 3 {
		t.Fatalf("after restart: %+v", after)
	}
	for _, d := range after {
		if d.Attempt != 2 || !d.Redelivered {
			t.Fatalf("offset %d came back as attempt %d (redelivered %v), want 2", d.Offset, d.Attempt, d.Redelivered)
		}
	}
}

// TestDeliveryCountsSurviveACrashAtEveryWrite cuts the power at every
// mutating file operation of a run that delivers records again and again
// (nack, fetch) and checkpoints after each round, then recovers the image
// with none and half of the unsynced writes kept. The guarantee: a
// record's recovered count is never lower than its deliveries as of the
// last checkpoint that returned, and never higher than its deliveries.
func TestDeliveryCountsSurviveACrashAtEveryWrite(t *testing.T) {
	base := vfs.NewMemFS()
	setup := mustRig(t, base)
	setup.appendRecords(3, nil)
	setup.dir.Close()
	for k := int64(0); ; k++ {
		run := crashDeliveries(t, base.CrashClone(vfs.CrashOptions{}), k)
		if run.image == nil {
			if k < 5 {
				t.Fatalf("the workload made only %d writes", k)
			}
			return
		}
		for _, keep := range []float64{0, 0.5} {
			checkRecoveredCounts(t, run.image.CrashClone(vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: keep}), run, k)
		}
	}
}

// deliveryRun is what a crashed run delivered and made durable.
type deliveryRun struct {
	image     *vfs.MemFS        // the disk at the cut; nil when the run made fewer than k+1 writes
	delivered map[uint64]uint32 // deliveries of each offset before the cut
	durable   map[uint64]uint32 // deliveries as of the last checkpoint that returned
}

func crashDeliveries(t *testing.T, mem *vfs.MemFS, k int64) (run deliveryRun) {
	cut := crashtest.CutAtWrite(mem, k)
	run = deliveryRun{delivered: map[uint64]uint32{}, durable: map[uint64]uint32{}}
	defer func() { run.image = cut.Image() }() // after the close below: a cut may come there too
	r, err := openRig(t, cut.FS())
	if err != nil {
		return run
	}
	defer r.dir.Close()
	clock := &manualClock{now: time.Unix(0, 0)}
	g, err := Open(r.log, "w", Options{Now: clock.Now, CheckpointEvery: 1 << 20})
	if err != nil {
		return run
	}
	for round := 0; round < 4 && !cut.Cut(); round++ {
		got, _, _ := g.Fetch(1, 10, 1<<20, 0)
		for _, d := range got {
			run.delivered[d.Offset] = d.Attempt
			g.Nack(d.Offset, d.Lease, 0)
		}
		if err := g.Checkpoint(); err == nil {
			run.durable = maps.Clone(run.delivered)
		}
	}
	return run
}

func checkRecoveredCounts(t *testing.T, image *vfs.MemFS, run deliveryRun, k int64) {
	t.Helper()
	r, err := openRig(t, image)
	if err != nil {
		t.Fatalf("crash at write %d: recovery: %v", k, err)
	}
	defer r.dir.Close()
	g, err := Open(r.log, "w", Options{})
	if err != nil {
		t.Fatalf("crash at write %d: the group does not open: %v", k, err)
	}
	got, _, _ := g.Fetch(1, 10, 1<<20, 0)
	if len(got) != 3 {
		t.Fatalf("crash at write %d: %d records after recovery, want 3", k, len(got))
	}
	for _, d := range got {
		recovered := d.Attempt - 1
		if recovered < run.durable[d.Offset] || recovered > run.delivered[d.Offset] {
			t.Fatalf("crash at write %d: offset %d recovered %d deliveries; %d were checkpointed, %d made",
				k, d.Offset, recovered, run.durable[d.Offset], run.delivered[d.Offset])
		}
	}
}
