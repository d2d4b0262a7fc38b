package segment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// errPowerCut fails every operation after the simulated power cut: the
// process is dead from then on; only the crash image matters.
var errPowerCut = fmt.Errorf("%w: power cut", vfs.ErrInjected)

// crashRig runs a workload on a MemFS behind an injector that takes a crash
// image at the crashAt-th mutating operation. It records every ticket the
// log acknowledged; the snapshot of acknowledged records is taken before
// the image, so everything in it was synced before the image was cut.
type crashRig struct {
	mem       *vfs.MemFS
	fs        vfs.FS
	crashAt   int64
	crashOpts vfs.CrashOptions

	ops     atomic.Int64
	crashed atomic.Bool

	mu           sync.Mutex
	acked        map[uint64]uint64 // offset -> record index
	assigned     map[uint64]uint64 // every offset a ticket named
	floor        uint64            // retention asked to delete below this
	ackedAtCrash map[uint64]uint64
	floorAtCrash uint64
	image        *vfs.MemFS

	// inlineProducers is how many of appendWorkload's producers commit
	// with TryCommitBatch (inline when the log is idle) instead of
	// AppendBatch.
	inlineProducers int
	inlineDone      atomic.Int64 // TryCommitBatch tickets done on return
}

func newCrashRig(base *vfs.MemFS, crashAt int64, crashOpts vfs.CrashOptions) *crashRig {
	c := &crashRig{mem: base, crashAt: crashAt, crashOpts: crashOpts,
		acked: map[uint64]uint64{}, assigned: map[uint64]uint64{}}
	c.fs = vfs.Inject(base, vfs.InjectorFunc(c.maybeCrash))
	return c
}

func (c *crashRig) maybeCrash(op vfs.Op) error {
	if c.crashed.Load() {
		return errPowerCut
	}
	if !op.Kind.IsMutation() {
		return nil
	}
	if c.ops.Add(1)-1 != c.crashAt {
		return nil
	}
	// What was acknowledged is read before the image is cut, so every
	// record in it was synced before the cut. The retention floor is read
	// after: another goroutine's deletion can still land in the image
	// while this one clones it (its operation passed the count first),
	// and the floor it deleted up to was raised before that deletion.
	c.mu.Lock()
	acked := maps.Clone(c.acked)
	c.mu.Unlock()
	image := c.mem.CrashClone(c.crashOpts)
	c.mu.Lock()
	c.ackedAtCrash, c.floorAtCrash, c.image = acked, c.floor, image
	c.mu.Unlock()
	c.crashed.Store(true)
	return errPowerCut
}

func (c *crashRig) noteAssigned(ticket Ticket, first uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := uint64(0); i < ticket.Count; i++ {
		c.assigned[ticket.First+i] = first + i
	}
}

func (c *crashRig) noteAcked(ticket Ticket, first uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := uint64(0); i < ticket.Count; i++ {
		c.acked[ticket.First+i] = first + i
	}
}

// bodySize is the size of record index in crash workloads: mostly small,
// sometimes large enough to force rolls of 64 KiB segments.
func bodySize(index uint64) int {
	switch {
	case index%97 == 0:
		return 20_000
	case index%13 == 0:
		return 2_000
	}
	return 16 + int(index*7919%300)
}

// appendWorkload appends records from producers goroutines, each in small
// batches, waiting for every ticket. It stops quietly at the power cut.
func (c *crashRig) appendWorkload(l *Log, producers, perProducer int, retentionEvery int) {
	var wg sync.WaitGroup
	var next atomic.Uint64
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				batch := 1 + i%3
				first := next.Add(uint64(batch)) - uint64(batch)
				bodies, crcs := make([][]byte, batch), make([]uint32, batch)
				for j := range bodies {
					bodies[j] = body(first+uint64(j), bodySize(first+uint64(j)))
					crcs[j] = crc(bodies[j])
				}
				ticket, err := c.append(l, p < c.inlineProducers, bodies, crcs)
				if err != nil {
					return
				}
				c.noteAssigned(ticket, first)
				if ticket.Wait(context.Background()) != nil {
					return
				}
				c.noteAcked(ticket, first)
				if retentionEvery > 0 && i%retentionEvery == retentionEvery-1 {
					c.retain(l)
				}
			}
		}()
	}
	wg.Wait()
}

// append appends a batch, inline when asked (waiting for room when the
// staging buffer is full, as the broker's reactors do).
func (c *crashRig) append(l *Log, inline bool, bodies [][]byte, crcs []uint32) (Ticket, error) {
	if !inline {
		return l.AppendBatch(context.Background(), bodies, crcs)
	}
	for {
		ticket, err := l.TryCommitBatch(bodies, crcs)
		if err != nil && !errors.Is(err, ErrFull) {
			return ticket, err
		}
		if err == nil {
			select {
			case <-ticket.Done():
				c.inlineDone.Add(1)
			default:
			}
			return ticket, nil
		}
		<-l.RoomFor(len(bodies) * 64)
	}
}

// retain deletes segments below a floor half way through what is committed.
func (c *crashRig) retain(l *Log) {
	floor := l.Committed() / 2
	c.mu.Lock()
	c.floor = max(c.floor, floor)
	c.mu.Unlock()
	_, _ = l.DeleteBefore(floor)
}

// verifyImage recovers the crash image and checks the promise: every
// record acknowledged before the cut is present and byte-identical, every
// record present is one that was really appended at that offset, offsets
// are strictly increasing, and recovery reported no data loss.
func verifyImage(t *testing.T, image *vfs.MemFS, opts Options, acked, assigned map[uint64]uint64, floor uint64, label string) *Log {
	t.Helper()
	d, err := Open(image, "/data", opts)
	if err != nil {
		t.Fatalf("%s: reopen after crash: %v", label, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		t.Fatalf("%s: recover log: %v", label, err)
	}
	report := l.Report()
	if report.HasDataLoss() || report.Outcome == OutcomeFrozen {
		t.Fatalf("%s: a crash alone must not lose data; report %+v", label, report)
	}
	entries, gaps := readAll(t, l)
	for _, g := range gaps {
		if g.Reason != GapRetention || g.From != 0 {
			t.Fatalf("%s: unexpected gap %+v (floor %d); segments %s; report %+v", label, g, floor, describeSegments(l), l.Report())
		}
	}
	seen := map[uint64]bool{}
	var previous uint64
	for i, e := range entries {
		if i > 0 && e.Offset <= previous {
			t.Fatalf("%s: offsets not increasing: %d after %d", label, e.Offset, previous)
		}
		previous = e.Offset
		index := payloadIndex(t, e.Body)
		if want, ok := assigned[e.Offset]; ok && want != index {
			t.Fatalf("%s: offset %d holds record %d, was assigned %d", label, e.Offset, index, want)
		}
		if string(e.Body) != string(body(index, bodySize(index))) {
			t.Fatalf("%s: offset %d: body differs from record %d", label, e.Offset, index)
		}
		seen[e.Offset] = true
	}
	first := l.FirstOffset()
	for offset, index := range acked {
		if offset >= first && !seen[offset] {
			t.Fatalf("%s: acknowledged offset %d (record %d) lost; first offset %d, report %+v", label, offset, index, first, report)
		}
		if offset < first && offset >= floor {
			t.Fatalf("%s: acknowledged offset %d below first %d but above the retention floor %d", label, offset, first, floor)
		}
	}
	return l
}

// crashEveryWrite runs the workload with a power cut at mutation k for
// k = 0, 1, 2, … until a run finishes without reaching k.
func crashEveryWrite(t *testing.T, name string, opts Options, keep float64,
	setup func() (*vfs.MemFS, map[uint64]uint64), workload func(c *crashRig, l *Log)) {
	t.Helper()
	crashEveryWriteChecked(t, name, opts, keep, setup, workload, nil)
}

// crashEveryWriteChecked is crashEveryWrite that also runs check on each
// recovered log, when check is not nil.
func crashEveryWriteChecked(t *testing.T, name string, opts Options, keep float64,
	setup func() (*vfs.MemFS, map[uint64]uint64), workload func(c *crashRig, l *Log),
	check func(c *crashRig, recovered *Log, label string)) {
	t.Helper()
	for k := int64(0); ; k++ {
		crashOpts := vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: keep, Reorder: keep > 0, Tear: keep > 0}
		base, preAcked := setup()
		c := newCrashRig(base, k, crashOpts)
		maps.Copy(c.acked, preAcked)
		maps.Copy(c.assigned, preAcked)
		opts.Random = seededRandom(uint64(k))
		d, err := Open(c.fs, "/data", opts)
		if err == nil {
			if l, err := d.OpenLog(defaultLog); err == nil {
				workload(c, l)
			}
			_ = d.Close()
		}
		if !c.crashed.Load() {
			t.Logf("%s: %d crash points checked", name, k)
			return
		}
		verifyOpts := testOptions(uint64(k))
		verifyOpts.Encryption = opts.Encryption
		label := fmt.Sprintf("%s crash at op %d", name, k)
		recovered := verifyImage(t, c.image, verifyOpts, c.ackedAtCrash, c.assigned, c.floorAtCrash, label)
		if check != nil {
			check(c, recovered, label)
		}
	}
}

func emptyFS() (*vfs.MemFS, map[uint64]uint64) { return vfs.NewMemFS(), nil }

func TestCrashAppendAndRoll(t *testing.T) {
	for _, keep := range []float64{0, 0.5} {
		t.Run(fmt.Sprintf("keep-unsynced-%v", keep), func(t *testing.T) {
			crashEveryWrite(t, "append", testOptions(0), keep, emptyFS, func(c *crashRig, l *Log) {
				c.appendWorkload(l, 2, 60, 0)
			})
		})
	}
}

// TestCrashInlineCommit cuts power at every write while one producer
// commits inline (TryCommitBatch: write and fdatasync on its own goroutine
// when the log is idle) and another appends through the appender and the
// committer, so both paths and their hand-over of the write token are
// crossed by the cut.
func TestCrashInlineCommit(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(0)
			opts.IOMode = mode
			crashEveryWrite(t, "inline", opts, 0.5, emptyFS, func(c *crashRig, l *Log) {
				c.inlineProducers = 1
				c.appendWorkload(l, 2, 40, 0)
				if !c.crashed.Load() && c.inlineDone.Load() == 0 {
					t.Fatal("no batch was committed inline: the test does not cross the inline path")
				}
			})
		})
	}
}

// TestCrashCommitLinger cuts power at every write while four producers
// append under a commit linger, one of them through TryCommitBatch, so
// syncs are held back and released by the record count, by the timer and
// by the inline path giving way: an acknowledgement must still never
// precede the fdatasync that covers it.
func TestCrashCommitLinger(t *testing.T) {
	opts := testOptions(0)
	opts.CommitLinger = 300 * time.Microsecond
	var held uint64
	crashEveryWrite(t, "linger", opts, 0.5, emptyFS, func(c *crashRig, l *Log) {
		c.inlineProducers = 1
		c.appendWorkload(l, 4, 20, 0)
		held += l.dir.Stats().Held
	})
	if held == 0 {
		t.Fatal("the linger never held a sync: the test does not cross the linger path")
	}
}

func TestCrashDirectIO(t *testing.T) {
	opts := testOptions(0)
	opts.IOMode = IODirect
	crashEveryWrite(t, "direct", opts, 0.5, emptyFS, func(c *crashRig, l *Log) {
		c.appendWorkload(l, 2, 40, 0)
	})
}

func TestCrashRetentionDelete(t *testing.T) {
	crashEveryWrite(t, "retention", testOptions(0), 0.3, emptyFS, func(c *crashRig, l *Log) {
		c.appendWorkload(l, 1, 150, 25)
	})
}

func TestCrashDuringRecovery(t *testing.T) {
	// An image whose recovery has work to do: a torn tail after unsynced
	// batches. Every write recovery makes is a crash point, and each image
	// must recover to a log that still holds every acknowledged record.
	base, acked := tornImage(t)
	crashEveryWrite(t, "recovery", testOptions(0), 0.5, func() (*vfs.MemFS, map[uint64]uint64) {
		return base.CrashClone(vfs.CrashOptions{}), acked
	}, func(c *crashRig, l *Log) {
		c.appendWorkload(l, 1, 10, 0)
	})
}

// tornImage builds a data directory as a power cut left it: acknowledged
// records, then unsynced batches kept partly and torn.
func tornImage(t *testing.T) (*vfs.MemFS, map[uint64]uint64) {
	t.Helper()
	c := newCrashRig(vfs.NewMemFS(), 1<<40, vfs.CrashOptions{})
	opts := testOptions(99)
	d := openDir(t, c.fs, opts)
	l := openLog(t, d)
	c.appendWorkload(l, 1, 80, 0)
	// Unsynced tail: stop the committer from running by freezing nothing;
	// instead take the image while batches are still in flight.
	for i := uint64(1000); i < 1040; i++ {
		b := body(i, bodySize(i))
		if _, err := l.Append(context.Background(), b, crc(b)); err != nil {
			t.Fatal(err)
		}
	}
	image := c.mem.CrashClone(vfs.CrashOptions{Seed: 7, KeepUnsynced: 0.7, Reorder: true, Tear: true})
	_ = d.Close()
	return image, c.acked
}

func TestPowerCutSeeded(t *testing.T) {
	seeds := 200
	if v := os.Getenv("IRONBUS_POWERCUT_SEEDS"); v != "" {
		seeds, _ = strconv.Atoi(v)
	}
	if s := seedFromEnv(t); s != 0 {
		powerCutOnce(t, s)
		return
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		powerCutOnce(t, seed)
		if t.Failed() {
			return
		}
	}
}

// powerCutOnce runs one randomized workload and cuts power at a random
// mutation, keeping a random part of the unsynced writes, reordered and
// torn. The seed is printed so a failure replays with IRONBUS_SEED.
func powerCutOnce(t *testing.T, seed uint64) {
	rng := newRand(seed)
	opts := testOptions(seed)
	opts.StagingBytes = 4096 << rng.IntN(5)
	if rng.IntN(3) == 0 {
		opts.IOMode = IODirect
	}
	opts.Preallocation = Preallocation(rng.IntN(3))
	crashOpts := vfs.CrashOptions{Seed: seed, KeepUnsynced: rng.Float64(), Reorder: rng.IntN(2) == 0,
		Tear: rng.IntN(2) == 0}
	c := newCrashRig(vfs.NewMemFS(), int64(rng.IntN(400)), crashOpts)
	producers, records, retention := 1+rng.IntN(4), 20+rng.IntN(100), 0
	if rng.IntN(4) == 0 {
		retention = 10 + rng.IntN(20)
	}
	label := fmt.Sprintf("power cut seed %d (replay: IRONBUS_SEED=%d go test ./segment -run TestPowerCutSeeded)", seed, seed)
	d, err := Open(c.fs, "/data", opts)
	if err == nil {
		if l, err := d.OpenLog(defaultLog); err == nil {
			c.appendWorkload(l, producers, records, retention)
		}
		_ = d.Close()
	}
	if !c.crashed.Load() {
		return
	}
	verifyImage(t, c.image, testOptions(seed), c.ackedAtCrash, c.assigned, c.floorAtCrash, label)
}

func TestCrashImageIsStable(t *testing.T) {
	// Recovering the same image twice yields the same log (recovery is a
	// function of the bytes on disk).
	image, acked := tornImage(t)
	first := image.CrashClone(vfs.CrashOptions{})
	l1 := verifyImage(t, first, testOptions(1), acked, acked, 0, "first")
	e1, _ := readAll(t, l1)
	second := image.CrashClone(vfs.CrashOptions{})
	l2 := verifyImage(t, second, testOptions(1), acked, acked, 0, "second")
	e2, _ := readAll(t, l2)
	if len(e1) != len(e2) {
		t.Fatalf("recovered %d then %d records from the same image", len(e1), len(e2))
	}
	for i := range e1 {
		if e1[i].Offset != e2[i].Offset || string(e1[i].Body) != string(e2[i].Body) {
			t.Fatalf("record %d differs between recoveries", i)
		}
	}
}

func describeSegments(l *Log) string {
	var out string
	for _, seg := range l.segments.Load().segments {
		st := seg.stats()
		out += fmt.Sprintf("[%s base=%d next=%d records=%d sealed=%v bytes=%d] ", st.Name, st.Base, st.Next, st.Records, st.Sealed, st.Bytes)
	}
	return out
}

func TestCrashKillThenPowerCut(t *testing.T) {
	// kill -9 leaves unsynced batches in the page cache. Recovery must not
	// serve them as committed until they are durable: a power cut after
	// the restart must not take back anything the restarted log exposed.
	for seed := uint64(1); seed <= 30; seed++ {
		c := newCrashRig(vfs.NewMemFS(), 1<<40, vfs.CrashOptions{})
		opts := testOptions(seed)
		d := openDir(t, c.fs, opts)
		l := openLog(t, d)
		c.appendWorkload(l, 2, 30, 0)
		for i := uint64(5000); i < 5030; i++ {
			b := body(i, bodySize(i))
			if _, err := l.Append(context.Background(), b, crc(b)); err != nil {
				t.Fatal(err)
			}
		}
		killed := c.mem.ProcessCrashClone()
		_ = d.Close()

		restarted := verifyImage(t, killed, testOptions(seed), c.acked, c.assigned, 0, fmt.Sprintf("seed %d after kill", seed))
		visible := map[uint64]uint64{}
		entries, _ := readAll(t, restarted)
		for _, e := range entries {
			visible[e.Offset] = payloadIndex(t, e.Body)
		}
		image := killed.CrashClone(vfs.CrashOptions{Seed: seed})
		_ = restarted.dir.Close()
		verifyImage(t, image, testOptions(seed), visible, visible, 0, fmt.Sprintf("seed %d power cut after restart", seed))
	}
}
