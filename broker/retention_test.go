package broker

import (
	"math"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment"
)

// TestPlanLogWholeSealedSegmentsOnly: the planner never touches the
// newest or an unsealed segment, and consumer-safe never crosses the
// floor while drop-oldest does.
func TestPlanLogWholeSealedSegmentsOnly(t *testing.T) {
	segs := []segment.SegmentInfo{
		{Base: 0, Next: 10, Records: 10, Bytes: 100, Sealed: true},
		{Base: 10, Next: 20, Records: 10, Bytes: 100, Sealed: true},
		{Base: 20, Next: 30, Records: 10, Bytes: 100, Sealed: true},
		{Base: 30, Next: 35, Records: 5, Bytes: 50},
	}
	never := func(int) bool { return false }
	always := func(int) bool { return true }
	cases := []struct {
		name   string
		bounds StreamRetention
		floor  uint64
		age    func(int) bool
		drop   int
		wanted int
	}{
		{"bytes", StreamRetention{MaxBytes: 160}, math.MaxUint64, never, 2, 2},
		{"records", StreamRetention{MaxRecords: 5}, math.MaxUint64, never, 3, 3},
		{"age never deletes the newest", StreamRetention{MaxAge: time.Hour}, math.MaxUint64, always, 3, 3},
		{"consumer-safe stops at the floor", StreamRetention{MaxRecords: 5}, 15, never, 1, 3},
		{"floor inside the first segment keeps all", StreamRetention{MaxBytes: 1}, 5, never, 0, 3},
		{"drop-oldest crosses the floor", StreamRetention{MaxRecords: 5, Policy: DropOldest}, 0, never, 3, 3},
		{"unbounded", StreamRetention{}, math.MaxUint64, always, 0, 0},
	}
	for _, c := range cases {
		plan := planLog(segs, c.bounds, c.floor, c.age)
		if plan.drop != c.drop || plan.wanted != c.wanted {
			t.Errorf("%s: drop %d of wanted %d; want %d of %d", c.name, plan.drop, plan.wanted, c.drop, c.wanted)
		}
	}
	unsealed := append([]segment.SegmentInfo(nil), segs...)
	unsealed[1].Sealed = false
	if plan := planLog(unsealed, StreamRetention{MaxRecords: 1}, math.MaxUint64, never); plan.drop != 1 {
		t.Errorf("an unsealed segment was planned for deletion: drop %d", plan.drop)
	}
}

// TestBytesBoundKeepsTheSlowestGroup: under consumer-safe a bytes bound
// deletes whole sealed segments, never one holding an offset the slowest
// group has not committed; once it commits, the bound is met.
func TestBytesBoundKeepsTheSlowestGroup(t *testing.T) {
	bound := int64(3 * segment.MinSegmentSize)
	b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxBytes: bound}}}, newClocks())
	l := streamLog(t, b, "orders")
	// Groups exist before the records: every seal starts a pass.
	fast := streamingGroup(t, b, "orders", "fast", 0)
	slow := streamingGroup(t, b, "orders", "slow", 0)
	fillLog(t, l, 150)
	commitGroup(t, fast, l.Committed())
	commitGroup(t, slow, 40)
	b.retentionPass()
	segs := checkWholeSegments(t, l)
	if l.FirstOffset() > 40 || segs[0].Next <= 40 {
		t.Fatalf("the log starts at %d (first segment ends at %d): the slow group's uncommitted record 40 must stay first", l.FirstOffset(), segs[0].Next)
	}
	if l.FirstOffset() == 0 {
		t.Fatal("nothing below the slow group was deleted")
	}
	if stats := b.RetentionStats(); stats.HeldBack == 0 || stats.SegmentsDeleted["bytes"] == 0 {
		t.Fatalf("stats %+v: want segments deleted by bytes and a held-back count", stats)
	}
	commitGroup(t, slow, l.Committed())
	b.retentionPass()
	segs = checkWholeSegments(t, l)
	if bytes, _ := logBytes(segs); bytes > bound {
		t.Fatalf("after every group committed the log holds %d bytes, bound %d", bytes, bound)
	}
}

// TestRecordsBoundWithoutGroups: a stream no group reads is bounded by
// records alone.
func TestRecordsBoundWithoutGroups(t *testing.T) {
	b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxRecords: 40}}}, newClocks())
	l := streamLog(t, b, "metrics")
	fillLog(t, l, 120)
	b.retentionPass()
	_, records := logBytes(checkWholeSegments(t, l))
	if records > 40 || records < 20 {
		t.Fatalf("%d records kept, want at most 40 and not much fewer (whole segments only)", records)
	}
	if got := b.RetentionStats().SegmentsDeleted["records"]; got == 0 {
		t.Fatal("no deletion counted by records")
	}
}

// TestDropOldestGivesAGapAdvisory: drop-oldest deletes below a group's
// committed position; the group's next fetch reports one retention gap
// and continues from the new first record.
func TestDropOldestGivesAGapAdvisory(t *testing.T) {
	b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxRecords: 30, Policy: DropOldest}}}, newClocks())
	l := streamLog(t, b, "events")
	g := streamingGroup(t, b, "events", "late", 0)
	fillLog(t, l, 100)
	b.retentionPass()
	first := l.FirstOffset()
	if first == 0 {
		t.Fatal("drop-oldest deleted nothing")
	}
	deliveries, gaps, err := g.Read(g.Committed(), 5, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) != 1 || gaps[0].From != 0 || gaps[0].To != first || gaps[0].Reason != segment.GapRetention {
		t.Fatalf("gaps %+v: want one retention gap 0..%d", gaps, first)
	}
	if len(deliveries) == 0 || deliveries[0].Offset != first {
		t.Fatalf("after the gap the group read from %v, want %d", deliveries, first)
	}
	if dropped := b.RetentionStats().RecordsDropped; dropped != first {
		t.Fatalf("%d records counted as dropped, want %d", dropped, first)
	}
}

// TestExpiredGroupStopsPinning: an idle group is warned at half the
// expiry, keeps pinning until the expiry, then stops.
func TestExpiredGroupStopsPinning(t *testing.T) {
	clocks := newClocks()
	b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxRecords: 30},
		GroupExpiry: time.Hour}}, clocks)
	l := streamLog(t, b, "jobs")
	streamingGroup(t, b, "jobs", "idle", 0)
	fillLog(t, l, 100)
	b.retentionPass()
	if l.FirstOffset() != 0 {
		t.Fatal("a fresh group's records were deleted")
	}
	clocks.mono.advance(31 * time.Minute)
	b.retentionPass()
	stats := b.RetentionStats()
	if l.FirstOffset() != 0 || stats.GroupExpiryWarnings != 1 || stats.GroupsExpired != 0 {
		t.Fatalf("at half the expiry: first %d, stats %+v; want a warning and nothing deleted", l.FirstOffset(), stats)
	}
	clocks.mono.advance(30 * time.Minute)
	b.retentionPass()
	stats = b.RetentionStats()
	if l.FirstOffset() == 0 || stats.GroupsExpired != 1 {
		t.Fatalf("after the expiry: first %d, stats %+v; want the group expired and the bound applied", l.FirstOffset(), stats)
	}
}

// TestAgeSurvivesWallClockSteps: a wall clock stepping ten years forward
// or back deletes nothing before the monotonic clock has run the age; a
// clock stepped back does not keep records much past it either.
func TestAgeSurvivesWallClockSteps(t *testing.T) {
	for _, step := range []time.Duration{10 * 365 * 24 * time.Hour, -10 * 365 * 24 * time.Hour} {
		clocks := newClocks()
		b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxAge: time.Hour}}}, clocks)
		l := streamLog(t, b, "telemetry")
		fillLog(t, l, 100)
		b.retentionPass() // dates the sealed segments
		clocks.wall.advance(step)
		clocks.mono.advance(time.Minute)
		b.retentionPass()
		if l.FirstOffset() != 0 {
			t.Fatalf("step %v: records a minute old were deleted (the log starts at %d)", step, l.FirstOffset())
		}
		if b.RetentionStats().WallClockSteps != 1 {
			t.Fatalf("step %v: %d discontinuities counted, want 1", step, b.RetentionStats().WallClockSteps)
		}
		clocks.mono.advance(58 * time.Minute)
		clocks.wall.advance(58 * time.Minute)
		b.retentionPass()
		if l.FirstOffset() != 0 {
			t.Fatalf("step %v: records 59 minutes old were deleted", step)
		}
		clocks.mono.advance(2 * time.Minute)
		clocks.wall.advance(2 * time.Minute)
		b.retentionPass()
		if l.FirstOffset() == 0 {
			t.Fatalf("step %v: records past their age by the monotonic clock were kept", step)
		}
		checkWholeSegments(t, l)
	}
}

// TestWallClockHighWaterSurvivesRestart: the high-water is persisted, so
// a restart with the clock reset years back still knows how late it was
// and counts the step.
func TestWallClockHighWaterSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clocks := newClocks()
	clocks.wall.advance(24 * time.Hour)
	b := openRetentionBroker(t, Config{DataDir: dir}, clocks)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	clocks.wall.set(time.Date(1970, 1, 1, 0, 0, 10, 0, time.UTC))
	b = openRetentionBroker(t, Config{DataDir: dir}, retentionClocks{mono: &manualMonotonic{}, wall: clocks.wall})
	stats := b.RetentionStats()
	if want := testEpoch.Add(24 * time.Hour); stats.WallClockHighWater.Before(want) {
		t.Fatalf("high-water after a restart is %v, want at least %v", stats.WallClockHighWater, want)
	}
	if stats.WallClockSteps != 1 {
		t.Fatalf("%d steps counted at boot, want 1", stats.WallClockSteps)
	}
}

// TestDeadLetterBounds: a dead-letter queue obeys its bytes bound and its
// age (by the same monotonic-safe rule); the newest segment stays.
func TestDeadLetterBounds(t *testing.T) {
	clocks := newClocks()
	bound := int64(2 * segment.MinSegmentSize)
	b := openRetentionBroker(t, Config{DeadLetterRetention: time.Minute,
		Retention: RetentionConfig{DeadLetters: StreamRetention{MaxBytes: bound}}}, clocks)
	queue, err := b.deadLetterLog("jobs")
	if err != nil {
		t.Fatal(err)
	}
	fillLog(t, queue, 100)
	b.retentionPass()
	bytes, _ := logBytes(checkWholeSegments(t, queue))
	if bytes > bound || queue.FirstOffset() == 0 {
		t.Fatalf("the queue holds %d bytes from %d; bound %d", bytes, queue.FirstOffset(), bound)
	}
	clocks.mono.advance(2 * time.Minute)
	clocks.wall.advance(2 * time.Minute)
	b.retentionPass()
	if segs := checkWholeSegments(t, queue); len(segs) != 1 {
		t.Fatalf("after the age %d segments stay, want only the newest", len(segs))
	}
	if b.RetentionStats().SegmentsDeleted["age"] == 0 {
		t.Fatal("no deletion counted by age")
	}
}

// TestSetRetentionValidatesAndSwaps: a bad configuration is refused and
// leaves the old one; a good one applies at the next pass.
func TestSetRetentionValidatesAndSwaps(t *testing.T) {
	b := openRetentionBroker(t, Config{}, newClocks())
	if err := b.SetRetention(RetentionConfig{DiskBudget: segment.MinSegmentSize}); err == nil {
		t.Fatal("a budget smaller than eight segments was accepted")
	}
	if b.Retention().DiskBudget != 0 {
		t.Fatal("a refused configuration was applied")
	}
	l := streamLog(t, b, "s")
	fillLog(t, l, 60)
	if err := b.SetRetention(RetentionConfig{Stream: StreamRetention{MaxRecords: 20}}); err != nil {
		t.Fatal(err)
	}
	b.retentionPass()
	if l.FirstOffset() == 0 {
		t.Fatal("the swapped bound was not applied")
	}
}

// TestSealStartsAPass: a segment seal runs a pass without the ticker.
func TestSealStartsAPass(t *testing.T) {
	b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxRecords: 20}}}, newClocks())
	l := streamLog(t, b, "s")
	fillLog(t, l, 80)
	deadline := time.Now().Add(10 * time.Second)
	for l.FirstOffset() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l.FirstOffset() == 0 {
		t.Fatal("no pass ran after segments were sealed")
	}
}
