package main

import (
	"testing"
	"time"
)

// The raw loop on a real file: slices pool into one sample, and the loop
// wraps around at the end of its file instead of growing it.
func TestRawLoopPoolsSlices(t *testing.T) {
	loop, err := openRawLoop(t.TempDir(), 256)
	if err != nil {
		t.Fatal(err)
	}
	defer loop.close()
	if loop.backToBack.perSecond() != 0 {
		t.Fatal("a rate before anything ran")
	}
	if err := loop.runBackToBack(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first := len(loop.backToBack.latencies)
	loop.offset = rawSmallFileBytes - 100 // the next write would pass the end
	if err := loop.runBackToBack(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if first == 0 || len(loop.backToBack.latencies) <= first {
		t.Fatalf("slices did not pool: %d then %d syncs", first, len(loop.backToBack.latencies))
	}
	if loop.offset >= rawSmallFileBytes {
		t.Fatalf("the loop wrote past its file: offset %d", loop.offset)
	}
	if size, err := loop.file.Size(); err != nil || size != rawSmallFileBytes {
		t.Fatalf("the file grew to %d (%v)", size, err)
	}
	if rate := loop.backToBack.perSecond(); rate <= 0 {
		t.Fatalf("rate %v", rate)
	}
	if err := loop.runAtRate(500, 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := len(loop.atRate.latencies); got != 20 {
		t.Fatalf("%d syncs at 500/s for 40 ms, want 20", got)
	}
}

// The TCP floor over real loopback TCP, into the raw loop's file, back to
// back and at a rate.
func TestTCPFloor(t *testing.T) {
	loop, err := openRawLoop(t.TempDir(), 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer loop.close()
	perSecond, latencies, err := tcpFloor(loop, 1024, 0, 30*time.Millisecond)
	if err != nil || perSecond <= 0 || len(latencies) == 0 {
		t.Fatalf("back to back: %v/s, %d latencies, %v", perSecond, len(latencies), err)
	}
	_, latencies, err = tcpFloor(loop, 1024, 500, 40*time.Millisecond)
	if err != nil || len(latencies) != 20 {
		t.Fatalf("at 500/s for 40 ms: %d latencies, %v; want 20", len(latencies), err)
	}
	// The floor wrote through the loop: its offset moved, inside the file.
	if loop.offset == 0 || loop.offset > rawSmallFileBytes {
		t.Fatalf("the loop's offset is %d after the floor wrote through it", loop.offset)
	}
}
