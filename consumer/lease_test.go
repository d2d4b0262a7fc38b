package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

func TestExtendUpToTheHardCap(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(1, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("w", Options{Visibility: 30 * time.Second, MaxLease: time.Minute, Now: clock.Now})
	got, _, _ := g.Fetch(1, 1, 1<<20, 0)
	d := got[0]
	clock.advance(20 * time.Second)
	if s := g.Extend(d.Offset, d.Lease, 0); s != StatusOK {
		t.Fatalf("extend: %v", s)
	}
	clock.advance(25 * time.Second) // past the first deadline, inside the extension
	if s := g.Extend(d.Offset, d.Lease, 0); s != StatusCapped {
		t.Fatalf("extend near the cap: %v", s)
	}
	if due, ok := g.NextDue(); !ok || !due.Equal(time.Unix(60, 0)) {
		t.Fatalf("NextDue should report the capped lease expiry: %v %v", due, ok)
	}
	clock.advance(15 * time.Second) // at the cap
	if s := g.Ack(d.Offset, d.Lease); s != StatusExpired {
		t.Fatalf("ack after the cap: %v", s)
	}
	if s := g.Ack(d.Offset, d.Lease); s != StatusExpired {
		t.Fatalf("ack again after expiry: %v", s)
	}
	again, _, _ := g.Fetch(2, 1, 1<<20, 0)
	if len(again) != 1 || again[0].Attempt != 2 || !again[0].Redelivered {
		t.Fatalf("redelivery after expiry: %+v", again)
	}
	if s := g.Ack(d.Offset, d.Lease); s != StatusStale {
		t.Fatalf("old holder after redelivery: %v", s)
	}
	if s := g.Ack(again[0].Offset, again[0].Lease); s != StatusOK {
		t.Fatalf("new holder: %v", s)
	}
}

func TestNackBackoffAndCredits(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(4, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("w", Options{MaxInFlight: 2, Now: clock.Now})
	first, _, _ := g.Fetch(1, 10, 1<<20, 0)
	if len(first) != 2 {
		t.Fatalf("credit of 2 gave %d", len(first))
	}
	if more, _, _ := g.Fetch(1, 10, 1<<20, 0); len(more) != 0 {
		t.Fatalf("no credit left, got %d", len(more))
	}
	g.Nack(first[0].Offset, first[0].Lease, -1) // backoff[0] = 100 ms; the credit returns now
	next, _, _ := g.Fetch(1, 10, 1<<20, 0)
	if len(next) != 1 || next[0].Offset != 2 {
		t.Fatalf("after nack: %+v", next)
	}
	if due, ok := g.NextDue(); !ok || !due.Equal(time.Unix(30, 0)) {
		t.Fatalf("without credit only a lease expiry can free one: NextDue %v %v", due, ok)
	}
	g.Ack(next[0].Offset, next[0].Lease)
	if due, ok := g.NextDue(); !ok || !due.Equal(time.Unix(0, int64(100*time.Millisecond))) {
		t.Fatalf("NextDue %v %v", due, ok)
	}
	clock.advance(100 * time.Millisecond)
	back, _, _ := g.Fetch(1, 10, 1<<20, 0)
	if len(back) != 1 || back[0].Offset != 0 || back[0].Attempt != 2 {
		t.Fatalf("redelivery first: %+v", back)
	}
}

func TestFetchFloorOfOne(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(3, nil)
	g := r.open("w", Options{})
	got, _, err := g.Fetch(1, 10, 1, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("a 1-byte limit still delivers one record: %d %v", len(got), err)
	}
	if got, _, _ := g.Fetch(1, 0, 1<<20, 0); len(got) != 1 {
		t.Fatalf("max 0 still delivers one: %d", len(got))
	}
}

func TestAckRangeAndTerm(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(10, nil)
	g := r.open("w", Options{})
	a, _, _ := g.Fetch(1, 5, 1<<20, 0)
	b, _, _ := g.Fetch(2, 5, 1<<20, 0)
	if n := g.AckRange(1, 0, 100); n != len(a) {
		t.Fatalf("AckRange acked %d of %d", n, len(a))
	}
	if n := g.AckRange(1, 0, 100); n != 0 {
		t.Fatalf("second AckRange acked %d", n)
	}
	if s := g.Term(b[0].Offset, b[0].Lease); s != StatusOK {
		t.Fatalf("term: %v", s)
	}
	if n := g.AckRange(2, b[1].Offset, b[3].Offset); n != 2 {
		t.Fatalf("partial range acked %d", n)
	}
	if got := g.Committed(); got != 8 {
		t.Fatalf("cursor %d", got)
	}
}

func TestTypeIsFixedAtCreation(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	g := r.open("fanout", Options{Type: TypeBroadcast})
	g.Close()
	_, err := Open(r.log, "fanout", Options{})
	if !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("reopen as work: %v", err)
	}
	for _, want := range []string{"broadcast", "work"} {
		if !contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
	if _, err := Open(r.log, "fanout", Options{Type: TypeBroadcast}); err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestStartPositions(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(10, nil) // stamped a second apart by the tick clock
	third, err := readOne(r.log, 3)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		start StartPosition
		want  uint64
	}{
		{StartPosition{}, 0},
		{StartPosition{Kind: StartLatest}, 10},
		{StartPosition{Kind: StartOffset, Offset: 4}, 4},
		{StartPosition{Kind: StartOffset, Offset: 400}, 10},
		{StartPosition{Kind: StartTime, Time: third.Timestamp - 1}, 3},
		{StartPosition{Kind: StartTime, Time: time.Unix(9999, 0).UnixNano()}, 10},
	}
	for i, c := range cases {
		g := r.open("start-"+string(rune('a'+i)), Options{Start: c.start})
		if got := g.Committed(); got != c.want {
			t.Errorf("start %+v: cursor %d, want %d", c.start, got, c.want)
		}
		g.Close()
		reopened := r.open("start-"+string(rune('a'+i)), Options{})
		if got := reopened.Committed(); got != c.want {
			t.Errorf("start %+v after reopen: cursor %d, want %d", c.start, got, c.want)
		}
	}
}
