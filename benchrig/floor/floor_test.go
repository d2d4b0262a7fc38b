package floor

import (
	"errors"
	"testing"
	"time"
)

// The raw loop on a real file: slices pool into one sample, and the loop
// wraps around at the end of its file instead of growing it.
func TestRawLoopPoolsSlices(t *testing.T) {
	loop, err := OpenRawLoop(t.TempDir(), 256)
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	if loop.BackToBack.PerSecond() != 0 {
		t.Fatal("a rate before anything ran")
	}
	if err := loop.RunBackToBack(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first := len(loop.BackToBack.Latencies)
	loop.offset = SmallFileBytes - 100 // the next write would pass the end
	if err := loop.RunBackToBack(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if first == 0 || len(loop.BackToBack.Latencies) <= first {
		t.Fatalf("slices did not pool: %d then %d syncs", first, len(loop.BackToBack.Latencies))
	}
	if loop.offset >= SmallFileBytes {
		t.Fatalf("the loop wrote past its file: offset %d", loop.offset)
	}
	if size, err := loop.file.Size(); err != nil || size != SmallFileBytes {
		t.Fatalf("the file grew to %d (%v)", size, err)
	}
	if rate := loop.BackToBack.PerSecond(); rate <= 0 {
		t.Fatalf("rate %v", rate)
	}
	if err := loop.RunAtRate(500, 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := len(loop.AtRate.Latencies); got != 20 {
		t.Fatalf("%d syncs at 500/s for 40 ms, want 20", got)
	}
}

// The TCP floor over real loopback TCP, into the raw loop's file, back to
// back and at a rate.
func TestTCPFloor(t *testing.T) {
	loop, err := OpenRawLoop(t.TempDir(), 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	perSecond, latencies, err := TCP(loop, 1024, 0, 30*time.Millisecond)
	if err != nil || perSecond <= 0 || len(latencies) == 0 {
		t.Fatalf("back to back: %v/s, %d latencies, %v", perSecond, len(latencies), err)
	}
	_, latencies, err = TCP(loop, 1024, 500, 40*time.Millisecond)
	if err != nil || len(latencies) != 20 {
		t.Fatalf("at 500/s for 40 ms: %d latencies, %v; want 20", len(latencies), err)
	}
	// The floor wrote through the loop: its offset moved, inside the file.
	if loop.offset == 0 || loop.offset > SmallFileBytes {
		t.Fatalf("the loop's offset is %d after the floor wrote through it", loop.offset)
	}
}

// Around measures both floors on either side of the run, runs it once,
// and passes its error through.
func TestAroundPoolsBothSides(t *testing.T) {
	runs := 0
	result, err := Around(t.TempDir(), 256, 20*time.Millisecond, func() error { runs++; return nil })
	if err != nil || runs != 1 {
		t.Fatalf("runs %d, %v", runs, err)
	}
	if result.TCPPerSec <= 0 || result.RawPerSec <= 0 || result.TCPP50 <= 0 || result.RawP50 <= 0 || result.TCPP99 < result.TCPP50 {
		t.Fatalf("floors %+v", result)
	}
	failed := errors.New("the run failed")
	if _, err := Around(t.TempDir(), 8, 10*time.Millisecond, func() error { return failed }); err != failed {
		t.Fatalf("the run's error came back as %v", err)
	}
}

func TestSliceFor(t *testing.T) {
	for run, want := range map[time.Duration]time.Duration{0: countSlice, time.Second: minSlice, 8 * time.Second: 2 * time.Second, time.Hour: maxSlice} {
		if got := SliceFor(run); got != want {
			t.Errorf("SliceFor(%v) = %v, want %v", run, got, want)
		}
	}
}
