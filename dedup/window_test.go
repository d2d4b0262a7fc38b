package dedup

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWindowExpiresOnBrokerTime(t *testing.T) {
	const epsilon = 2 * time.Millisecond
	for _, sealed := range []bool{false, true} {
		h := newHarness(t, Options{GenerationIDs: 4, MaxIDs: 1000})
		w := h.open()
		w.Insert([]byte("x"), 7)
		if sealed { // push x into a generation on disk
			for i := range 8 {
				w.Insert(idOf(i), uint64(8+i))
			}
		}
		h.clock.advance(h.opts.Window - epsilon)
		expectFound(t, w, []byte("x"), 7)
		h.clock.advance(2 * epsilon)
		expectFresh(t, w, []byte("x"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHitDoesNotExtendTheWindow(t *testing.T) {
	h := newHarness(t, Options{})
	w := h.open()
	w.Insert([]byte("x"), 1)
	for range 3 {
		h.clock.advance(h.opts.Window / 3)
		w.Lookup([]byte("x"))
	}
	h.clock.advance(time.Millisecond)
	expectFresh(t, w, []byte("x"))
}

func TestCountCapForgetsTheOldestAndCountsThem(t *testing.T) {
	const maxIDs, published = 1000, 3000
	h := newHarness(t, Options{MaxIDs: maxIDs, Window: time.Hour})
	w := h.open()
	for i := range published {
		if _, ok := w.Lookup(idOf(i)); ok {
			t.Fatalf("id %d is a duplicate", i)
		}
		w.Insert(idOf(i), uint64(i))
		h.clock.advance(time.Millisecond)
	}
	expectFresh(t, w, idOf(0))
	expectFound(t, w, idOf(published-1), published-1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	stats := w.Stats()
	if stats.IDs > maxIDs || stats.IDs < maxIDs*3/4 {
		t.Errorf("%d ids remembered with a cap of %d", stats.IDs, maxIDs)
	}
	if stats.EvictedEarly != uint64(published-stats.IDs) {
		t.Errorf("evicted early %d, want %d (%d published, %d remembered)", stats.EvictedEarly, published-stats.IDs, published, stats.IDs)
	}
}

func TestRestartKeepsIDs(t *testing.T) {
	h := newHarness(t, Options{GenerationIDs: 16})
	w := h.open()
	for i := range 100 {
		w.Insert(idOf(i), uint64(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Second)
	w = h.open()
	for i := range 100 {
		expectFound(t, w, idOf(i), uint64(i))
	}
	if covers := w.CoversUpTo(); covers != 100 {
		t.Errorf("CoversUpTo = %d after a clean close, want 100", covers)
	}
	h.clock.advance(h.opts.Window)
	expectFresh(t, w, idOf(5))
	_ = w.Close()
	// Expired generations are deleted at the next open.
	w = h.open()
	if stats := w.Stats(); stats.IDs != 0 || stats.Generations != 0 {
		t.Errorf("after the window: %+v, want nothing remembered", stats)
	}
}

func TestOnlyDurableIDsReachDisk(t *testing.T) {
	h := newHarness(t, Options{GenerationIDs: 8})
	h.opts.Durable = durableUpTo(40)
	w := h.open()
	for i := range 50 {
		w.Insert(idOf(i), uint64(i))
	}
	_ = w.Close()
	// The log lost its tail from 40: offsets 40.. are new records now.
	w = h.open()
	if covers := w.CoversUpTo(); covers > 40 {
		t.Fatalf("CoversUpTo = %d past the durable end 40", covers)
	}
	for i := range 40 {
		expectFound(t, w, idOf(i), uint64(i))
	}
	for i := 40; i < 50; i++ {
		expectFresh(t, w, idOf(i))
	}
}

func TestTruncatedLogHidesEntriesPastItsEnd(t *testing.T) {
	h := newHarness(t, Options{GenerationIDs: 8})
	w := h.open()
	for i := range 32 {
		w.Insert(idOf(i), uint64(i))
	}
	_ = w.Close()
	h.opts.Durable = durableUpTo(20) // recovery cut the log at 20
	w = h.open()
	if covers := w.CoversUpTo(); covers != 20 {
		t.Fatalf("CoversUpTo = %d, want the log's end 20", covers)
	}
	expectFound(t, w, idOf(19), 19)
	expectFresh(t, w, idOf(20))
}

func TestReplayRemembersTheTail(t *testing.T) {
	h := newHarness(t, Options{GenerationIDs: 8})
	w := h.open()
	for i := range 20 {
		w.Replay(idOf(i), uint64(i))
	}
	w.Replay(idOf(3), 3) // below what was replayed: skipped
	for i := range 20 {
		expectFound(t, w, idOf(i), uint64(i))
	}
	_ = w.Close()
}

func TestLostClockFileDoesNotPinIDsForever(t *testing.T) {
	h := newHarness(t, Options{GenerationIDs: 4})
	h.clock.now.Store(int64(1000 * time.Hour))
	w := h.open()
	for i := range 8 {
		w.Insert(idOf(i), uint64(i))
	}
	_ = w.Close()
	h.clock.now.Store(0) // the clock restarted from zero
	w = h.open()
	expectFound(t, w, idOf(1), 1)
	h.clock.advance(h.opts.Window + time.Millisecond)
	expectFresh(t, w, idOf(1))
	_ = w.Close()
}

func TestMaintainSealsAnIdleGenerationAndForgetsExpiredOnes(t *testing.T) {
	h := newHarness(t, Options{})
	w := h.open()
	w.Insert([]byte("x"), 3)
	w.Maintain() // young: stays in RAM
	if covers := w.CoversUpTo(); covers != 0 {
		t.Fatalf("CoversUpTo = %d before any seal", covers)
	}
	h.clock.advance(h.opts.Window / 4)
	w.Maintain()
	w.work.Wait()
	if covers, stats := w.CoversUpTo(), w.Stats(); covers != 4 || stats.Generations != 1 {
		t.Fatalf("after a quarter window: covers %d, %+v; want x sealed", covers, stats)
	}
	expectFound(t, w, []byte("x"), 3)
	h.clock.advance(h.opts.Window)
	w.Maintain()
	w.work.Wait()
	if stats := w.Stats(); stats.Generations != 0 || stats.IDs != 0 {
		t.Fatalf("after the window: %+v; want the generation forgotten", stats)
	}
	_ = w.Close()
}

// TestCutLogStaysCutAcrossRestarts: recovery cut the log at 20; new
// records take offsets 20.. again. An id of a lost record must never
// answer with the offset of a new one, in this run or any later one.
func TestCutLogStaysCutAcrossRestarts(t *testing.T) {
	h := newHarness(t, Options{GenerationIDs: 8})
	var end atomic.Uint64
	end.Store(32)
	h.opts.Durable = func(context.Context, uint64) uint64 { return end.Load() }
	w := h.open()
	for i := range 32 {
		w.Insert(idOf(i), uint64(i))
	}
	_ = w.Close()
	end.Store(20) // recovery cut the log at 20
	w = h.open()
	if covers := w.CoversUpTo(); covers != 20 {
		t.Fatalf("CoversUpTo = %d on a log cut at 20", covers)
	}
	end.Store(30) // new records 20..29 become durable
	for i := 20; i < 30; i++ {
		w.Insert([]byte(fmt.Sprintf("new-%d", i)), uint64(i))
	}
	expectFresh(t, w, idOf(25))
	_ = w.Close()
	w = h.open()
	expectFound(t, w, idOf(19), 19)
	expectFresh(t, w, idOf(25))
	expectFound(t, w, []byte("new-25"), 25)
	_ = w.Close()
}

// TestConcurrentAppendersAndReaders: appenders take turns under one lock
// (the partition's check lock) while generations seal behind them and
// the metrics read the counters; run with -race.
func TestConcurrentAppendersAndReaders(t *testing.T) {
	h := newHarness(t, Options{MaxIDs: 2000, GenerationIDs: 64})
	w := h.open()
	var lock sync.Mutex
	var next uint64
	var lastID []byte // the id inserted last, by whichever appender
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				id := []byte(fmt.Sprintf("g%d-%d", g, i))
				lock.Lock()
				if _, ok := w.Lookup(id); ok {
					lock.Unlock()
					t.Errorf("%s found before it was published", id)
					return
				}
				w.Insert(id, next)
				lastID = id
				next++
				if i%100 == 0 {
					w.Maintain()
				}
				lock.Unlock()
				h.clock.advance(time.Microsecond)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			w.Stats()
			_ = w.CoversUpTo()
		}
	}()
	wg.Wait()
	<-done
	// Only the newest ids are sure to be remembered: past the cap the
	// oldest generations go, and which appender finished last (and so
	// owns the newest offsets) is up to the scheduler.
	expectFound(t, w, lastID, next-1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if stats := w.Stats(); uint64(stats.IDs)+stats.EvictedEarly != 4000 {
		t.Fatalf("%+v: remembered and evicted should add up to the 4000 published", stats)
	}
}
