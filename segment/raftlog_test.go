package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// raftFrames frames count records from offset first, as a leader does.
func raftFrames(first uint64, count int, size int) []byte {
	var frames []byte
	for i := range count {
		b := body(first+uint64(i), size)
		frames = record.AppendFrame(frames, first+uint64(i), 1_700_000_000_000_000_000, b, crc(b), 0)
	}
	return frames
}

// raftWorkload is entries 1..n: every third a control entry, the others
// data entries of one to three records, some large enough to roll.
func raftWorkload(n int) []RaftEntry {
	var entries []RaftEntry
	next := uint64(0)
	for index := uint64(1); index <= uint64(n); index++ {
		term := 1 + index/25
		if index%3 == 0 {
			entries = append(entries, RaftEntry{Index: index, Term: term, Control: true, Type: uint8(index % 2),
				Data: []byte(fmt.Sprint("control ", index))})
			continue
		}
		count, size := 1+int(index%3), 100+int(index*37%2000)
		if index%11 == 0 {
			size = 20_000
		}
		entries = append(entries, RaftEntry{Index: index, Term: term, Data: raftFrames(next, count, size),
			FirstOffset: next, Count: uint32(count)})
		next += uint64(count)
	}
	return entries
}

func readRaft(t testing.TB, r *RaftLog, lo, hi uint64) []RaftEntry {
	t.Helper()
	var out []RaftEntry
	err := r.ReadEntries(lo, hi, func(e RaftEntry) bool {
		e.Data = bytes.Clone(e.Data)
		out = append(out, e)
		return true
	})
	if err != nil {
		t.Fatalf("ReadEntries(%d, %d): %v", lo, hi, err)
	}
	return out
}

func requireRaft(t testing.TB, r *RaftLog, want []RaftEntry, label string) {
	t.Helper()
	got := readRaft(t, r, want[0].Index, want[len(want)-1].Index+1)
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", label, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Index != w.Index || g.Term != w.Term || g.Control != w.Control || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) ||
			(!w.Control && (g.FirstOffset != w.FirstOffset || g.Count != w.Count)) {
			t.Fatalf("%s: entry %d: got %+v", label, w.Index, g)
		}
		if term, err := r.Term(w.Index); err != nil || term != w.Term {
			t.Fatalf("%s: Term(%d) = %d, %v", label, w.Index, term, err)
		}
	}
}

// recordsIn lists the records of data entries by offset.
func recordsIn(entries []RaftEntry) map[uint64][]byte {
	out := map[uint64][]byte{}
	for _, e := range entries {
		for frames := e.Data; !e.Control && len(frames) > 0; {
			h, b, err := record.ParseFrame(frames, 1<<24)
			if err != nil {
				panic(err)
			}
			out[h.Offset] = bytes.Clone(b)
			frames = frames[h.FrameLength:]
		}
	}
	return out
}

// TestRaftLogReadersSkipControl: readers of records, record by record and
// in runs, see the data entries' records at their offsets, dense, and
// never a control frame.
func TestRaftLogReadersSkipControl(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(1)
			opts.IOMode = mode
			d := openDir(t, vfs.NewMemFS(), opts)
			defer d.Close()
			l := openLog(t, d)
			r, err := l.OpenRaft(0)
			if err != nil {
				t.Fatal(err)
			}
			entries := raftWorkload(90)
			if err := r.Append(entries); err != nil {
				t.Fatal(err)
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			if len(l.Segments()) < 3 {
				t.Fatalf("%d segments: the test wants rolls", len(l.Segments()))
			}
			requireRaft(t, r, entries, "written")
			want := recordsIn(entries)
			got, gaps := readAll(t, l)
			if len(gaps) != 0 || len(got) != len(want) {
				t.Fatalf("reader: %d records and gaps %v, want %d records", len(got), gaps, len(want))
			}
			for _, e := range got {
				if !bytes.Equal(e.Body, want[e.Offset]) {
					t.Fatalf("reader: record %d differs", e.Offset)
				}
			}
			reader := l.NewReader(0)
			defer reader.Close()
			next := uint64(0)
			for {
				run, err := reader.NextRun(1000, 1<<20)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil || run.Gap != nil || run.First != next {
					t.Fatalf("run at %d: %+v, %v", next, run, err)
				}
				for frames := run.Frames; len(frames) > 0; {
					if !record.IsFrame(frames) {
						n, err := record.OtherFrameLength(frames)
						if err != nil || frames[1] != 'C' {
							t.Fatalf("run at %d holds a %q frame", next, frames[:2])
						}
						frames = frames[n:]
						continue
					}
					h, b, err := record.ParseFrame(frames, 1<<24)
					if err != nil || h.Offset != next || !bytes.Equal(b, want[next]) {
						t.Fatalf("run record %d: offset %d, %v", next, h.Offset, err)
					}
					next++
					frames = frames[h.FrameLength:]
				}
				run.Release()
			}
			if next != uint64(len(want)) {
				t.Fatalf("runs ended at %d, want %d", next, len(want))
			}
		})
	}
}

func TestRaftLogTruncateAndReopen(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) { testRaftLogTruncateAndReopen(t, mode) })
	}
}

func testRaftLogTruncateAndReopen(t *testing.T, mode IOMode) {
	mem := vfs.NewMemFS()
	opts := testOptions(2)
	opts.IOMode = mode
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	r, err := l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	entries := raftWorkload(90)
	if err := r.Append(entries); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	// A cut inside a sealed segment makes it the active one again.
	cut := uint64(20)
	if err := r.TruncateFrom(cut); err != nil {
		t.Fatal(err)
	}
	if r.LastIndex() != cut-1 || l.Committed() != entries[cut-1].FirstOffset && !entries[cut-1].Control {
		t.Fatalf("after the cut: last %d, committed %d", r.LastIndex(), l.Committed())
	}
	replacement := raftWorkload(90)[cut-1:]
	for i := range replacement {
		replacement[i].Term += 10
	}
	if err := r.Append(replacement); err != nil {
		t.Fatalf("append after the cut: %v", err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	entries = append(entries[:cut-1], replacement...)
	requireRaft(t, r, entries, "replaced")
	// A cut inside the active segment, the replacement's offsets the same.
	cut = r.LastIndex() - 2
	if err := r.TruncateFrom(cut); err != nil {
		t.Fatal(err)
	}
	again := append([]RaftEntry(nil), entries[cut-1:]...)
	for i := range again {
		again[i].Term++
	}
	if err := r.Append(again); err != nil {
		t.Fatalf("append after the second cut: %v", err)
	}
	entries = append(entries[:cut-1], again...)
	requireRaft(t, r, entries, "replaced again")
	if _, err := l.DeleteBefore(1 << 40); !errors.Is(err, ErrReplicated) {
		t.Fatalf("offset retention on a replicated log: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Random = seededRandom(3)
	d = openDir(t, mem, opts)
	defer d.Close()
	l = openLog(t, d)
	if report := l.Report(); report.HasDataLoss() {
		t.Fatalf("reopen lost data: %+v", report)
	}
	r, err = l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	requireRaft(t, r, entries, "reopened")
	// Retention by index drops whole segments below it.
	point, ok := r.Compactable(60)
	if !ok || point.Index > 60 {
		t.Fatalf("Compactable(60) = %+v, %v", point, ok)
	}
	if err := r.CompactTo(60); err != nil {
		t.Fatal(err)
	}
	if r.FirstIndex() != point.Index+1 || l.FirstOffset() != point.NextOffset {
		t.Fatalf("after compaction: first index %d offset %d, want %d and %d", r.FirstIndex(), l.FirstOffset(), point.Index+1, point.NextOffset)
	}
	requireRaft(t, r, entries[point.Index:], "compacted")
	// A reset starts over at a snapshot's offset.
	if err := r.Reset(5000, 200); err != nil {
		t.Fatal(err)
	}
	next := RaftEntry{Index: 201, Term: 30, Data: raftFrames(5000, 2, 100), FirstOffset: 5000, Count: 2}
	if err := r.Append([]RaftEntry{next}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	requireRaft(t, r, []RaftEntry{next}, "reset")
	if l.FirstOffset() != 5000 || l.Committed() != 5002 {
		t.Fatalf("after the reset: first offset %d, committed %d", l.FirstOffset(), l.Committed())
	}
}

// TestRaftLogControlOnlySegmentsGrow: a segment that holds no offsets
// grows rather than roll, so no two segments share a base offset (R4).
func TestRaftLogControlOnlySegmentsGrow(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(4))
	defer d.Close()
	l := openLog(t, d)
	r, err := l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("c"), 3000)
	var entries []RaftEntry
	for index := uint64(1); index <= 60; index++ {
		entries = append(entries, RaftEntry{Index: index, Term: 1, Control: true, Data: payload})
	}
	if err := r.Append(entries); err != nil {
		t.Fatal(err)
	}
	data := RaftEntry{Index: 61, Term: 1, Data: raftFrames(0, 1, 100), Count: 1}
	if err := r.Append([]RaftEntry{data}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	bases := map[uint64]bool{}
	for _, seg := range l.Segments() {
		if bases[seg.Base] {
			t.Fatalf("two segments at base %d: %+v", seg.Base, l.Segments())
		}
		bases[seg.Base] = true
	}
	requireRaft(t, r, append(entries, data), "control only")
}

// TestRaftStateSlots: a state write goes to the other slot, so a torn
// write leaves the state before it; snapshot data round-trips and fails
// its checksum when damaged.
func TestRaftStateSlots(t *testing.T) {
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(5))
	l := openLog(t, d)
	if state, err := l.ReadRaftState(); err != nil || state != nil {
		t.Fatalf("a fresh log's state: %q, %v", state, err)
	}
	r, err := l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"first", "second", "third"} {
		if err := r.WriteState([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WriteState(make([]byte, RaftStateSlot)); !errors.Is(err, ErrRaftState) {
		t.Fatalf("a state larger than a slot: %v", err)
	}
	if err := r.WriteSnapshotData(7, []byte("tables")); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	name := "/data/streams/" + DefaultStream + "/0/" + RaftStateName
	// "third" went to slot 1 (sequence 3); tear it: "second" is back.
	file, err := mem.OpenFile(name, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt([]byte{0xff}, RaftStateSlot+raftSlotHeader); err != nil {
		t.Fatal(err)
	}
	_ = file.Close()
	d = openDir(t, mem, testOptions(6))
	defer d.Close()
	l = openLog(t, d)
	if state, err := l.ReadRaftState(); err != nil || string(state) != "second" {
		t.Fatalf("after a torn slot: %q, %v; want the state before", state, err)
	}
	if data, err := l.ReadSnapshotData(7); err != nil || string(data) != "tables" {
		t.Fatalf("snapshot data: %q, %v", data, err)
	}
	r, err = l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteState([]byte("fourth")); err != nil {
		t.Fatal(err)
	}
	if state, err := l.ReadRaftState(); err != nil || string(state) != "fourth" {
		t.Fatalf("after another write: %q, %v", state, err)
	}
	if err := r.RemoveSnapshotData(0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadSnapshotData(7); !errors.Is(err, ErrRaftState) {
		t.Fatalf("removed snapshot data: %v", err)
	}
}

// TestRaftLogAfterClose: a closed log refuses the Raft log's writes.
func TestRaftLogAfterClose(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(7))
	defer d.Close()
	l := openLog(t, d)
	r, err := l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(raftWorkload(3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entry := RaftEntry{Index: 4, Term: 1, Control: true}
	for name, err := range map[string]error{
		"append": r.Append([]RaftEntry{entry}), "sync": r.Sync(), "truncate": r.TruncateFrom(2),
		"reset": r.Reset(10, 10), "compact": r.CompactTo(3), "state": r.WriteState([]byte("s")),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after close: %v", name, err)
		}
	}
}

// TestRaftLogMarkedAtOpen: a log whose directory holds a replica's state
// refuses producers' appends and offset retention as soon as it opens,
// before its replica opens the Raft log.
func TestRaftLogMarkedAtOpen(t *testing.T) {
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(8))
	l := openLog(t, d)
	r, err := l.OpenRaft(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteState([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDir(t, mem, testOptions(9))
	defer d.Close()
	l = openLog(t, d)
	b := body(1, 10)
	if _, err := l.Append(t.Context(), b, crc(b)); !errors.Is(err, ErrReplicated) {
		t.Fatalf("a producer's append to a replicated log after a restart: %v", err)
	}
	if _, err := l.DeleteBefore(1); !errors.Is(err, ErrReplicated) {
		t.Fatalf("offset retention: %v", err)
	}
	if _, err := l.OpenRaft(0); err != nil {
		t.Fatalf("the replica opens the Raft log: %v", err)
	}
}
