package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// dedupClocks drive a dedup test: broker time and the wall clock, moved
// apart on purpose.
type dedupClocks struct {
	time *manualMonotonic
	wall *manualWall
}

func newDedupClocks() dedupClocks {
	return dedupClocks{time: &manualMonotonic{}, wall: &manualWall{now: testEpoch}}
}

func openDedupBroker(t *testing.T, cfg Config, clocks dedupClocks) *Broker {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.TimeSource = clocks.time
	cfg.Storage.Clock = clocks.wall
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// publishWithID does what the append path does for a record carrying a
// message id: a window hit answers the original offset and stores
// nothing; a miss appends and remembers the id. (The test publishes one
// record at a time, so the lookup and the insert need not share one hold
// of the check lock, which the append itself takes.)
func publishWithID(t *testing.T, p *Partition, id string) (offset uint64, duplicate bool) {
	t.Helper()
	body, err := record.AppendBody(nil, record.Body{Payload: []byte("payload " + id),
		Headers: []record.Header{{Name: record.MessageIDHeader, Value: []byte(id)}}})
	if err != nil {
		t.Fatal(err)
	}
	p.checkMu.Lock()
	window := p.dedup
	if window != nil {
		offset, duplicate = window.Lookup([]byte(id))
	}
	p.checkMu.Unlock()
	if duplicate {
		return offset, true
	}
	ticket, err := p.TryAppend([][]byte{body}, []uint32{record.Checksum(body)}, record.FrameSize(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	if window != nil {
		p.checkMu.Lock()
		window.Insert([]byte(id), ticket.First)
		p.checkMu.Unlock()
	}
	<-ticket.Done()
	if err := ticket.Err(); err != nil {
		t.Fatal(err)
	}
	return ticket.First, false
}

func expectDuplicate(t *testing.T, p *Partition, id string, want uint64) {
	t.Helper()
	if offset, dup := publishWithID(t, p, id); !dup || offset != want {
		t.Fatalf("publish of %q: offset %d, duplicate %v; want the duplicate of offset %d", id, offset, dup, want)
	}
}

func expectStored(t *testing.T, p *Partition, id string) uint64 {
	t.Helper()
	offset, dup := publishWithID(t, p, id)
	if dup {
		t.Fatalf("publish of %q answered a duplicate of offset %d; want it stored", id, offset)
	}
	return offset
}

func TestDedupWindowExpiresOnBrokerTimeNotTheWallClock(t *testing.T) {
	const epsilon = 5 * time.Millisecond
	clocks := newDedupClocks()
	b := openDedupBroker(t, Config{}, clocks)
	if _, _, err := b.CreateStream(StreamSettings{Name: "orders", DedupWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p := partitionOf(t, b, "orders", 0)
	first := expectStored(t, p, "order-1")
	// The wall clock steps 50 years back, then 50 years ahead: broker
	// time does not see it.
	for _, step := range []time.Duration{-50 * 365 * 24 * time.Hour, 100 * 365 * 24 * time.Hour} {
		clocks.wall.advance(step)
		expectDuplicate(t, p, "order-1", first)
	}
	clocks.time.advance(time.Minute - epsilon)
	expectDuplicate(t, p, "order-1", first)
	clocks.time.advance(2 * epsilon)
	if again := expectStored(t, p, "order-1"); again == first {
		t.Fatalf("the id after its window was stored at the old offset %d", first)
	}
}

func TestDedupSurvivesPurgeAndRestart(t *testing.T) {
	dir := t.TempDir()
	clocks := newDedupClocks()
	b := openDedupBroker(t, Config{DataDir: dir}, clocks)
	p := partitionOf(t, b, "orders", 0) // made by a first publish: the default window
	offsets := map[string]uint64{}
	for i := range 50 {
		id := fmt.Sprintf("order-%d", i)
		offsets[id] = expectStored(t, p, id)
	}
	if _, _, err := b.PurgeStream(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	clocks.time.advance(10 * time.Second)
	b = openDedupBroker(t, Config{DataDir: dir}, clocks)
	p = partitionOf(t, b, "orders", 0)
	for id, offset := range offsets {
		expectDuplicate(t, p, id, offset)
	}
	if _, _, err := b.PurgeStream(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openDedupBroker(t, Config{DataDir: dir}, clocks)
	p = partitionOf(t, b, "orders", 0)
	expectDuplicate(t, p, "order-7", offsets["order-7"])
}

// TestDedupSurvivesPurgeAndCrash: a purge deletes the log tail a crash
// replays the window's RAM ids from, so the ids must be in the window's
// files before it: after a power cut that keeps nothing unsynced, every
// id published before the purge is still a duplicate.
func TestDedupSurvivesPurgeAndCrash(t *testing.T) {
	mem := vfs.NewMemFS()
	clocks := newDedupClocks()
	b := openDedupBroker(t, Config{DataDir: "/data", FS: mem}, clocks)
	p := partitionOf(t, b, "orders", 0)
	offsets := map[string]uint64{}
	for i := range 50 {
		id := fmt.Sprintf("order-%d", i)
		offsets[id] = expectStored(t, p, id)
	}
	if _, _, err := b.PurgeStream(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{Seed: 1, KeepUnsynced: 0})
	after := openDedupBroker(t, Config{DataDir: "/data", FS: crashed}, clocks)
	p = partitionOf(t, after, "orders", 0)
	for id, offset := range offsets {
		expectDuplicate(t, p, id, offset)
	}
}

// TestDedupRebuildsFromTheLogAfterACrash: a power cut keeps only what was
// synced; the window's files cover little of it, and the replay of the
// log tail gives back every id of a durable record: the oracle.
func TestDedupRebuildsFromTheLogAfterACrash(t *testing.T) {
	mem := vfs.NewMemFS()
	clocks := newDedupClocks()
	b := openDedupBroker(t, Config{DataDir: "/data", FS: mem, DedupMaxIDs: 400}, clocks)
	p := partitionOf(t, b, "orders", 0)
	oracle := map[string]uint64{}
	for i := range 500 {
		id := fmt.Sprintf("order-%d", i)
		oracle[id] = expectStored(t, p, id)
		if i%97 == 0 {
			time.Sleep(time.Millisecond) // let a seal land now and then
		}
	}
	crashed := mem.CrashClone(vfs.CrashOptions{Seed: 1, KeepUnsynced: 0.5})
	after := openDedupBroker(t, Config{DataDir: "/data", FS: crashed, DedupMaxIDs: 400}, clocks)
	p = partitionOf(t, after, "orders", 0)
	stats := p.dedup.Stats()
	found := 0
	for id, offset := range oracle {
		got, ok := p.dedup.Lookup([]byte(id))
		if ok && got != offset {
			t.Fatalf("%s maps to offset %d after the crash, was %d", id, got, offset)
		}
		if ok {
			found++
		}
	}
	// The count cap may have forgotten the oldest ids, never the newest.
	for i := 400; i < 500; i++ {
		id := fmt.Sprintf("order-%d", i)
		if got, ok := p.dedup.Lookup([]byte(id)); !ok || got != oracle[id] {
			t.Fatalf("%s: %d, %v after the crash; want offset %d", id, got, ok, oracle[id])
		}
	}
	if found < 400 {
		t.Fatalf("%d of 500 ids found after the crash (stats %+v)", found, stats)
	}
}

func TestDedupWindowSetting(t *testing.T) {
	dir := t.TempDir()
	clocks := newDedupClocks()
	b := openDedupBroker(t, Config{DataDir: dir}, clocks)
	cases := []struct {
		name  string
		asked time.Duration
		want  time.Duration
	}{{"default", 0, catalog.DefaultDedupWindow}, {"off", -1, 0}, {"short", 10 * time.Second, 10 * time.Second}}
	for _, c := range cases {
		info, _, err := b.CreateStream(StreamSettings{Name: c.name, DedupWindow: c.asked})
		if err != nil {
			t.Fatal(err)
		}
		if info.DedupWindow != c.want {
			t.Errorf("%s: window %v, want %v", c.name, info.DedupWindow, c.want)
		}
		if p := partitionOf(t, b, c.name, 0); (p.dedup != nil) != (c.want != 0) {
			t.Errorf("%s: window open %v with setting %v", c.name, p.dedup != nil, c.want)
		}
	}
	if _, _, err := b.CreateStream(StreamSettings{Name: "long", DedupWindow: 25 * time.Hour}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a 25h window: %v, want ErrInvalidArgument", err)
	}
	if _, _, err := b.CreateStream(StreamSettings{Name: "short", DedupWindow: time.Second}); !errors.Is(err, ErrConflict) {
		t.Errorf("another window for an existing stream: %v, want ErrConflict", err)
	}
	if _, _, err := b.CreateStream(StreamSettings{Name: "default", DedupWindow: catalog.DefaultDedupWindow}); err != nil {
		t.Errorf("the default window asked for by value: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openDedupBroker(t, Config{DataDir: dir}, clocks)
	for _, c := range cases {
		info, _, err := b.DescribeStream(c.name)
		if err != nil || info.DedupWindow != c.want {
			t.Errorf("%s after a restart: window %v, %v; want %v", c.name, info.DedupWindow, err, c.want)
		}
	}
}

func TestRemovedStreamForgetsItsIDs(t *testing.T) {
	clocks := newDedupClocks()
	b := openDedupBroker(t, Config{}, clocks)
	p := partitionOf(t, b, "scratch", 0)
	expectStored(t, p, "x")
	if _, _, err := b.RemoveStream("scratch"); err != nil {
		t.Fatal(err)
	}
	p = partitionOf(t, b, "scratch", 0)
	expectStored(t, p, "x")
}
