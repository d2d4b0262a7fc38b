package segment

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// runRecords walks a run's frames as a consumer does: record frames are
// decoded and verified, commit frames skipped, anything else fails.
func runRecords(t *testing.T, run Run) []uint64 {
	t.Helper()
	var offsets []uint64
	for frames := run.Frames; len(frames) > 0; {
		switch format.PeekKind(frames) {
		case format.KindCommit:
			frames = frames[format.CommitFrameSize:]
		case format.KindRecord:
			h, body, err := record.ParseFrame(frames, 1<<20)
			if err != nil {
				t.Fatalf("run frame: %v", err)
			}
			if payloadIndex(t, body) != h.Offset {
				t.Fatalf("record %d carries another payload", h.Offset)
			}
			offsets = append(offsets, h.Offset)
			frames = frames[h.FrameLength:]
		default:
			t.Fatalf("run holds a %v frame", format.PeekKind(frames))
		}
	}
	if len(offsets) != run.Count || (len(offsets) > 0 && (offsets[0] != run.First || offsets[len(offsets)-1]+1 != run.Next)) {
		t.Fatalf("run says %d records [%d,%d), frames hold %v", run.Count, run.First, run.Next, offsets)
	}
	return offsets
}

// TestRunsCoverTheLog reads a log of sealed and active segments in runs
// bounded by records and bytes: every record comes once, in order, as the
// stored frame.
func TestRunsCoverTheLog(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(8))
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	const records = 500
	for i := uint64(0); i < records; i++ {
		last = appendBody(t, l, body(i, 300))
	}
	waitTicket(t, last)
	for _, limits := range []struct{ records, bytes int }{{1, 1 << 20}, {7, 1 << 20}, {1000, 2000}, {1000, 1 << 20}} {
		r := l.NewReader(0)
		next := uint64(0)
		for {
			run, err := r.NextRun(limits.records, limits.bytes)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil || run.Gap != nil {
				t.Fatalf("limits %+v at %d: %v gap %v", limits, next, err, run.Gap)
			}
			if run.Count > limits.records || (run.Count > 1 && len(run.Frames) > limits.bytes+1000) {
				t.Fatalf("limits %+v: run of %d records, %d bytes", limits, run.Count, len(run.Frames))
			}
			for _, offset := range runRecords(t, run) {
				if offset != next {
					t.Fatalf("limits %+v: offset %d, want %d", limits, offset, next)
				}
				next++
			}
			run.Release()
		}
		r.Close()
		if next != records {
			t.Fatalf("limits %+v: read %d records, want %d", limits, next, records)
		}
	}
}

// TestRunPinsItsSegment holds a run from a sealed segment while retention
// deletes it: the frames stay readable until Release, and a reader that
// starts below the retained range gets a gap, not frames.
func TestRunPinsItsSegment(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(8))
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	for i := uint64(0); i < 600; i++ {
		last = appendBody(t, l, body(i, 400))
	}
	waitTicket(t, last)
	r := l.NewReader(0)
	run, err := r.NextRun(50, 1<<20)
	r.Close()
	if err != nil || run.Count == 0 || run.seg == nil {
		t.Fatalf("first run: %d records, pinned %v, %v", run.Count, run.seg != nil, err)
	}
	before := bytes.Clone(run.Frames)
	if deleted, err := l.DeleteBefore(l.Committed() - 1); err != nil || deleted == 0 {
		t.Fatalf("DeleteBefore: %d %v", deleted, err)
	}
	if run.seg.refs.Load() < 1 || !bytes.Equal(run.Frames, before) {
		t.Fatal("the run's segment was let go while the run held it")
	}
	runRecords(t, run)
	run.Release()
	run.Release() // idempotent

	r = l.NewReader(0)
	defer r.Close()
	gap, err := r.NextRun(50, 1<<20)
	if err != nil || gap.Gap == nil || gap.Gap.Reason != GapRetention || gap.Count != 0 {
		t.Fatalf("below retention: %+v %v", gap, err)
	}
	if tail, err := r.NextRun(50, 1<<20); err != nil || tail.Count == 0 || tail.First != gap.Gap.To {
		t.Fatalf("after the gap: %+v %v", tail, err)
	} else {
		tail.Release()
	}
}
