package segment

import (
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestSegmentsSnapshotAndSealHook: Segments lists contiguous segments,
// all sealed but the active one, with their stamps; OnSeal runs once per
// seal; DeleteBefore at a segment's end drops exactly the segments before.
func TestSegmentsSnapshotAndSealHook(t *testing.T) {
	opts := testOptions(1)
	opts.SegmentSize = MinSegmentSize
	var seals atomic.Int32
	opts.OnSeal = func(LogID) { seals.Add(1) }
	l := openLog(t, openDir(t, vfs.NewMemFS(), opts))
	var last Ticket
	for i := range 60 {
		last = appendBody(t, l, body(uint64(i), 4<<10))
	}
	waitTicket(t, last)
	segs := l.Segments()
	if len(segs) < 3 || int(seals.Load()) != len(segs)-1 {
		t.Fatalf("%d segments, %d seals: want at least 3 and one seal per sealed segment", len(segs), seals.Load())
	}
	var records uint64
	for i, s := range segs {
		records += s.Records
		if s.Sealed != (i < len(segs)-1) || (i > 0 && s.Base != segs[i-1].Next) || s.Records == 0 || s.MaxTimestamp == 0 {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	if records != 60 || segs[len(segs)-1].Next != 60 {
		t.Fatalf("segments hold %d records up to %d, want 60", records, segs[len(segs)-1].Next)
	}
	if deleted, err := l.DeleteBefore(segs[1].Next); err != nil || deleted != 2 || l.FirstOffset() != segs[2].Base {
		t.Fatalf("DeleteBefore: %d deleted, %v, first offset %d", deleted, err, l.FirstOffset())
	}
}
