package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestInspectReadsTheCheckpoint: what an operator sees offline matches
// what the group checkpointed: the cursor, acked-ahead offsets, delivery
// counts and the type.
func TestInspectReadsTheCheckpoint(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(10, nil)
	work := r.open("billing", Options{})
	deliveries, _, err := work.Fetch(1, 10, 1<<20, time.Minute)
	if err != nil || len(deliveries) != 10 {
		t.Fatalf("fetched %d: %v", len(deliveries), err)
	}
	for _, d := range deliveries {
		if d.Offset == 0 || d.Offset == 5 || d.Offset == 6 {
			if status := work.Ack(d.Offset, d.Lease); status != StatusOK {
				t.Fatalf("ack %d: %v", d.Offset, status)
			}
		}
	}
	if status := work.Nack(deliveries[1].Offset, deliveries[1].Lease, 0); status != StatusOK {
		t.Fatalf("nack: %v", status)
	}
	if err := work.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r.open("archive", Options{Type: TypeBroadcast})

	summaries, err := Inspect(r.log)
	if err != nil {
		t.Fatal(err)
	}
	if len(summaries) != 2 || summaries[0].Name != "archive" || summaries[1].Name != "billing" {
		t.Fatalf("groups %+v, want archive and billing", summaries)
	}
	billing := summaries[1]
	if billing.Type != TypeWork || billing.Committed != 1 || billing.AckedAhead != 2 {
		t.Fatalf("billing %+v: want a work group committed to 1 with 2 acked ahead", billing)
	}
	if billing.Unsettled < 7 || billing.MostDeliveries != 1 {
		t.Fatalf("billing %+v: want the 7 delivered, unsettled records counted once each", billing)
	}
	if summaries[0].Type != TypeBroadcast {
		t.Fatalf("archive is %v", summaries[0].Type)
	}
	if _, err := InspectGroup(r.log, "nobody"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("a missing group: %v", err)
	}
}

// TestCheckpointDueIsHandedToTheCaller: with CheckpointDue set, the acks
// that make a checkpoint due call it instead of syncing a file on the
// acking goroutine (the broker's reactor).
func TestCheckpointDueIsHandedToTheCaller(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(4, nil)
	nudges := 0
	g := r.open("fast", Options{CheckpointEvery: 2, CheckpointDue: func() { nudges++ }})
	deliveries, _, err := g.Fetch(1, 4, 1<<20, time.Minute)
	if err != nil || len(deliveries) != 4 {
		t.Fatalf("fetched %d: %v", len(deliveries), err)
	}
	for _, d := range deliveries {
		g.Ack(d.Offset, d.Lease)
	}
	if nudges == 0 {
		t.Fatal("CheckpointDue was never called")
	}
	if summary, err := InspectGroup(r.log, "fast"); err != nil || summary.Committed != 0 {
		t.Fatalf("the ack path wrote a checkpoint itself: %+v %v", summary, err)
	}
	if err := g.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if summary, _ := InspectGroup(r.log, "fast"); summary.Committed != 4 {
		t.Fatalf("after Checkpoint the cursor reads %d, want 4", summary.Committed)
	}
}
