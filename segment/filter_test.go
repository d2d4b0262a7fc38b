package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// subjectSet matches the subjects it holds: a pure function of the subject,
// as Matcher requires. The lookup with string(subject) does not allocate.
type subjectSet map[string]bool

func (m subjectSet) Match(subject []byte) bool { return m[string(subject)] }

// readItem is one thing a reader returned, flattened: a record (Body set)
// or a gap.
type readItem struct {
	Offset uint64
	Body   []byte
	Gap    *Gap
}

func (item readItem) String() string {
	if item.Gap != nil {
		return fmt.Sprintf("gap[%d,%d %s]", item.Gap.From, item.Gap.To, item.Gap.Reason)
	}
	return fmt.Sprintf("record %d", item.Offset)
}

// subjectBody builds a body carrying subject whose payload encodes index.
// A nil subject with raw set makes a body that is not in the record body
// format at all (a reader sees the empty subject).
func subjectBody(index uint64, subject string, size int, raw bool) []byte {
	payload := make([]byte, max(size, 16))
	binary.LittleEndian.PutUint64(payload, index)
	binary.LittleEndian.PutUint64(payload[8:], ^index)
	if raw {
		return payload
	}
	encoded, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Subject: []byte(subject), Payload: payload})
	if err != nil {
		panic(err)
	}
	return encoded
}

// readEntries reads l from offset 0 to the committed end with Next.
func readEntries(t *testing.T, l *Log, m Matcher) []readItem {
	t.Helper()
	return readEntriesFrom(t, l, m, 0)
}

// readEntriesFrom reads l from offset from to the committed end with Next.
func readEntriesFrom(t *testing.T, l *Log, m Matcher, from uint64) []readItem {
	t.Helper()
	r := l.NewReader(from)
	defer r.Close()
	r.SetFilter(m)
	var items []readItem
	for {
		if len(items) > 0 && r.Offset() != itemEnd(items[len(items)-1]) {
			t.Fatalf("Offset() = %d after %v", r.Offset(), items[len(items)-1])
		}
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return items
		}
		if err != nil {
			t.Fatalf("Next at %d: %v", r.Offset(), err)
		}
		if e.Gap != nil {
			gap := *e.Gap
			items = append(items, readItem{Gap: &gap})
			continue
		}
		items = append(items, readItem{Offset: e.Offset, Body: bytes.Clone(e.Body)})
	}
}

// readRuns reads l from offset 0 with NextRun, flattening every run into
// its records; each run must hold consecutive matching records only.
func readRuns(t *testing.T, l *Log, m Matcher, maxRecords, maxBytes int) []readItem {
	t.Helper()
	r := l.NewReader(0)
	defer r.Close()
	r.SetFilter(m)
	var items []readItem
	for {
		run, err := r.NextRun(maxRecords, maxBytes)
		if errors.Is(err, io.EOF) {
			return items
		}
		if err != nil {
			t.Fatalf("NextRun at %d: %v", r.Offset(), err)
		}
		if run.Gap != nil {
			gap := *run.Gap
			items = append(items, readItem{Gap: &gap})
			continue
		}
		if run.Count == 0 || run.Count > max(maxRecords, 1) {
			t.Fatalf("run of %d records (limit %d)", run.Count, maxRecords)
		}
		next := run.First
		for frames := run.Frames; len(frames) > 0; {
			if format.PeekKind(frames) == format.KindCommit {
				frames = frames[format.CommitFrameSize:]
				continue
			}
			h, body, err := record.ParseFrame(frames, record.DefaultMaxBody)
			if err != nil || h.Offset != next {
				t.Fatalf("run [%d,%d): frame at offset %d: %v", run.First, run.Next, h.Offset, err)
			}
			if subject, _ := record.Subject(body); m != nil && !m.Match(subject) {
				t.Fatalf("run [%d,%d) holds record %d, subject %q, which the filter refuses", run.First, run.Next, h.Offset, subject)
			}
			items = append(items, readItem{Offset: h.Offset, Body: bytes.Clone(body)})
			frames = frames[h.FrameLength:]
			next++
		}
		if next != run.Next {
			t.Fatalf("run says [%d,%d), frames end at %d", run.First, run.Next, next)
		}
		run.Release()
	}
}

func itemEnd(item readItem) uint64 {
	if item.Gap != nil {
		return item.Gap.To
	}
	return item.Offset + 1
}

// filterReference is what a filtered read must return, computed from an
// unfiltered one: the matching records, each stretch of others as one
// filtered gap, and every other gap as it was.
func filterReference(all []readItem, m Matcher) []readItem {
	var out []readItem
	var stretch *Gap
	flush := func() {
		if stretch != nil {
			out = append(out, readItem{Gap: stretch})
			stretch = nil
		}
	}
	for _, item := range all {
		if item.Gap == nil {
			if subject, _ := record.Subject(item.Body); !m.Match(subject) {
				if stretch == nil {
					stretch = &Gap{From: item.Offset, Reason: GapFiltered}
				}
				stretch.To = item.Offset + 1
				continue
			}
		}
		flush()
		out = append(out, item)
	}
	flush()
	return out
}

// checkCoverage checks what a reader returned against the log's offsets:
// from 0 to the committed end, every offset exactly once, in order, and
// no two filtered gaps side by side.
func checkCoverage(t *testing.T, items []readItem, committed uint64, label string) {
	t.Helper()
	at := uint64(0)
	for i, item := range items {
		start := item.Offset
		if item.Gap != nil {
			start = item.Gap.From
			if item.Gap.To <= item.Gap.From {
				t.Fatalf("%s: empty gap %v", label, item)
			}
			if i > 0 && item.Gap.Reason == GapFiltered && items[i-1].Gap != nil && items[i-1].Gap.Reason == GapFiltered {
				t.Fatalf("%s: filtered gaps not coalesced: %v then %v", label, items[i-1], item)
			}
		}
		if start != at {
			t.Fatalf("%s: item %d (%v) starts at %d, the previous ended at %d", label, i, item, start, at)
		}
		at = itemEnd(item)
	}
	if at != committed {
		t.Fatalf("%s: read ends at %d, committed end %d", label, at, committed)
	}
}

func sameItems(t *testing.T, got, want []readItem, label string) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		same := (g.Gap == nil) == (w.Gap == nil)
		if same && g.Gap != nil {
			same = *g.Gap == *w.Gap
		} else if same {
			same = g.Offset == w.Offset && bytes.Equal(g.Body, w.Body)
		}
		if !same {
			t.Fatalf("%s: item %d is %v, want %v", label, i, g, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d items, want %d", label, len(got), len(want))
	}
}

// filterWorkload builds a log for one seed: records with subjects drawn
// uniformly or in clustered runs, a few bodies outside the body format,
// some records removed by retention, closes and reopens (recovery runs)
// and sometimes damages a sealed segment, so reads meet holes too.
type filterWorkload struct {
	mem      *vfs.MemFS
	opts     Options
	subjects []string
	index    uint64
	// rare subjects are interleaved one record at a time, one record in
	// rareEvery (none when 0): sparse within a block, the summary lists
	// where they are (spots.go), or dense past spotMaxPerSubject.
	rare      []string
	rareEvery int
}

func newFilterWorkload(seed uint64) *filterWorkload {
	rng := newRand(seed)
	opts := testOptions(seed)
	opts.SegmentSize = MinSegmentSize << rng.IntN(5)
	if rng.IntN(3) == 0 {
		opts.MaxOpenSegments = 1 // sealed segments go idle and rebuild their summary
	}
	w := &filterWorkload{mem: vfs.NewMemFS(), opts: opts}
	count := 1 + rng.IntN(8)
	if rng.IntN(4) == 0 {
		count = 120 + rng.IntN(40) // past the summary's dictionary
	}
	for i := range count {
		w.subjects = append(w.subjects, fmt.Sprintf("s.%d", i))
	}
	if rng.IntN(4) == 0 {
		// Long subjects fill the dictionary's bytes before its ids.
		w.subjects = append(w.subjects, string(bytes.Repeat([]byte("long."), 300)), string(bytes.Repeat([]byte("longer."), 400)))
	}
	w.subjects = append(w.subjects, "") // a record without a subject
	w.rare = []string{"rare.0", "rare.1"}
	w.rareEvery = []int{0, 8, 30, 100, 400}[rng.IntN(5)]
	return w
}

func (w *filterWorkload) appendRecords(t *testing.T, l *Log, seed uint64, count int) {
	t.Helper()
	rng := newRand(seed ^ w.index)
	// The subject changes with probability 1/run: uniform, short runs, or
	// runs long enough to fill whole summary blocks.
	run := []int{1, 20, 500, 5000}[rng.IntN(4)]
	subject := w.subjects[0]
	var last Ticket
	for written := 0; written < count; {
		batch := 1 + rng.IntN(8)
		bodies, crcs := make([][]byte, batch), make([]uint32, batch)
		for i := range bodies {
			if rng.IntN(run) == 0 {
				subject = w.subjects[rng.IntN(len(w.subjects))]
			}
			size := 16 + rng.IntN(300)
			if rng.IntN(40) == 0 {
				size = 3000 + rng.IntN(20000)
			}
			this := subject
			if w.rareEvery > 0 && rng.IntN(w.rareEvery) == 0 {
				this = w.rare[rng.IntN(len(w.rare))]
			}
			bodies[i] = subjectBody(w.index, this, size, rng.IntN(50) == 0)
			crcs[i] = crc(bodies[i])
			w.index++
		}
		ticket, err := l.AppendBatch(context.Background(), bodies, crcs)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		last = ticket
		written += batch
	}
	waitTicket(t, last)
}

// build runs the workload and returns the open log.
func (w *filterWorkload) build(t *testing.T, seed uint64) (*Dir, *Log) {
	t.Helper()
	rng := newRand(seed)
	d := openDir(t, w.mem, w.opts)
	l := openLog(t, d)
	w.appendRecords(t, l, seed, 100+rng.IntN(5000))
	if rng.IntN(2) == 0 {
		if _, err := l.DeleteBefore(l.Committed() * uint64(rng.IntN(3)) / 4); err != nil {
			t.Fatalf("DeleteBefore: %v", err)
		}
	}
	sealed := l.segments.Load().segments
	_ = d.Close()
	if len(sealed) > 2 && rng.IntN(3) == 0 {
		w.damage(t, sealed[rng.IntN(len(sealed)-1)], rng.Uint64())
	}
	d = openDir(t, w.mem, w.opts)
	l = openLog(t, d)
	if rng.IntN(2) == 0 {
		w.appendRecords(t, l, seed+1, rng.IntN(500))
	}
	return d, l
}

// damage flips a byte in the body of one record of a sealed segment: its
// batch becomes a hole, found when the segment is first read.
func (w *filterWorkload) damage(t *testing.T, seg *segment, pick uint64) {
	t.Helper()
	stats := seg.stats()
	if stats.Records == 0 {
		return
	}
	file := path.Join("/data", streamsDirName, DefaultStream, "0", seg.name)
	offset := stats.Base + pick%(stats.Next-stats.Base)
	if _, ok := seg.holeAt(offset); ok {
		return
	}
	flipByte(t, w.mem, file, recordPosition(t, w.mem, file, offset)+record.FrameHeaderSize+1)
}

// TestFilteredReadProperty is the semantics of SetFilter: for random logs
// and filters, Next and NextRun with a filter return exactly the matching
// records of an unfiltered read, every other stretch of records as one
// filtered gap, and every other gap unchanged, covering every offset once.
func TestFilteredReadProperty(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 10
	}
	if s := seedFromEnv(t); s != 0 {
		filteredReadOnce(t, s)
		return
	}
	for seed := uint64(1); seed <= seeds && !t.Failed(); seed++ {
		filteredReadOnce(t, seed)
	}
}

func filteredReadOnce(t *testing.T, seed uint64) {
	w := newFilterWorkload(seed)
	d, l := w.build(t, seed)
	defer d.Close()
	all := readEntries(t, l, nil)
	committed := l.Committed()
	label := fmt.Sprintf("seed %d (replay: IRONBUS_SEED=%d go test ./segment -run TestFilteredReadProperty)", seed, seed)
	checkCoverage(t, all, committed, label+" unfiltered")
	rng := newRand(seed * 3)
	filters := map[string]subjectSet{"none": {}, "all": {}}
	for _, s := range w.subjects {
		filters["all"][s] = true
	}
	for i := range 3 {
		set := subjectSet{}
		for _, s := range w.subjects {
			if rng.IntN(3) == 0 {
				set[s] = true
			}
		}
		filters[fmt.Sprint("random-", i)] = set
	}
	filters["one"] = subjectSet{w.subjects[0]: true}
	filters["rare"] = subjectSet{w.rare[0]: true}
	filters["rare-all"] = subjectSet{w.rare[0]: true, w.rare[1]: true}
	filters["rare-and-one"] = subjectSet{w.rare[1]: true, w.subjects[0]: true}
	for name, m := range filters {
		want := filterReference(all, m)
		got := readEntries(t, l, m)
		checkCoverage(t, got, committed, label+" Next "+name)
		sameItems(t, got, want, label+" Next "+name)
		maxRecords, maxBytes := 1+rng.IntN(50), 256<<rng.IntN(10)
		runs := readRuns(t, l, m, maxRecords, maxBytes)
		checkCoverage(t, runs, committed, label+" NextRun "+name)
		sameItems(t, runs, want, fmt.Sprintf("%s NextRun %s (%d records, %d bytes)", label, name, maxRecords, maxBytes))
	}
	// A reader starting inside a block (its first records are below its
	// offset) gets what an unfiltered reader from there would, filtered.
	if committed > 0 {
		from := rng.Uint64() % committed
		base := readEntriesFrom(t, l, nil, from)
		for _, name := range []string{"rare", "rare-all", "one"} {
			want := filterReference(base, filters[name])
			sameItems(t, readEntriesFrom(t, l, filters[name], from), want, fmt.Sprintf("%s Next %s from %d", label, name, from))
		}
	}
}

// TestFilteredTailReachesCommittedEnd: a reader whose filter refuses the
// tail of the log gets it as a gap up to the committed end, its position
// advances there, and it goes on with what is appended next.
func TestFilteredTailReachesCommittedEnd(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(3))
	defer d.Close()
	l := openLog(t, d)
	for i := range uint64(50) {
		appendBody(t, l, subjectBody(i, "other", 40, false))
	}
	waitTicket(t, appendBody(t, l, subjectBody(50, "other", 40, false)))
	for _, read := range []func(r *Reader) (*Gap, uint64, error){
		func(r *Reader) (*Gap, uint64, error) {
			e, err := r.Next()
			return e.Gap, e.Offset, err
		},
		func(r *Reader) (*Gap, uint64, error) {
			run, err := r.NextRun(10, 1<<20)
			run.Release()
			return run.Gap, run.First, err
		},
	} {
		r := l.NewReader(0)
		r.SetFilter(subjectSet{"wanted": true})
		gap, _, err := read(r)
		if err != nil || gap == nil || *gap != (Gap{From: 0, To: 51, Reason: GapFiltered}) || r.Offset() != 51 {
			t.Fatalf("tail: gap %+v, %v, position %d", gap, err, r.Offset())
		}
		if _, _, err := read(r); !errors.Is(err, io.EOF) {
			t.Fatalf("after the tail: %v, want EOF", err)
		}
		r.Close()
	}
	waitTicket(t, appendBody(t, l, subjectBody(51, "wanted", 40, false)))
	r := l.NewReader(51)
	defer r.Close()
	r.SetFilter(subjectSet{"wanted": true})
	if e, err := r.Next(); err != nil || e.Gap != nil || e.Offset != 51 {
		t.Fatalf("after appending a match: %+v %v", e, err)
	}
}

// TestFilteredNextDoesNotAllocate: on a hit path (every record matches,
// and every other record matches with a gap between) Next allocates only
// the gaps it returns, never per record.
func TestFilteredNextDoesNotAllocate(t *testing.T) {
	opts := testOptions(4)
	opts.SegmentSize = 8 << 20
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	const records = 4000
	for i := range uint64(records) {
		last = appendBody(t, l, subjectBody(i, "hit", 100, false))
	}
	waitTicket(t, last)
	r := l.NewReader(0)
	defer r.Close()
	r.SetFilter(subjectSet{"hit": true})
	if _, err := r.Next(); err != nil { // enter the segment, fill the window
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(records/2, func() {
		if e, err := r.Next(); err != nil || e.Gap != nil {
			t.Fatalf("%+v %v", e.Gap, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("filtered Next allocates %v times per record", allocs)
	}
}

// TestSetFilterBetweenReads changes the filter part way, and removes it:
// every offset is still covered once, in order, and each record returned
// matches the filter in force when it was read.
func TestSetFilterBetweenReads(t *testing.T) {
	opts := testOptions(9)
	opts.SegmentSize = 256 << 10
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	subjectOf := func(i uint64) string { return []string{"a", "b", "c"}[i/250%3] }
	var last Ticket
	for i := range uint64(3000) {
		last = appendBody(t, l, subjectBody(i, subjectOf(i), 100, false))
	}
	waitTicket(t, last)
	phases := []struct {
		until uint64
		m     Matcher
		want  func(string) bool
	}{
		{700, subjectSet{"a": true}, func(s string) bool { return s == "a" }},
		{1900, subjectSet{"b": true, "c": true}, func(s string) bool { return s != "a" }},
		{3000, nil, func(string) bool { return true }},
	}
	for _, api := range []string{"Next", "NextRun"} {
		r := l.NewReader(0)
		at := uint64(0)
		for _, phase := range phases {
			r.SetFilter(phase.m)
			for at < phase.until {
				from, to, isGap, err := readOne(r, api)
				if err != nil || from != at || to <= from {
					t.Fatalf("%s at %d: [%d,%d): %v", api, at, from, to, err)
				}
				for offset := from; !isGap && offset < to; offset++ {
					if !phase.want(subjectOf(offset)) {
						t.Fatalf("%s: record %d (%s) does not match the filter in force", api, offset, subjectOf(offset))
					}
				}
				at = to
			}
		}
		if _, _, _, err := readOne(r, api); !errors.Is(err, io.EOF) || at != 3000 {
			t.Fatalf("%s: ended at %d: %v", api, at, err)
		}
		r.Close()
	}
}
