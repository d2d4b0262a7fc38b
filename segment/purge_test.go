package segment

import (
	"context"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// SealActive then DeleteBefore drops every record, including those of
// the active segment; offsets keep rising, across a reopen too.
func TestSealActiveLetsDeleteBeforeDropEverything(t *testing.T) {
	fsys := vfs.NewMemFS()
	d := openDir(t, fsys, testOptions(1))
	l := openLog(t, d)
	var last Ticket
	for i := range 40 {
		last = appendBody(t, l, body(uint64(i), 2000))
	}
	waitTicket(t, last)
	end, err := l.SealActive(context.Background())
	if err != nil || end != 40 {
		t.Fatalf("SealActive: end %d, %v", end, err)
	}
	if _, err := l.DeleteBefore(end); err != nil {
		t.Fatal(err)
	}
	if l.FirstOffset() != 40 || l.Committed() != 40 {
		t.Fatalf("after the purge: first %d, committed %d", l.FirstOffset(), l.Committed())
	}
	if entries, _ := readAll(t, l); len(entries) != 0 {
		t.Fatalf("%d records survived", len(entries))
	}
	// Sealing an empty active segment is a no-op.
	if end, err := l.SealActive(context.Background()); err != nil || end != 40 {
		t.Fatalf("second SealActive: %d %v", end, err)
	}
	waitTicket(t, appendBody(t, l, body(40, 100)))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDir(t, fsys, testOptions(2))
	defer d.Close()
	l = openLog(t, d)
	entries, _ := readAll(t, l)
	if l.FirstOffset() != 40 || len(entries) != 1 || entries[0].Offset != 40 {
		t.Fatalf("after a reopen: first %d, %d entries", l.FirstOffset(), len(entries))
	}
}
