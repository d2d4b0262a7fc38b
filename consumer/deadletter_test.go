package consumer

import (
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestRestartKeepsCountsAndAckedAheadRanges(t *testing.T) {
	mem := vfs.NewMemFS()
	r := mustRig(t, mem)
	r.appendRecords(10, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("w", Options{Now: clock.Now})
	got, _, _ := g.Fetch(1, 10, 1<<20, 0)
	for _, d := range got[5:] {
		g.Ack(d.Offset, d.Lease)
	}
	g.Ack(got[3].Offset, got[3].Lease)
	g.Nack(got[2].Offset, got[2].Lease, 0)
	again, _, _ := g.Fetch(1, 1, 1<<20, 0) // record 2, attempt 2
	if again[0].Offset != 2 || again[0].Attempt != 2 {
		t.Fatalf("redelivery: %+v", again)
	}
	if err := g.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if s := g.Stats(); s.AckedAheadRanges != 2 {
		t.Fatalf("ranges %d, want 2 ([3,4) and [5,10))", s.AckedAheadRanges)
	}

	image := mem.CrashClone(vfs.CrashOptions{})
	r2 := mustRig(t, image)
	g2 := r2.open("w", Options{Now: clock.Now})
	after, _, _ := g2.Fetch(1, 100, 1<<20, 0)
	want := map[uint64]uint32{0: 2, 1: 2, 2: 3, 4: 2}
	if len(after) != len(want) {
		t.Fatalf("after restart got %d records, want offsets 0,1,2,4: %+v", len(after), after)
	}
	for _, d := range after {
		if want[d.Offset] != d.Attempt || !d.Redelivered {
			t.Fatalf("offset %d attempt %d redelivered %v, want attempt %d", d.Offset, d.Attempt, d.Redelivered, want[d.Offset])
		}
		g2.Ack(d.Offset, d.Lease)
	}
	if c := g2.Committed(); c != 10 {
		t.Fatalf("cursor %d", c)
	}
}

func TestMaxDeliverMovesToDeadLetters(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(3, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("w", Options{MaxDeliver: 3, DeadLetters: r.queue, Now: clock.Now})
	attempts := 0
	for i := 0; i < 10; i++ {
		got, _, err := g.Fetch(1, 10, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			if d.Offset != 1 {
				g.Ack(d.Offset, d.Lease)
				continue
			}
			attempts++
			if int(d.Attempt) != attempts || d.Attempt > 3 {
				t.Fatalf("attempt %d, delivery %d", d.Attempt, attempts)
			}
			g.Nack(d.Offset, d.Lease, 0)
		}
	}
	letters := r.deadLetters()
	if len(letters) != 1 || letters[0].Offset != 1 || letters[0].Attempts != 3 || letters[0].Reason != ReasonMaxDeliver ||
		letters[0].Group != "w" || letters[0].Stream != "orders" {
		t.Fatalf("dead letters: %+v", letters)
	}
	if c := g.Committed(); c != 3 {
		t.Fatalf("cursor %d after the move", c)
	}
	if s := g.Stats(); s.DeadLettered != 1 || s.Unsettled != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTooLargeAndRejectGoToDeadLetters(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(3, nil)
	g := r.open("w", Options{MaxRecordBytes: 5, DeadLetters: r.queue})
	got, _, _ := g.Fetch(1, 10, 1<<20, 0)
	if len(got) != 0 || len(r.deadLetters()) != 3 || r.deadLetters()[0].Reason != ReasonTooLarge {
		t.Fatalf("too-large records: delivered %d, dead letters %+v", len(got), r.deadLetters())
	}
	r.appendRecords(1, nil)
	plain := r.open("plain", Options{DeadLetters: r.queue})
	d, _, _ := plain.Fetch(1, 1, 1<<20, 0)
	if s, err := plain.Reject(d[0].Offset, d[0].Lease, "cannot parse"); s != StatusOK || err != nil {
		t.Fatalf("reject: %v %v", s, err)
	}
	if letters := r.deadLetters(); letters[len(letters)-1].Reason != "cannot parse" || letters[len(letters)-1].Group != "plain" {
		t.Fatalf("rejected letter %+v", letters[len(letters)-1])
	}
	noQueue := r.open("noqueue", Options{})
	d, _, _ = noQueue.Fetch(1, 1, 1<<20, 0)
	if _, err := noQueue.Reject(d[0].Offset, d[0].Lease, ""); err == nil {
		t.Fatal("reject without a queue succeeded")
	}
}

// TestDeadLetterMoveSurvivesACrashAtEveryWrite cuts the power at every
// mutating file operation of a run that dead-letters a poison record,
// recovers the image, finishes the work, and checks that every record
// was acked or dead-lettered, and the poison one dead-lettered exactly
// once.
func TestDeadLetterMoveSurvivesACrashAtEveryWrite(t *testing.T) {
	base := vfs.NewMemFS()
	setup := mustRig(t, base)
	setup.appendRecords(4, nil)
	setup.dir.Close()
	const poison = 2
	for k := int64(0); ; k++ {
		crashed, image := runUntilCrash(t, base.CrashClone(vfs.CrashOptions{}), k, poison)
		if !crashed {
			if k < 10 {
				t.Fatalf("the workload made only %d writes", k)
			}
			return
		}
		for _, keep := range []float64{0, 0.5} {
			clone := image.CrashClone(vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: keep})
			finishAfterCrash(t, clone, poison, k)
		}
	}
}

// runUntilCrash runs the poison workload on fsys and cuts the power at
// the k-th mutation; it returns the image taken at the cut.
func runUntilCrash(t *testing.T, mem *vfs.MemFS, k int64, poison uint64) (bool, *vfs.MemFS) {
	cut := crashtest.CutAtWrite(mem, k)
	if r, err := openRig(t, cut.FS()); err == nil {
		work(r, poison, 3)
		r.dir.Close()
	}
	return cut.Cut(), cut.Image()
}

// work consumes until every record is settled: the poison record is
// nacked until it moves; the rest are acked. It gives up after rounds
// fetches (a dead filesystem stops it).
func work(r *rig, poison uint64, rounds int) *Group {
	clock := &manualClock{now: time.Unix(0, 0)}
	g, err := Open(r.log, "w", Options{MaxDeliver: 2, CheckpointEvery: 1, DeadLetters: r.queue, Now: clock.Now})
	if err != nil {
		return nil
	}
	for i := 0; i < rounds; i++ {
		got, _, _ := g.Fetch(1, 10, 1<<20, 0)
		for _, d := range got {
			if d.Offset == poison {
				g.Nack(d.Offset, d.Lease, 0)
			} else {
				g.Ack(d.Offset, d.Lease)
			}
		}
	}
	_ = g.Close()
	return g
}

func finishAfterCrash(t *testing.T, image *vfs.MemFS, poison uint64, k int64) {
	t.Helper()
	r, err := openRig(t, image)
	if err != nil {
		t.Fatalf("crash at write %d: recovery: %v", k, err)
	}
	defer r.dir.Close()
	g := work(r, poison, 6)
	if g == nil {
		t.Fatalf("crash at write %d: the group does not open", k)
	}
	if c := g.Committed(); c != 4 {
		t.Fatalf("crash at write %d: cursor %d after finishing, want 4 (%+v)", k, c, g.Stats())
	}
	count := 0
	for _, letter := range r.deadLetters() {
		if letter.Offset != poison {
			t.Fatalf("crash at write %d: offset %d dead-lettered", k, letter.Offset)
		}
		count++
	}
	if count != 1 {
		t.Fatalf("crash at write %d: %d dead letters for offset %d, want exactly 1", k, count, poison)
	}
}
