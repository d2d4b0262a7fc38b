package segment

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestRelaxedDurabilityNeedsConsent(t *testing.T) {
	opts := testOptions(1)
	opts.Durability = DurabilityInterval
	if _, err := Open(vfs.NewMemFS(), "/data", opts); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("interval durability without consent: %v", err)
	}
}

func TestIntervalDurabilityAcksBeforeSync(t *testing.T) {
	for _, durability := range []Durability{DurabilityInterval, DurabilityNone} {
		t.Run(durability.String(), func(t *testing.T) {
			syncs, counter := countOps(vfs.OpSyncData)
			opts := testOptions(2)
			opts.Durability, opts.AcceptRelaxedDurability = durability, true
			opts.SyncInterval = time.Hour
			d := openDir(t, vfs.Inject(vfs.NewMemFS(), counter), opts)
			defer d.Close()
			l := openLog(t, d)
			waitTicket(t, appendBody(t, l, body(100, 50))) // creates the segment (synced)
			before := syncs.Load()
			for i := uint64(0); i < 20; i++ {
				waitTicket(t, appendBody(t, l, body(i, 50)))
			}
			if got := syncs.Load() - before; got != 0 {
				t.Fatalf("%d fdatasyncs on the ack path under %s", got, durability)
			}
			if entries, _ := readAll(t, l); len(entries) != 21 {
				t.Fatalf("read %d records", len(entries))
			}
		})
	}
}

func TestSyncDurabilityGroupsCommits(t *testing.T) {
	syncs, counter := countOps(vfs.OpSyncData)
	opts := testOptions(3)
	opts.SegmentSize = 8 << 20
	d := openDir(t, vfs.Inject(vfs.NewMemFS(), counter), opts)
	defer d.Close()
	l := openLog(t, d)
	var tickets []Ticket
	for i := uint64(0); i < 2000; i++ {
		tickets = append(tickets, appendBody(t, l, body(i, 50)))
	}
	for _, ticket := range tickets {
		waitTicket(t, ticket)
	}
	if got := syncs.Load(); got >= 1000 {
		t.Fatalf("%d fdatasyncs for 2000 pipelined appends: no group commit", got)
	}
}

func TestTryAppendReportsFull(t *testing.T) {
	gate := &vfs.Toggle{Match: vfs.KindIs(vfs.OpWrite)}
	// blocked has room for the one signal, so the first batch write is
	// held whether or not the test is already waiting for it (a
	// non-blocking send let it through when the appender was faster, and
	// the test then waited forever).
	blocked := make(chan struct{}, 1)
	release := make(chan struct{})
	var held atomic.Bool
	hold := vfs.InjectorFunc(func(op vfs.Op) error {
		// The first batch write: into the log directory, not the 4 KiB
		// header block.
		if op.Kind == vfs.OpWrite && gate.MaybeFail(op) == nil && isLogFile(op.Path) && op.Length != format.SegmentDataStart &&
			held.CompareAndSwap(false, true) {
			blocked <- struct{}{}
			<-release
		}
		return nil
	})
	opts := testOptions(4)
	opts.StagingBytes = 4096
	d := openDir(t, vfs.Inject(vfs.NewMemFS(), hold), opts)
	defer d.Close()
	l := openLog(t, d)
	first := appendBody(t, l, body(0, 100))
	<-blocked // the appender is stuck writing the first batch
	var err error
	for i := uint64(1); i < 100 && err == nil; i++ {
		_, err = l.TryAppend(body(i, 100), crc(body(i, 100)))
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("TryAppend with a full staging buffer: %v", err)
	}
	close(release)
	waitTicket(t, first)
}

func isLogFile(name string) bool { return strings.Contains(name, "/"+streamsDirName+"/") }

func TestRecordTooLargeAndBadNames(t *testing.T) {
	opts := testOptions(5)
	opts.MaxRecordBytes = 1000
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	if _, err := l.Append(context.Background(), make([]byte, 1001), 0); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
	for _, name := range []string{"", ".hidden", "a/b", "x y", string(make([]byte, 129))} {
		if _, err := d.OpenLog(LogID{Stream: name}); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("stream name %q: %v", name, err)
		}
	}
}

func TestSecondWriterIsLockedOut(t *testing.T) {
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(6))
	defer d.Close()
	if _, err := Open(mem, "/data", testOptions(6)); !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v", err)
	}
	ro := testOptions(6)
	ro.ReadOnly = true
	if _, err := Open(mem, "/data", ro); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader while a writer holds the lock: %v", err)
	}
}

func TestReadOnlyOpenChangesNothing(t *testing.T) {
	mem := buildSealedLog(t, 5)
	// Leave a torn tail for recovery to want to truncate.
	l := path.Join("/data", streamsDirName, DefaultStream, "0", segmentFileName(5))
	f, _ := mem.OpenFile(l, vfs.ReadWrite)
	_, _ = f.WriteAt([]byte("IR garbage that recovery would truncate"), 70_000)
	_ = f.Close()
	before := snapshotFiles(t, mem, "/data")
	opts := testOptions(7)
	opts.ReadOnly = true
	d := openDir(t, mem, opts)
	log := openLog(t, d)
	if _, err := log.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(context.Background(), body(1, 1), 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append on a read-only open: %v", err)
	}
	_ = d.Close()
	after := snapshotFiles(t, mem, "/data")
	if len(before) != len(after) {
		t.Fatalf("read-only open changed the file set: %d -> %d", len(before), len(after))
	}
	for name, data := range before {
		if after[name] != data {
			t.Fatalf("read-only open changed %s", name)
		}
	}
	if _, err := Open(vfs.NewMemFS(), "/missing", opts); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only open of a missing directory: %v", err)
	}
}

func TestReaderOutlivesRetention(t *testing.T) {
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(8))
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	for i := uint64(0); i < 600; i++ {
		last = appendBody(t, l, body(i, 400))
	}
	waitTicket(t, last)
	r := l.NewReader(0)
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	deleted, err := l.DeleteBefore(l.Committed() - 1)
	if err != nil || deleted == 0 {
		t.Fatalf("DeleteBefore: %d %v", deleted, err)
	}
	// The reader still holds its segment: it finishes it, then reports the
	// gap retention left behind.
	var sawGap bool
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reader after retention: %v", err)
		}
		if e.Gap != nil {
			sawGap = true
			continue
		}
		if payloadIndex(t, e.Body) != e.Offset {
			t.Fatalf("wrong record at %d", e.Offset)
		}
	}
	if !sawGap {
		t.Fatal("no gap after retention removed segments under the reader")
	}
	if first := l.FirstOffset(); first == 0 {
		t.Fatal("first offset did not move")
	}
}

func TestOffsetForTimeWithSteppingClock(t *testing.T) {
	clock := &fixedClock{now: time.Unix(2_000_000_000, 0)}
	opts := testOptions(9)
	opts.Clock = clock
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	stamps := []int64{}
	for i := uint64(0); i < 900; i++ {
		now := clock.Now()
		if i == 300 {
			now = time.Unix(1_000_000_000, 0) // no RTC: the clock jumps back years
		}
		if i == 600 {
			now = time.Unix(3_000_000_000, 0)
		}
		now = now.Add(time.Millisecond)
		clock.Set(now)
		stamps = append(stamps, now.UnixNano())
		last = appendBody(t, l, body(i, 300))
	}
	waitTicket(t, last)
	for _, probe := range []int64{stamps[0], stamps[150], stamps[299] + 1, stamps[310], stamps[650], stamps[899] + 1} {
		want := uint64(len(stamps))
		for i, ts := range stamps {
			if ts >= probe {
				want = uint64(i)
				break
			}
		}
		got, err := l.OffsetForTime(probe)
		if err != nil || got != want {
			t.Fatalf("OffsetForTime(%d) = %d, %v; want %d", probe, got, err, want)
		}
	}
}

func TestRecoveryReadsOnlyTheTail(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(10)
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	var last Ticket
	for i := uint64(0); i < 3000; i++ {
		last = appendBody(t, l, body(i, 500))
	}
	waitTicket(t, last)
	segments := len(l.segments.Load().segments)
	_ = d.Close()
	var readBytes atomic.Int64
	counter := vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead {
			readBytes.Add(int64(op.Length))
		}
		return nil
	})
	d = openDir(t, vfs.Inject(mem, counter), opts)
	defer d.Close()
	openLog(t, d)
	// Headers and footers of the sealed segments plus the active segment
	// (mapped, so not counted as reads): far below the log size.
	if got, limit := readBytes.Load(), int64(segments*(format.SegmentHeaderSize+format.FooterFrameSize)+4096); got > limit {
		t.Fatalf("recovery of %d segments read %d bytes, want at most %d", segments, got, limit)
	}
}

func TestWaitCommittedFollowsTheLog(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(11))
	defer d.Close()
	l := openLog(t, d)
	got := make(chan uint64, 1)
	go func() {
		next, _ := l.WaitCommitted(context.Background(), 0)
		got <- next
	}()
	appendBody(t, l, body(0, 10))
	select {
	case next := <-got:
		if next < 1 {
			t.Fatalf("woke with committed %d", next)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitCommitted never woke")
	}
}

func TestOpenSealedSegmentsAreBounded(t *testing.T) {
	opts := testOptions(15)
	opts.MaxOpenSegments = 2
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	for i := uint64(0); i < 1500; i++ {
		last = appendBody(t, l, body(i, 400))
	}
	waitTicket(t, last)
	for pass := 0; pass < 2; pass++ { // the second pass reopens evicted segments
		entries, gaps := readAll(t, l)
		if len(entries) != 1500 || len(gaps) != 0 {
			t.Fatalf("pass %d: %d records, %d gaps", pass, len(entries), len(gaps))
		}
		mapped := 0
		for _, seg := range l.segments.Load().segments {
			seg.mu.Lock()
			if seg.mu.mapping != nil {
				mapped++
			}
			seg.mu.Unlock()
		}
		if mapped > opts.MaxOpenSegments {
			t.Fatalf("pass %d: %d sealed segments mapped, limit %d", pass, mapped, opts.MaxOpenSegments)
		}
	}
	if got, err := l.OffsetForTime(0); err != nil || got != 0 {
		t.Fatalf("seek after eviction: %d %v", got, err)
	}
}

// countOps returns an injector that fails nothing and counts operations of
// kind, and the counter it adds to.
func countOps(kind vfs.OpKind) (*atomic.Int64, vfs.Injector) {
	var count atomic.Int64
	return &count, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == kind {
			count.Add(1)
		}
		return nil
	})
}
