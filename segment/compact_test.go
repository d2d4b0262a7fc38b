package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// compactRecord is what a compaction test wrote at one offset.
type compactRecord struct {
	key       string // "" for a record without a key
	tombstone bool
	body      []byte
}

// keyedBody encodes record index with key (none when empty), as a
// tombstone when asked.
func keyedBody(t testing.TB, index uint64, key string, tombstone bool, size int) []byte {
	t.Helper()
	b := record.Body{Subject: []byte("s"), Tombstone: tombstone}
	if key != "" {
		b.Key = []byte(key)
	}
	if !tombstone {
		b.Payload = bytes.Repeat([]byte{byte(index)}, size)
		b.Payload = append(b.Payload, fmt.Sprint(index)...)
	}
	encoded, err := record.AppendBody(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return encoded
}

// writeKeyed appends n records drawn from rng (keys from a pool of keys,
// a share without a key, a share of tombstones) and waits for them.
func writeKeyed(t testing.TB, l *Log, rng *rand.Rand, n, keys int) map[uint64]compactRecord {
	t.Helper()
	written := map[uint64]compactRecord{}
	var last Ticket
	for range n {
		rec := compactRecord{}
		switch roll := rng.IntN(10); {
		case roll == 0:
		case roll == 1:
			rec.key, rec.tombstone = fmt.Sprint("key-", rng.IntN(keys)), true
		default:
			rec.key = fmt.Sprint("key-", rng.IntN(keys))
		}
		index := l.Committed() + uint64(len(written))
		rec.body = keyedBody(t, index, rec.key, rec.tombstone, rng.IntN(400))
		last = appendBody(t, l, rec.body)
		written[last.First] = rec
	}
	if n > 0 {
		waitTicket(t, last)
	}
	return written
}

// expectedAfter is the model: which offsets survive a compaction of the
// sealed segments below sealedEnd.
func expectedAfter(written map[uint64]compactRecord, sealedEnd, floor uint64, expire bool) map[uint64]bool {
	latest := map[string]uint64{}
	for offset, rec := range written {
		if rec.key != "" && offset >= latest[rec.key] {
			latest[rec.key] = offset
		}
	}
	keep := map[uint64]bool{}
	for offset, rec := range written {
		switch {
		case offset >= sealedEnd || offset >= floor || rec.key == "":
			keep[offset] = true
		case latest[rec.key] != offset:
		case rec.tombstone && expire:
		default:
			keep[offset] = true
		}
	}
	return keep
}

// keptTombstones counts the tombstones below sealedEnd that are their
// key's latest record and stay.
func keptTombstones(written map[uint64]compactRecord, keep map[uint64]bool, sealedEnd uint64) uint64 {
	latest := map[string]uint64{}
	for offset, rec := range written {
		if rec.key != "" && offset >= latest[rec.key] {
			latest[rec.key] = offset
		}
	}
	n := uint64(0)
	for offset, rec := range written {
		if rec.tombstone && offset < sealedEnd && keep[offset] && latest[rec.key] == offset {
			n++
		}
	}
	return n
}

// checkCompacted reads l and checks that exactly the kept offsets are
// there, each with its original body, and that records and gaps account
// for every offset once.
func checkCompacted(t testing.TB, l *Log, written map[uint64]compactRecord, keep map[uint64]bool, label string) {
	t.Helper()
	r := l.NewReader(0)
	defer r.Close()
	next := uint64(0)
	seen := 0
	for {
		entry, err := r.Next()
		if err != nil {
			break
		}
		if entry.Gap != nil {
			if entry.Gap.From != next {
				t.Fatalf("%s: gap from %d, expected position %d", label, entry.Gap.From, next)
			}
			for o := entry.Gap.From; o < entry.Gap.To; o++ {
				if keep[o] {
					t.Fatalf("%s: offset %d should be kept, read a %s gap", label, o, entry.Gap.Reason)
				}
			}
			next = entry.Gap.To
			continue
		}
		if entry.Offset != next {
			t.Fatalf("%s: record at %d, expected position %d", label, entry.Offset, next)
		}
		if !keep[entry.Offset] {
			t.Fatalf("%s: offset %d (key %q) should be gone", label, entry.Offset, written[entry.Offset].key)
		}
		if !bytes.Equal(entry.Body, written[entry.Offset].body) {
			t.Fatalf("%s: offset %d has another body", label, entry.Offset)
		}
		next, seen = entry.Offset+1, seen+1
	}
	if next != l.Committed() || seen != len(keep) {
		t.Fatalf("%s: read up to %d with %d records, want %d and %d", label, next, seen, l.Committed(), len(keep))
	}
}

// TestCompactProperty draws logs of keyed records, tombstones and records
// without a key, compacts them under drawn floors, key-map bounds (so
// several passes run) and tombstone expiry, and checks the model: per key
// only the latest record (or its unexpired tombstone) at its original
// offset, nothing else removed, every offset accounted for; again after
// a second compaction and after a reopen.
func TestCompactProperty(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		seed := uint64(round + 1)
		if env := seedFromEnv(t); env != 0 {
			seed = env
		}
		compactPropertyOnce(t, seed)
		if t.Failed() || seedFromEnv(t) != 0 {
			return
		}
	}
}

func compactPropertyOnce(t *testing.T, seed uint64) {
	rng := newRand(seed)
	mem := vfs.NewMemFS()
	opts := testOptions(seed)
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	written := writeKeyed(t, l, rng, 200+rng.IntN(1500), 1+rng.IntN(60))
	sealedEnd, err := l.SealActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for offset, rec := range writeKeyed(t, l, rng, rng.IntN(50), 10) {
		written[offset] = rec // in the active segment: never compacted
	}
	floor := uint64(math.MaxUint64)
	if rng.IntN(3) == 0 {
		floor = uint64(rng.IntN(int(sealedEnd) + 1))
	}
	expire := rng.IntN(2) == 0
	policy := CompactPolicy{Floor: floor, MaxKeys: []int{1, 3, 1000}[rng.IntN(3)],
		TombstoneExpired: func(uint64, int64) bool { return expire }}
	label := fmt.Sprintf("seed %d (floor %d, expire %v, max keys %d)", seed, floor, expire, policy.MaxKeys)
	result, err := l.Compact(context.Background(), policy)
	if err != nil {
		t.Fatalf("%s: compact: %v", label, err)
	}
	keep := expectedAfter(written, sealedEnd, floor, expire)
	checkCompacted(t, l, written, keep, label)
	if removed := uint64(len(written) - len(keep)); result.RecordsRemoved != removed {
		t.Fatalf("%s: result says %d removed, model %d", label, result.RecordsRemoved, removed)
	}
	if after, _ := l.sealedTotals(); result.BytesAfter != after {
		t.Fatalf("%s: bytes %d before, %d after; the sealed segments hold %d", label, result.BytesBefore, result.BytesAfter, after)
	}
	if kept := keptTombstones(written, keep, sealedEnd); kept > 0 && !result.TombstonesPending {
		t.Fatalf("%s: %d tombstones kept, yet the result says none is pending", label, kept)
	}
	if again, err := l.Compact(context.Background(), policy); err != nil || again.RecordsRemoved != 0 {
		t.Fatalf("%s: second compaction removed %d (%v)", label, again.RecordsRemoved, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDir(t, mem, testOptions(seed))
	defer d.Close()
	l = openLog(t, d)
	checkCompacted(t, l, written, keep, label+" reopened")
	report, err := l.Validate()
	if err != nil || len(report.Events) != 0 || report.KnownGaps != 0 {
		t.Fatalf("%s: validate after compaction: %+v %v", label, report, err)
	}
}

// TestCompactReaderHoldsOldSegment keeps a reader inside a segment while
// compaction replaces it: the reader finishes the old image, and a new
// reader sees the new one.
func TestCompactReaderHoldsOldSegment(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(3)
	opts.MaxOpenSegments = 1
	d := openDir(t, mem, opts)
	defer d.Close()
	l := openLog(t, d)
	rng := newRand(3)
	written := writeKeyed(t, l, rng, 600, 5)
	sealedEnd, err := l.SealActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := l.NewReader(0)
	defer r.Close()
	first, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Compact(context.Background(), CompactPolicy{Floor: math.MaxUint64}); err != nil {
		t.Fatal(err)
	}
	count := 1
	if first.Gap != nil {
		count = 0
	}
	for {
		entry, err := r.Next()
		if err != nil {
			break
		}
		if entry.Gap == nil {
			count++
			if !bytes.Equal(entry.Body, written[entry.Offset].body) {
				t.Fatalf("old reader: offset %d has another body", entry.Offset)
			}
		}
	}
	if count <= len(expectedAfter(written, sealedEnd, math.MaxUint64, false)) {
		t.Fatalf("the reader inside the old segment read %d records: it should have finished the old image", count)
	}
	checkCompacted(t, l, written, expectedAfter(written, sealedEnd, math.MaxUint64, false), "new reader")
}

// TestCompactCrashAtEveryWrite cuts power at write k of a compaction, for
// every k until one completes, keeping a random share of unsynced writes
// (reordered, torn). The recovered log must hold every record the
// compaction keeps, each with its body at its offset, and only records
// that were written; every offset accounted for; no damage; no leftover
// temporary file after a writable open.
func TestCompactCrashAtEveryWrite(t *testing.T) {
	const seed = 11
	base := vfs.NewMemFS()
	d := openDir(t, base, testOptions(seed))
	l := openLog(t, d)
	rng := newRand(seed)
	written := writeKeyed(t, l, rng, 700, 8)
	sealedEnd, err := l.SealActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	keep := expectedAfter(written, sealedEnd, math.MaxUint64, true)
	policy := CompactPolicy{Floor: math.MaxUint64, TombstoneExpired: func(uint64, int64) bool { return true }}
	for k := int64(0); ; k++ {
		crashOpts := vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: rng.Float64(), Reorder: k%2 == 0, Tear: k%3 == 0}
		c := newCrashRig(base.CrashClone(vfs.CrashOptions{}), k, crashOpts)
		completed := false
		if d, err := Open(c.fs, "/data", testOptions(seed)); err == nil {
			if l, err := d.OpenLog(defaultLog); err == nil {
				_, err = l.Compact(context.Background(), policy)
				completed = err == nil && !c.crashed.Load()
			}
			_ = d.Close()
		}
		if completed {
			t.Logf("compaction completed after %d writes; every earlier cut checked", k)
			if k < 5 {
				t.Fatalf("compaction completed after %d writes: the test cut nothing", k)
			}
			return
		}
		if !c.crashed.Load() {
			t.Fatalf("write %d: compaction failed without a crash", k)
		}
		checkCrashImage(t, c.image, written, keep, fmt.Sprintf("crash at write %d", k))
	}
}

// checkCrashImage opens a crash image and checks it holds the old or the
// new image of each segment, nothing torn.
func checkCrashImage(t *testing.T, image *vfs.MemFS, written map[uint64]compactRecord, keep map[uint64]bool, label string) {
	t.Helper()
	d := openDir(t, image, testOptions(1))
	defer d.Close()
	l := openLog(t, d)
	report, err := l.Validate()
	if err != nil || len(report.Events) != 0 {
		t.Fatalf("%s: validate: %+v %v", label, report.Events, err)
	}
	names, err := image.List(l.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if len(name) > len(compactSuffix) && name[len(name)-len(compactSuffix):] == compactSuffix {
			t.Fatalf("%s: %s left after a writable open", label, name)
		}
	}
	entries, gaps := readAll(t, l)
	present := map[uint64]bool{}
	for _, entry := range entries {
		rec, ok := written[entry.Offset]
		if !ok || !bytes.Equal(rec.body, entry.Body) {
			t.Fatalf("%s: offset %d holds a record never written there", label, entry.Offset)
		}
		present[entry.Offset] = true
	}
	for offset := range keep {
		if !present[offset] {
			t.Fatalf("%s: kept offset %d is gone", label, offset)
		}
	}
	for _, gap := range gaps {
		if gap.Reason != GapCompacted {
			t.Fatalf("%s: gap %+v", label, gap)
		}
	}
}

// BenchmarkCompact measures the compaction rate over sealed segments of
// keyed records (1 000 keys, 200-byte payloads): MB/s of segment bytes
// read and rewritten.
func BenchmarkCompact(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		mem := vfs.NewMemFS()
		opts := testOptions(1)
		opts.SegmentSize = 4 << 20
		d := openDir(b, mem, opts)
		l := openLog(b, d)
		var last Ticket
		for i := range 40_000 {
			last = appendBody(b, l, keyedBody(b, uint64(i), fmt.Sprint("key-", i%1000), false, 200))
		}
		waitTicket(b, last)
		if _, err := l.SealActive(context.Background()); err != nil {
			b.Fatal(err)
		}
		before, _ := l.sealedTotals()
		b.SetBytes(before)
		b.StartTimer()
		if _, err := l.Compact(context.Background(), CompactPolicy{Floor: math.MaxUint64}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = d.Close()
		b.StartTimer() // b.Loop must be called with the timer running
	}
}

// TestCompactEncryptedLog compacts a log written under encryption: keys
// are read from the opened records, kept records stay encrypted on disk
// and read back as written, also after a reopen.
func TestCompactEncryptedLog(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(4)
	opts.Encryption = testRing(t)
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	written := writeKeyed(t, l, newRand(4), 500, 6)
	sealedEnd, err := l.SealActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	policy := CompactPolicy{Floor: math.MaxUint64}
	if _, err := l.Compact(context.Background(), policy); err != nil {
		t.Fatal(err)
	}
	keep := expectedAfter(written, sealedEnd, math.MaxUint64, false)
	checkCompacted(t, l, written, keep, "encrypted")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	images, err := mem.List("/data/streams/" + DefaultStream + "/0")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range images {
		image, err := vfs.ReadFile(mem, "/data/streams/"+DefaultStream+"/0/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(image, []byte("key-1")) {
			t.Fatalf("%s holds a key in plain text after compaction", name)
		}
	}
	d = openDir(t, mem, opts)
	defer d.Close()
	checkCompacted(t, openLog(t, d), written, keep, "encrypted, reopened")
}

// TestCompactUnderLoad compacts again and again while producers append,
// readers follow the log from the start and retention deletes the oldest
// segments: every read sees each offset once, in order, either as the
// record written there or as a gap, and no record ever changes. Run it
// with -race.
func TestCompactUnderLoad(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(8)
	opts.MaxOpenSegments = 2
	d := openDir(t, mem, opts)
	defer d.Close()
	l := openLog(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	written := map[uint64][]byte{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		rng := newRand(8)
		for i := 0; ctx.Err() == nil && i < 3000; i++ {
			b := keyedBody(t, uint64(i), fmt.Sprint("key-", rng.IntN(20)), rng.IntN(15) == 0, rng.IntN(300))
			ticket, err := l.Append(ctx, b, record.Checksum(b))
			if err != nil {
				return
			}
			mu.Lock()
			written[ticket.First] = b
			mu.Unlock()
			if i%50 == 49 {
				_ = ticket.Wait(ctx)
			}
		}
	}()
	wg.Add(1)
	go func() { // compactor and retention
		defer wg.Done()
		for round := 0; ctx.Err() == nil && round < 40; round++ {
			if _, err := l.Compact(ctx, CompactPolicy{Floor: math.MaxUint64, MaxKeys: 8,
				TombstoneExpired: func(uint64, int64) bool { return true }}); err != nil {
				t.Errorf("compact: %v", err)
				return
			}
			if round%10 == 9 {
				_, _ = l.DeleteBefore(l.Committed() / 4)
			}
		}
	}()
	for pass := 0; pass < 20; pass++ { // reader
		r := l.NewReader(l.FirstOffset())
		next := r.Offset()
		for {
			entry, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("read at %d: %v", next, err)
			}
			if entry.Gap != nil {
				if entry.Gap.From != next || entry.Gap.To <= next {
					t.Fatalf("gap %+v at position %d", entry.Gap, next)
				}
				next = entry.Gap.To
				continue
			}
			mu.Lock()
			want, ok := written[entry.Offset]
			mu.Unlock()
			if entry.Offset != next || (ok && !bytes.Equal(want, entry.Body)) {
				t.Fatalf("record at %d (position %d) differs from what was written", entry.Offset, next)
			}
			next = entry.Offset + 1
		}
		r.Close()
	}
	cancel()
	wg.Wait()
}
