package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// atomicBatch is an atomic batch a test appended: the offsets its ticket
// named.
type atomicBatch struct{ first, count uint64 }

func (b atomicBatch) end() uint64 { return b.first + b.count }

// atomicLedger records the atomic batches of a run for the all-or-none
// checks; producers on several goroutines add to it.
type atomicLedger struct {
	mu      sync.Mutex
	batches []atomicBatch
}

func (a *atomicLedger) add(ticket Ticket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches = append(a.batches, atomicBatch{first: ticket.First, count: ticket.Count})
}

func (a *atomicLedger) snapshot() []atomicBatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.batches)
}

// splitBy returns a batch that mark falls strictly inside: one whose
// first records are below it and whose last are not.
func splitBy(batches []atomicBatch, mark uint64) (atomicBatch, bool) {
	for _, b := range batches {
		if b.first < mark && mark < b.end() {
			return b, true
		}
	}
	return atomicBatch{}, false
}

// appendAtomic appends bodies as one atomic batch: through
// TryCommitAtomic when inline, waiting for room as the broker's reactors
// do, else through AppendAtomic.
func appendAtomic(l *Log, inline bool, bodies [][]byte, crcs []uint32) (Ticket, error) {
	if !inline {
		return l.AppendAtomic(context.Background(), bodies, crcs)
	}
	frameBytes := 0
	for _, b := range bodies {
		frameBytes += record.FrameSize(len(b))
	}
	for {
		ticket, err := l.TryCommitAtomic(bodies, crcs)
		if !errors.Is(err, ErrFull) {
			return ticket, err
		}
		<-l.RoomFor(frameBytes)
	}
}

// commitRange is the offsets one commit frame closes.
type commitRange struct {
	segment     string
	first, last uint64
}

// commitRanges walks the frames of every segment file of the default log
// and returns the ranges of its commit frames, in order.
func commitRanges(t *testing.T, fsys vfs.FS) []commitRange {
	t.Helper()
	dir := "/data/streams/" + DefaultStream + "/0"
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ranges []commitRange
	for _, name := range names {
		if _, ok := parseSegmentFileName(name); !ok {
			continue
		}
		data, err := vfs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for pos := format.SegmentDataStart; pos+format.FramePrefixSize <= len(data); {
			kind := format.PeekKind(data[pos:])
			if kind == format.KindCommit {
				commit, err := format.DecodeCommit(data[pos:])
				if err != nil {
					t.Fatalf("%s at %d: %v", name, pos, err)
				}
				ranges = append(ranges, commitRange{segment: name, first: commit.FirstOffset, last: commit.LastOffset})
			}
			if kind != format.KindRecord && kind != format.KindCommit && kind != format.KindSkip {
				break
			}
			pos += int(frameLength(data[pos:]))
		}
	}
	return ranges
}

// assertUnderOneCommit checks that one commit frame closes every record
// of each batch.
func assertUnderOneCommit(t *testing.T, ranges []commitRange, batches []atomicBatch) {
	t.Helper()
	for _, b := range batches {
		i := slices.IndexFunc(ranges, func(r commitRange) bool { return r.first <= b.first && b.first <= r.last })
		if i < 0 {
			t.Fatalf("atomic batch %+v: no commit frame covers its first record", b)
		}
		if r := ranges[i]; r.last < b.end()-1 {
			t.Fatalf("atomic batch [%d, %d) cut: the commit frame of %s closes [%d, %d]", b.first, b.end(), r.segment, r.first, r.last)
		}
	}
}

// activeRoom is how many record bytes still fit in the active segment.
func activeRoom(l *Log) int {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return l.app.room()
}

// fillActive appends 1,000-byte records until less than room bytes are
// left in the active segment (and more than one record's worth less).
func fillActive(t *testing.T, l *Log, room int) {
	t.Helper()
	waitTicket(t, appendBody(t, l, body(0, 1000))) // the first write opens the segment
	for i := uint64(1); activeRoom(l) >= room; i++ {
		waitTicket(t, appendBody(t, l, body(i, 1000)))
	}
}

// TestAtomicBatchRollsInsteadOfSplitting: an ordinary batch that does not
// fit the active segment's room is split at the roll, part of it in each
// segment; an atomic batch in the same place goes whole into the next
// segment, under one commit frame.
func TestAtomicBatchRollsInsteadOfSplitting(t *testing.T) {
	bodies, crcs := make([][]byte, 4), make([]uint32, 4)
	for i := range bodies {
		bodies[i] = body(uint64(100+i), 2000)
		crcs[i] = crc(bodies[i])
	}
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			mem := vfs.NewMemFS()
			d := openDir(t, mem, testOptions(11))
			defer d.Close()
			l := openLog(t, d)
			fillActive(t, l, 6000) // room left for two of the four records
			var ticket Ticket
			var err error
			if atomic {
				ticket, err = l.AppendAtomic(context.Background(), bodies, crcs)
			} else {
				ticket, err = l.AppendBatch(context.Background(), bodies, crcs)
			}
			if err != nil {
				t.Fatal(err)
			}
			waitTicket(t, ticket)
			segments := l.segments.Load().segments
			last := segments[len(segments)-1]
			batch := atomicBatch{first: ticket.First, count: ticket.Count}
			if !atomic {
				if last.base <= batch.first || last.base >= batch.end() {
					t.Fatalf("ordinary batch [%d, %d): the roll at %d did not split it; the test does not reach the split", batch.first, batch.end(), last.base)
				}
				return
			}
			if len(segments) != 2 || last.base != batch.first {
				t.Fatalf("atomic batch [%d, %d): want a new segment starting at it, have %s", batch.first, batch.end(), describeSegments(l))
			}
			assertUnderOneCommit(t, commitRanges(t, mem), []atomicBatch{batch})
		})
	}
}

// TestAtomicBatchLimit: an atomic batch of up to MaxAtomicBytes frame
// bytes is taken, one byte more is ErrBatchTooLarge and stages nothing.
func TestAtomicBatchLimit(t *testing.T) {
	opts := testOptions(12)
	limit := MaxAtomicBytes(opts)
	if limit != opts.StagingBytes {
		t.Fatalf("MaxAtomicBytes = %d, want the staging bytes %d", limit, opts.StagingBytes)
	}
	if got, want := MaxAtomicBytes(Options{SegmentSize: MinSegmentSize}), MinSegmentSize-format.SegmentDataStart-2*80; got != want {
		t.Fatalf("MaxAtomicBytes of the smallest segment = %d, want %d", got, want)
	}
	if got := MaxAtomicBytes(Options{}); got != DefaultStagingBytes {
		t.Fatalf("MaxAtomicBytes of the defaults = %d, want %d", got, DefaultStagingBytes)
	}
	d := openDir(t, vfs.NewMemFS(), opts)
	l := openLog(t, d)
	// Four records whose frames total exactly the limit.
	sizes := []int{limit / 4, limit / 4, limit / 4, 0}
	sizes[3] = limit - sizes[0] - sizes[1] - sizes[2]
	bodies, crcs := make([][]byte, 4), make([]uint32, 4)
	for i, size := range sizes {
		bodies[i] = make([]byte, size-record.FrameSize(0))
		crcs[i] = crc(bodies[i])
	}
	ticket, err := l.AppendAtomic(context.Background(), bodies, crcs)
	if err != nil {
		t.Fatalf("a batch of exactly the limit: %v", err)
	}
	waitTicket(t, ticket)
	bodies[3] = append(bodies[3], 0)
	crcs[3] = crc(bodies[3])
	if _, err := l.TryAppendAtomic(bodies, crcs); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("one byte over the limit: %v, want ErrBatchTooLarge", err)
	}
	if _, err := l.TryCommitAtomic(bodies, crcs); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("one byte over the limit, inline: %v, want ErrBatchTooLarge", err)
	}
	// Nothing was staged: the next record takes the next offset.
	next := appendBody(t, l, body(1, 100))
	if next.First != 4 {
		t.Fatalf("next record at offset %d, want 4", next.First)
	}
	if _, err := l.AppendAtomic(context.Background(), nil, nil); err == nil {
		t.Fatal("an empty atomic batch was taken")
	}
}

// TestAtomicBatchCommittedMarkNeverInside appends atomic batches from two
// producers (one through the inline path) beside two producers of
// ordinary batches, while a poller samples the committed mark and a
// reader follows the log: no mark and no place the reader stopped at may
// fall inside an atomic batch, and on disk each batch is closed by one
// commit frame.
func TestAtomicBatchCommittedMarkNeverInside(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMemFS()
			opts := testOptions(13)
			opts.IOMode = mode
			d := openDir(t, mem, opts)
			l := openLog(t, d)
			var ledger atomicLedger
			done := make(chan struct{})
			marks, stops := sampleMarks(l, done), followLog(t, l, done)

			var producers sync.WaitGroup
			for p := range 4 {
				producers.Add(1)
				go func() {
					defer producers.Done()
					produceMixed(t, l, p, &ledger)
				}()
			}
			producers.Wait()
			close(done)
			batches := ledger.snapshot()
			for _, mark := range append(<-marks, <-stops...) {
				if b, split := splitBy(batches, mark); split {
					t.Fatalf("committed mark %d exposed part of atomic batch [%d, %d)", mark, b.first, b.end())
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			assertUnderOneCommit(t, commitRanges(t, mem), batches)
		})
	}
}

// produceMixed appends 120 batches: atomic ones of 2 to 12 records of
// 400 to 1,100 bytes from producers 0 (AppendAtomic) and 1 (TryCommitAtomic),
// ordinary ones of 1 to 3 records from the others.
func produceMixed(t *testing.T, l *Log, producer int, ledger *atomicLedger) {
	for i := range 120 {
		count := 1 + i%3
		if producer < 2 {
			count = 2 + i%11
		}
		bodies, crcs := make([][]byte, count), make([]uint32, count)
		for j := range bodies {
			index := uint64(producer)<<32 | uint64(i*16+j)
			bodies[j] = body(index, 400+int(index%700))
			crcs[j] = crc(bodies[j])
		}
		var ticket Ticket
		var err error
		if producer < 2 {
			ticket, err = appendAtomic(l, producer == 1, bodies, crcs)
		} else {
			ticket, err = l.AppendBatch(context.Background(), bodies, crcs)
		}
		if err != nil {
			t.Errorf("producer %d: %v", producer, err)
			return
		}
		if producer < 2 {
			ledger.add(ticket)
		}
		if i%4 == 0 {
			if err := ticket.Wait(context.Background()); err != nil {
				t.Errorf("producer %d: %v", producer, err)
				return
			}
		}
	}
}

// sampleMarks polls l's committed mark until done closes and sends every
// distinct value it saw.
func sampleMarks(l *Log, done <-chan struct{}) <-chan []uint64 {
	out := make(chan []uint64, 1)
	go func() {
		var marks []uint64
		for {
			if mark := l.Committed(); len(marks) == 0 || marks[len(marks)-1] != mark {
				marks = append(marks, mark)
			}
			select {
			case <-done:
				out <- marks
				return
			default:
			}
		}
	}()
	return out
}

// followLog reads l from the start as records are committed until done
// closes, and sends every offset where the reader met the committed end.
func followLog(t *testing.T, l *Log, done <-chan struct{}) <-chan []uint64 {
	out := make(chan []uint64, 1)
	go func() {
		r := l.NewReader(0)
		defer r.Close()
		var stops []uint64
		defer func() { out <- stops }()
		for {
			_, err := r.Next()
			if err == nil {
				continue
			}
			if !errors.Is(err, io.EOF) {
				t.Errorf("reader at %d: %v", r.Offset(), err)
				return
			}
			stops = append(stops, r.Offset())
			select {
			case <-l.CommittedChange(r.Offset()):
			case <-done:
				return
			}
		}
	}()
	return out
}

// atomicIndices are the body indices of the crash workload's atomic
// records: bodySize gives each 2,000 bytes, so a batch of up to 7 fits the
// test's 16 KiB staging buffer and several fill a 64 KiB segment.
func atomicIndices(from uint64) func() uint64 {
	next := from - from%13
	return func() uint64 {
		for {
			next += 13
			if next%97 != 0 {
				return next
			}
		}
	}
}

// atomicWorkload appends batches atomic batches of 1 to 7 records,
// through TryCommitAtomic when inline, waiting for each, beside an
// ordinary workload of two producers. It stops quietly at the power cut.
func (c *crashRig) atomicWorkload(l *Log, batches int, inline bool, ledger *atomicLedger) {
	c.atomicWorkloadOf(l, batches, 7, inline, ledger)
}

// atomicWorkloadOf is atomicWorkload with batches of 1 to perBatch
// records.
func (c *crashRig) atomicWorkloadOf(l *Log, batches, perBatch int, inline bool, ledger *atomicLedger) {
	var ordinary sync.WaitGroup
	ordinary.Add(1)
	go func() {
		defer ordinary.Done()
		c.appendWorkload(l, 2, 30, 0)
	}()
	defer ordinary.Wait()
	nextIndex := atomicIndices(1 << 32)
	for i := range batches {
		count := 1 + i%perBatch
		bodies, crcs, indices := make([][]byte, count), make([]uint32, count), make([]uint64, count)
		for j := range bodies {
			indices[j] = nextIndex()
			bodies[j] = body(indices[j], bodySize(indices[j]))
			crcs[j] = crc(bodies[j])
		}
		ticket, err := appendAtomic(l, inline, bodies, crcs)
		if err != nil {
			return
		}
		ledger.add(ticket)
		c.noteIndices(ticket, indices, false)
		if ticket.Wait(context.Background()) != nil {
			return
		}
		c.noteIndices(ticket, indices, true)
	}
}

// noteIndices records the records of ticket, whose bodies have the given
// indices, as assigned, or as acknowledged.
func (c *crashRig) noteIndices(ticket Ticket, indices []uint64, acked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, index := range indices {
		if acked {
			c.acked[ticket.First+uint64(i)] = index
		} else {
			c.assigned[ticket.First+uint64(i)] = index
		}
	}
}

// assertAllOrNone checks that the recovered log holds every record of
// each atomic batch or none.
func assertAllOrNone(t *testing.T, l *Log, batches []atomicBatch, label string) {
	t.Helper()
	entries, _ := readAll(t, l)
	present := make(map[uint64]bool, len(entries))
	for _, e := range entries {
		present[e.Offset] = true
	}
	for _, b := range batches {
		held := 0
		for offset := b.first; offset < b.end(); offset++ {
			if present[offset] {
				held++
			}
		}
		if held != 0 && uint64(held) != b.count {
			t.Fatalf("%s: atomic batch [%d, %d) recovered in part: %d of %d records", label, b.first, b.end(), held, b.count)
		}
	}
}

// TestCrashAtomicBatches cuts power at every write while atomic batches
// of 1 to 7 records (2 KB each, so many straddle a 64 KiB segment's end)
// are appended beside ordinary batches from two other producers: after
// recovery every acknowledged record is there (verifyImage) and every
// atomic batch is whole or absent, with and without unsynced writes kept,
// reordered and torn, through the appender and through the inline path.
func TestCrashAtomicBatches(t *testing.T) {
	cases := []struct {
		mode   IOMode
		inline bool
		keep   float64
	}{{IOBuffered, false, 0}, {IOBuffered, false, 0.5}, {IOBuffered, true, 0.5}, {IODirect, true, 0.5}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/inline=%v/keep=%v", tc.mode, tc.inline, tc.keep), func(t *testing.T) {
			opts := testOptions(0)
			opts.IOMode = tc.mode
			ledger := &atomicLedger{} // a cut before the workload leaves it empty
			crashEveryWriteChecked(t, "atomic", opts, tc.keep, emptyFS, func(c *crashRig, l *Log) {
				c.atomicWorkload(l, 24, tc.inline, ledger)
			}, func(c *crashRig, recovered *Log, label string) {
				assertAllOrNone(t, recovered, ledger.snapshot(), label)
				ledger = &atomicLedger{}
			})
		})
	}
}

// TestAtomicBatchNoSpaceFailsWhole: a write refused for want of space
// fails the atomic batch whole, leaves nothing of it readable, and the
// log takes the next batch at the same offsets.
func TestAtomicBatchNoSpaceFailsWhole(t *testing.T) {
	mem := vfs.NewMemFS()
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpWrite), Err: vfs.InjectedNoSpace}
	d := openDir(t, vfs.Inject(mem, fault), testOptions(14))
	l := openLog(t, d)
	waitTicket(t, appendBody(t, l, body(0, 100)))
	bodies, crcs := make([][]byte, 5), make([]uint32, 5)
	for i := range bodies {
		bodies[i] = body(uint64(i+1), 1500)
		crcs[i] = crc(bodies[i])
	}
	fault.Set(true)
	ticket, err := l.AppendAtomic(context.Background(), bodies, crcs)
	if err == nil {
		err = ticket.Wait(context.Background())
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("atomic batch on a full disk: %v, want ErrNoSpace", err)
	}
	if got := l.Committed(); got != 1 {
		t.Fatalf("committed %d after the failed batch, want 1", got)
	}
	fault.Set(false)
	ticket, err = l.AppendAtomic(context.Background(), bodies, crcs)
	if err != nil {
		t.Fatal(err)
	}
	waitTicket(t, ticket)
	if ticket.First != 1 {
		t.Fatalf("the batch after the full disk starts at %d, want 1", ticket.First)
	}
	entries, _ := readAll(t, l)
	if len(entries) != 6 {
		t.Fatalf("%d records readable, want 6", len(entries))
	}
	_ = d.Close()
}

// TestPowerCutAtomicSeeded is TestPowerCutSeeded with atomic batches:
// random staging sizes (so random limits), I/O modes and preallocation,
// a random cut keeping a random part of the unsynced writes, reordered and
// torn. IRONBUS_SEED replays one seed.
func TestPowerCutAtomicSeeded(t *testing.T) {
	if s := seedFromEnv(t); s != 0 {
		powerCutAtomicOnce(t, s)
		return
	}
	for seed := uint64(1); seed <= 100 && !t.Failed(); seed++ {
		powerCutAtomicOnce(t, seed)
	}
}

func powerCutAtomicOnce(t *testing.T, seed uint64) {
	rng := newRand(seed)
	opts := testOptions(seed)
	opts.StagingBytes = 4096 << rng.IntN(4)
	if rng.IntN(3) == 0 {
		opts.IOMode = IODirect
	}
	opts.Preallocation = Preallocation(rng.IntN(3))
	crashOpts := vfs.CrashOptions{Seed: seed, KeepUnsynced: rng.Float64(), Reorder: rng.IntN(2) == 0, Tear: rng.IntN(2) == 0}
	c := newCrashRig(vfs.NewMemFS(), int64(rng.IntN(400)), crashOpts)
	// As many 2 KB records as the limit takes (at least one).
	perBatch := max(1, MaxAtomicBytes(opts)/2100)
	inline := rng.IntN(2) == 0
	var ledger atomicLedger
	label := fmt.Sprintf("atomic power cut seed %d (replay: IRONBUS_SEED=%d go test ./segment -run TestPowerCutAtomicSeeded)", seed, seed)
	d, err := Open(c.fs, "/data", opts)
	if err == nil {
		if l, err := d.OpenLog(defaultLog); err == nil {
			c.atomicWorkloadOf(l, 30, perBatch, inline, &ledger)
		}
		_ = d.Close()
	}
	if !c.crashed.Load() {
		return
	}
	recovered := verifyImage(t, c.image, testOptions(seed), c.ackedAtCrash, c.assigned, c.floorAtCrash, label)
	assertAllOrNone(t, recovered, ledger.snapshot(), label)
}
