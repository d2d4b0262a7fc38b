package broker

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// produceSized appends one record of size payload bytes and returns the
// engine's answer: nil once it is durable, else the no-space error.
func produceSized(t *testing.T, b *Broker, stream string, size int) error {
	t.Helper()
	_, err := appendRecord(t, partitionOf(t, b, stream, 0), make([]byte, size))
	if err != nil && !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a write at the budget failed with %v; want no space", err)
	}
	return err
}

func budgetConfig(clocks retentionClocks, budget int64, policy DiskFullPolicy) Config {
	return Config{Storage: segment.Options{SegmentSize: segment.MinSegmentSize, Clock: clocks.wall}, Clock: clocks.mono,
		RetentionCheck: time.Hour,
		Retention:      RetentionConfig{DiskBudget: budget, DiskHeadroom: budget / 8, DiskFull: policy}}
}

// TestDiskBudgetDropNewResumes: at the budget minus the headroom a
// producer gets the typed, retryable no-space error with a retry hint;
// the group keeps reading and committing, and once retention frees what
// it committed, writes resume by themselves.
func TestDiskBudgetDropNewResumes(t *testing.T) {
	clocks := newClocks()
	b := openTestBroker(t, budgetConfig(clocks, 1<<20, DropNew))
	group := streamingGroup(t, b, "orders", "readers", 0)
	var refused error
	stored := 0
	for id := 1; id < 1000 && refused == nil; id++ {
		if refused = produceSized(t, b, "orders", 4<<10); refused == nil {
			stored++
		}
	}
	var retry *RetryableError
	if !errors.As(refused, &retry) || retry.RetryAfter == 0 {
		t.Fatalf("after %d records the budget answered %v; want a retryable no-space error with a retry hint", stored, refused)
	}
	used, err := b.measureDisk(b.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if stats := b.RetentionStats(); stats.WritesRefused == 0 || used > stats.BudgetLimit-stats.BudgetHeadroom {
		t.Fatalf("%d bytes used, stats %+v: want refusals and usage within the budget minus the headroom", used, stats)
	}
	deliveries, _, err := group.Read(0, 10, 1<<20, nil)
	if err != nil || len(deliveries) != 10 {
		t.Fatalf("reading at the budget: %d records, %v", len(deliveries), err)
	}
	commitGroup(t, group, streamLog(t, b, "orders").Committed())
	b.retentionPass()
	if err := produceSized(t, b, "orders", 4<<10); err != nil {
		t.Fatalf("after the group committed and retention ran, a write still got %v", err)
	}
	if b.RetentionStats().SegmentsDeleted["budget"] == 0 {
		t.Fatal("no segment counted as deleted for the budget")
	}
	t.Logf("%d records of 4 KiB fit a 1 MiB budget with 128 KiB headroom", stored)
}

// TestDiskBudgetDropOldest: under drop-oldest the oldest sealed segments
// go to make room; the data directory stays within the budget.
func TestDiskBudgetDropOldest(t *testing.T) {
	clocks := newClocks()
	budget := int64(1 << 20)
	b := openTestBroker(t, budgetConfig(clocks, budget, DropOldestSegments))
	refusals := 0
	for stored := 0; stored < 600; {
		if err := produceSized(t, b, "logs", 4<<10); err != nil {
			refusals++
			if refusals > 2000 {
				t.Fatalf("writes refused %d times: drop-oldest is not making room", refusals)
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		stored++
	}
	b.retentionPass()
	used, err := b.measureDisk(b.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if used > budget {
		t.Fatalf("the data directory holds %d bytes, budget %d", used, budget)
	}
	l := streamLog(t, b, "logs")
	if l.FirstOffset() == 0 || b.RetentionStats().SegmentsDeleted["budget"] == 0 {
		t.Fatalf("nothing was deleted for the budget (first offset %d)", l.FirstOffset())
	}
	checkWholeSegments(t, l)
	t.Logf("2.4 MiB written into a 1 MiB budget: %d bytes used, %d transient refusals", used, refusals)
}

// TestCrashDuringRetentionDelete: a power cut before each segment removal
// (with a random half of the unsynced changes kept) recovers a log that
// still ends at every acknowledged record and starts at a segment base,
// with no hole in between.
func TestCrashDuringRetentionDelete(t *testing.T) {
	for k := int32(1); ; k++ {
		mem := vfs.NewMemFS()
		var removes atomic.Int32
		var crashed *vfs.MemFS
		fsys := vfs.Inject(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if op.Kind == vfs.OpRemove && strings.HasSuffix(op.Path, ".seg") && removes.Add(1) == k {
				crashed = mem.CrashClone(vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5})
			}
			return nil
		}))
		clocks := newClocks()
		b := openRetentionBroker(t, Config{DataDir: "/data", FS: fsys}, clocks)
		l := streamLog(t, b, "s")
		fillLog(t, l, 100)
		committed := l.Committed()
		if err := b.SetRetention(RetentionConfig{Stream: StreamRetention{MaxRecords: 10}}); err != nil {
			t.Fatal(err)
		}
		b.retentionPass()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if crashed == nil {
			if k < 3 {
				t.Fatalf("only %d removals happened; the test needs several", k-1)
			}
			return
		}
		reopened := openRetentionBroker(t, Config{DataDir: "/data", FS: crashed}, newClocks())
		l = streamLog(t, reopened, "s")
		if l.Committed() != committed {
			t.Fatalf("crash before removal %d: the log ends at %d, want %d", k, l.Committed(), committed)
		}
		checkWholeSegments(t, l)
		checkContiguous(t, l)
		if err := reopened.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkContiguous reads the log from its first offset to its end and
// fails on any gap or out-of-order record.
func checkContiguous(t *testing.T, l *segment.Log) {
	t.Helper()
	reader := l.NewReader(l.FirstOffset())
	defer reader.Close()
	want := l.FirstOffset()
	for {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || entry.Gap != nil || entry.Offset != want {
			t.Fatalf("reading at %d: entry %+v, %v", want, entry, err)
		}
		want++
	}
	if want != l.Committed() {
		t.Fatalf("read up to %d, the log ends at %d", want, l.Committed())
	}
}
