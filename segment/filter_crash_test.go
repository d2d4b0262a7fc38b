package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestSummarySurvivesCrash writes clustered subjects, cuts power at a
// random write (keeping part of the unsynced writes, reordered and torn),
// recovers the image and checks filtered reads against the reference;
// then appends to the recovered active segment, whose summary the
// appender continues from the scan's, and checks again.
func TestSummarySurvivesCrash(t *testing.T) {
	seeds := uint64(30)
	if testing.Short() {
		seeds = 8
	}
	for seed := uint64(1); seed <= seeds && !t.Failed(); seed++ {
		summaryCrashOnce(t, seed)
	}
}

func summaryCrashOnce(t *testing.T, seed uint64) {
	rng := newRand(seed)
	opts := testOptions(seed)
	opts.SegmentSize = 256 << 10
	crashOpts := vfs.CrashOptions{Seed: seed, KeepUnsynced: rng.Float64(), Reorder: rng.IntN(2) == 0, Tear: rng.IntN(2) == 0}
	c := newCrashRig(vfs.NewMemFS(), int64(20+rng.IntN(1500)), crashOpts)
	subjects := []string{"a", "b", "c", "d"}
	if d, err := Open(c.fs, "/data", opts); err == nil {
		if l, err := d.OpenLog(defaultLog); err == nil {
			appendUntilCut(l, subjects, rng.IntN(1000))
		}
		_ = d.Close()
	}
	if !c.crashed.Load() {
		return
	}
	label := fmt.Sprintf("crash seed %d", seed)
	d := openDir(t, c.image, testOptions(seed))
	defer d.Close()
	l := openLog(t, d)
	compareFiltered(t, l, subjects, label+" recovered")
	appendUntilCut(l, subjects, 300)
	compareFiltered(t, l, subjects, label+" appended after recovery")
}

// appendUntilCut appends records in runs of one subject until an append
// fails (the power cut) or 3000 records are acknowledged.
func appendUntilCut(l *Log, subjects []string, start int) {
	for i := range 3000 {
		index := uint64(start + i)
		b := subjectBody(index, subjects[(start+i)/400%len(subjects)], 150, false)
		ticket, err := l.Append(context.Background(), b, crc(b))
		if err != nil || (i%8 == 7 && ticket.Wait(context.Background()) != nil) {
			return
		}
	}
}

func compareFiltered(t *testing.T, l *Log, subjects []string, label string) {
	t.Helper()
	all := readEntries(t, l, nil)
	committed := l.Committed()
	checkCoverage(t, all, committed, label+" unfiltered")
	for _, s := range subjects {
		m := subjectSet{s: true}
		want := filterReference(all, m)
		got := readEntries(t, l, m)
		checkCoverage(t, got, committed, label+" Next "+s)
		sameItems(t, got, want, label+" Next "+s)
		runs := readRuns(t, l, m, 64, 64<<10)
		sameItems(t, runs, want, label+" NextRun "+s)
	}
}

// countingMatcher counts the questions a reader asks.
type countingMatcher struct {
	subject string
	calls   int
}

func (m *countingMatcher) Match(subject []byte) bool {
	m.calls++
	return string(subject) == m.subject
}

// TestSummarySkipsBlocks shows the summary at work: with subjects in long
// runs, a filter for one of them is asked about far fewer records than the
// log holds (whole blocks are skipped unread), on the active segment as
// written, on sealed segments after recovery and after they went idle.
func TestSummarySkipsBlocks(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(5)
	opts.SegmentSize = 1 << 20
	opts.MaxOpenSegments = 1
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	subjects := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	const records = 24000 // 24 runs of 1000: three of each subject
	var last Ticket
	for i := range records {
		b := subjectBody(uint64(i), subjects[i/1000%len(subjects)], 200, false)
		last = appendBody(t, l, b)
	}
	waitTicket(t, last)
	check := func(label string) {
		t.Helper()
		m := &countingMatcher{subject: "c"}
		items := readEntries(t, l, m)
		matched := 0
		for _, item := range items {
			if item.Gap == nil {
				matched++
			}
		}
		if matched != 3000 || m.calls > records/4 {
			t.Fatalf("%s: %d records matched, want 3000; the filter was asked %d times for %d records", label, matched, m.calls, records)
		}
		t.Logf("%s: the filter was asked %d times for %d records", label, m.calls, records)
	}
	check("as written")
	check("again, sealed segments rebuilt after going idle")
	_ = d.Close()
	d = openDir(t, mem, opts)
	defer d.Close()
	l = openLog(t, d)
	check("after recovery")
}

// TestFilteredFollowerWhileAppending follows a log with a filter while
// the appender writes and extends the active segment's summary (run it
// with -race): the follower sees every matching record once, in order,
// and its gaps and records cover every offset.
func TestFilteredFollowerWhileAppending(t *testing.T) {
	opts := testOptions(11)
	opts.SegmentSize = 512 << 10
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	const records = 6000
	subjectOf := func(i int) string { return []string{"x", "y", "z"}[i/300%3] }
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range records {
			b := subjectBody(uint64(i), subjectOf(i), 120, false)
			if _, err := l.Append(context.Background(), b, crc(b)); err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
	}()
	for _, api := range []string{"Next", "NextRun"} {
		r := l.NewReader(0)
		r.SetFilter(subjectSet{"y": true})
		at := uint64(0)
		for at < records {
			if _, err := l.WaitCommitted(context.Background(), at); err != nil {
				t.Fatal(err)
			}
			for {
				from, to, isGap, err := readOne(r, api)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil || from != at || (!isGap && subjectOf(int(from)) != "y") {
					t.Fatalf("%s at %d: [%d,%d) gap %v: %v", api, at, from, to, isGap, err)
				}
				at = to
			}
		}
		r.Close()
	}
	<-done
}

// readOne reads one entry or run and returns the offsets it covers.
func readOne(r *Reader, api string) (from, to uint64, isGap bool, err error) {
	if api == "Next" {
		e, err := r.Next()
		if e.Gap != nil {
			return e.Gap.From, e.Gap.To, true, err
		}
		return e.Offset, e.Offset + 1, false, err
	}
	run, err := r.NextRun(16, 4096)
	defer run.Release()
	if run.Gap != nil {
		return run.Gap.From, run.Gap.To, true, err
	}
	return run.First, run.Next, false, err
}
