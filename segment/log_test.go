package segment

import (
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	fsys := vfs.NewMemFS()
	opts := testOptions(1)
	d := openDir(t, fsys, opts)
	l := openLog(t, d)
	var last Ticket
	const n = 3000
	for i := uint64(0); i < n; i++ {
		last = appendBody(t, l, body(i, 40+int(i%300)))
		if last.First != i {
			t.Fatalf("record %d got offset %d", i, last.First)
		}
	}
	waitTicket(t, last)
	check := func(l *Log) {
		entries, gaps := readAll(t, l)
		if len(gaps) != 0 || len(entries) != n {
			t.Fatalf("read %d entries, %d gaps; want %d, 0", len(entries), len(gaps), n)
		}
		for i, e := range entries {
			if e.Offset != uint64(i) || payloadIndex(t, e.Body) != uint64(i) {
				t.Fatalf("entry %d: offset %d", i, e.Offset)
			}
		}
	}
	check(l)
	if segs := len(l.segments.Load().segments); segs < 3 {
		t.Fatalf("expected several segments, got %d", segs)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDir(t, fsys, opts)
	l = openLog(t, d)
	if got := l.Committed(); got != n {
		t.Fatalf("committed after reopen %d, want %d", got, n)
	}
	if r := l.Report(); r.Outcome != OutcomeClean {
		t.Fatalf("outcome %s: %+v", r.Outcome, r.Events)
	}
	check(l)
	waitTicket(t, appendBody(t, l, body(n, 10)))
	if got := l.Committed(); got != n+1 {
		t.Fatalf("committed %d", got)
	}
	_ = d.Close()
}
