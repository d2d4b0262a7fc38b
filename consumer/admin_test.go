package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

func TestResetAndDeleteRefuseMembersAndPersist(t *testing.T) {
	mem := vfs.NewMemFS()
	r := mustRig(t, mem)
	r.appendRecords(10, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("w", Options{Now: clock.Now})
	got, _, _ := g.Fetch(1, 4, 1<<20, 0)
	for _, d := range got {
		g.Ack(d.Offset, d.Lease)
	}
	if err := g.Reset(StartPosition{Kind: StartEarliest}); !errors.Is(err, ErrGroupActive) {
		t.Fatalf("reset with a member: %v", err)
	}
	if err := g.Delete(); !errors.Is(err, ErrGroupActive) {
		t.Fatalf("delete with a member: %v", err)
	}
	g.Release(1)
	if err := g.Reset(StartPosition{Kind: StartOffset, Offset: 7}); err != nil {
		t.Fatal(err)
	}
	if s := g.Summary(); s.Committed != 7 || s.Unsettled != 0 || s.Members != 0 {
		t.Fatalf("after reset: %+v", s)
	}
	if s, err := InspectGroup(r.log, "w"); err != nil || s.Committed != 7 {
		t.Fatalf("the reset is not in the checkpoint: %+v %v", s, err)
	}
	again, _, _ := g.Fetch(2, 10, 1<<20, 0)
	if len(again) != 3 || again[0].Offset != 7 {
		t.Fatalf("after reset fetched %+v", again)
	}
	g.Release(2)
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := InspectGroup(r.log, "w"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("after delete: %v", err)
	}
	if err := DeleteGroup(r.log, "w"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("deleting a deleted group: %v", err)
	}
	fresh := r.open("w", Options{Type: TypeBroadcast, Now: clock.Now})
	if fresh.Committed() != 0 || fresh.Type() != TypeBroadcast {
		t.Fatalf("a deleted group did not start over: %+v", fresh.Stats())
	}
}
