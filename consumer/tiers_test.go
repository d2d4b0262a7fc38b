package consumer

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

func TestBroadcastGroup(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(5, nil)
	g := r.open("fan", Options{Type: TypeBroadcast})
	got, _, err := g.Fetch(1, 3, 1<<20, 0)
	if err != nil || len(got) != 3 || got[0].Lease != 0 {
		t.Fatalf("broadcast fetch: %+v %v", got, err)
	}
	if _, _, err := g.Fetch(2, 3, 1<<20, 0); !errors.Is(err, ErrBroadcastBusy) {
		t.Fatalf("second reader: %v", err)
	}
	if err := g.CumulativeAck(4); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("ack past what was read: %v", err)
	}
	if err := g.CumulativeAck(2); err != nil || g.Committed() != 2 {
		t.Fatalf("cumulative ack: %v %d", err, g.Committed())
	}
	if err := g.CumulativeAck(1); err != nil || g.Committed() != 2 {
		t.Fatalf("older cumulative ack must change nothing: %v %d", err, g.Committed())
	}
	if s := g.Ack(0, 0); s != StatusUnknown {
		t.Fatalf("per-record ack on broadcast: %v", s)
	}
	g.Release(1)
	again, _, _ := g.Fetch(2, 10, 1<<20, 0)
	if len(again) != 3 || again[0].Offset != 2 || !again[0].Redelivered || again[2].Redelivered {
		t.Fatalf("the next reader resumes at the cursor: %+v", again)
	}
	g.CumulativeAck(5)
	g.Close()
	if reopened := r.open("fan", Options{Type: TypeBroadcast}); reopened.Committed() != 5 {
		t.Fatalf("cursor after reopen %d", reopened.Committed())
	}
	work := r.open("w", Options{})
	if err := work.CumulativeAck(1); !errors.Is(err, ErrWrongType) {
		t.Fatalf("cumulative ack on a work group: %v", err)
	}
}

func TestStreamingGroup(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(5, nil)
	g := r.open("stream", Options{Type: TypeStreaming, CheckpointEvery: 2})
	if _, _, err := g.Fetch(1, 1, 1, 0); !errors.Is(err, ErrWrongType) {
		t.Fatalf("fetch on streaming: %v", err)
	}
	got, gaps, err := g.Read(g.Committed(), 10, 1<<20, nil)
	if err != nil || len(got) != 5 || len(gaps) != 0 {
		t.Fatalf("read: %d %v %v", len(got), gaps, err)
	}
	if err := g.Commit(6); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("commit past the end: %v", err)
	}
	g.Commit(3)
	g.Commit(2) // older: no change
	g.Commit(4) // the second commit: checkpoint
	reopened, err := Open(r.log, "stream", Options{Type: TypeStreaming})
	if err != nil || reopened.Committed() != 4 {
		t.Fatalf("checkpointed position: %v %d", err, reopened.Committed())
	}
}

// TestEveryTypeReportsOneGap: retention removes records no group reached;
// each type reports the removal once, as one gap with its count.
func TestEveryTypeReportsOneGap(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(3000, nil)
	types := []Type{TypeWork, TypeKeyShared, TypeBroadcast, TypeStreaming}
	for _, typ := range types {
		r.open(typ.String(), Options{Type: typ}).Close() // created at offset 0
	}
	if n, err := r.log.DeleteBefore(r.log.Committed() / 2); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	first := r.log.FirstOffset()
	for _, typ := range types {
		g := r.open(typ.String(), Options{Type: typ})
		var got []Delivery
		var gaps []Gap
		var err error
		if typ == TypeStreaming {
			got, gaps, err = g.Read(g.Committed(), 1, 1<<20, nil)
		} else {
			got, gaps, err = g.Fetch(1, 1, 1<<20, 0)
		}
		if err != nil || len(gaps) != 1 || gaps[0].From != 0 || gaps[0].To != first || gaps[0].Count() != first ||
			len(got) != 1 || got[0].Offset != first {
			t.Fatalf("%s: gaps %+v deliveries %d err %v (first retained %d)", typ, gaps, len(got), err, first)
		}
		if typ == TypeStreaming {
			continue
		}
		_, gaps, _ = g.Fetch(1, 1, 1<<20, 0)
		if len(gaps) != 0 {
			t.Fatalf("%s reported the gap twice: %+v", typ, gaps)
		}
	}
}
