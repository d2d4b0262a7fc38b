package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// appendKeyed appends records of keys key-0..key-(keys-1) in turn (about
// 4 KiB each, so segments roll), a tombstone where tombstone says so,
// and waits until they are durable.
func appendKeyed(t *testing.T, l *segment.Log, n, keys int, tombstone func(i int) bool) {
	t.Helper()
	var last segment.Ticket
	for i := range n {
		b := record.Body{Key: fmt.Appendf(nil, "key-%d", i%keys)}
		if tombstone != nil && tombstone(i) {
			b.Tombstone = true
		} else {
			b.Payload = make([]byte, 4<<10)
		}
		body, err := record.AppendBody(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		if last, err = l.Append(context.Background(), body, record.Checksum(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// presentOffsets reads the log and returns the offsets of its records,
// and whether each is a tombstone.
func presentOffsets(t *testing.T, l *segment.Log) map[uint64]bool {
	t.Helper()
	r := l.NewReader(0)
	defer r.Close()
	present := map[uint64]bool{}
	for {
		entry, err := r.Next()
		if errors.Is(err, io.EOF) {
			return present
		}
		if err != nil {
			t.Fatal(err)
		}
		if entry.Gap != nil {
			if entry.Gap.Reason != segment.GapCompacted {
				t.Fatalf("gap %+v", entry.Gap)
			}
			continue
		}
		_, tombstone, _ := record.Key(entry.Body)
		present[entry.Offset] = tombstone
	}
}

func createCompacted(t *testing.T, b *Broker, name string, deleteRetention time.Duration) *segment.Log {
	t.Helper()
	info, _, err := b.CreateStream(StreamSettings{Name: name, Partitions: 1, Compact: true, DeleteRetention: deleteRetention})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Compact || info.DeleteRetention == 0 {
		t.Fatalf("created stream says %+v", info)
	}
	return streamLog(t, b, name)
}

// TestCompactionKeepsWhatGroupsHaveNotCommitted: a group that committed
// nothing pins every record; once it commits, only records below its
// position go, each superseded by a later record of its key, and every
// record at or above the position stays.
func TestCompactionKeepsWhatGroupsHaveNotCommitted(t *testing.T) {
	b := openRetentionBroker(t, Config{}, newClocks())
	l := createCompacted(t, b, "latest", 0)
	slow := streamingGroup(t, b, "latest", "slow", 0)
	appendKeyed(t, l, 200, 5, nil)
	results, err := b.CompactStream(context.Background(), "latest")
	if err != nil {
		t.Fatal(err)
	}
	if results[0].RecordsRemoved != 0 || len(presentOffsets(t, l)) != 200 {
		t.Fatalf("a group at 0 pins everything, yet compaction removed %d", results[0].RecordsRemoved)
	}
	commitGroup(t, slow, 120)
	if results, err = b.CompactStream(context.Background(), "latest"); err != nil {
		t.Fatal(err)
	}
	present := presentOffsets(t, l)
	for offset := uint64(120); offset < 200; offset++ {
		if _, ok := present[offset]; !ok {
			t.Fatalf("offset %d, at or above the group's position 120, was removed", offset)
		}
	}
	// Below 120 every record of a key has a later one: all go.
	if results[0].RecordsRemoved != 120 || len(present) != 80 {
		t.Fatalf("removed %d, %d present; want 120 and 80", results[0].RecordsRemoved, len(present))
	}
	if stats := b.CompactionStats(); stats.Passes < 2 || stats.RecordsRemoved != 120 || stats.BytesReclaimed == 0 {
		t.Fatalf("stats %+v", stats)
	}
}

// TestCompactionRefusesAStreamWithoutIt: compaction is a stream setting.
func TestCompactionRefusesAStreamWithoutIt(t *testing.T) {
	b := openRetentionBroker(t, Config{}, newClocks())
	streamLog(t, b, "plain")
	if _, err := b.CompactStream(context.Background(), "plain"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("compacting a plain stream: %v", err)
	}
	if _, err := b.CompactStream(context.Background(), "nothing"); !errors.Is(err, ErrNoSuchStream) {
		t.Fatalf("compacting a missing stream: %v", err)
	}
}

// TestTombstonesExpireByBrokerTime: a tombstone stays through its delete
// retention; a wall clock stepping years ahead does not expire it (the
// monotonic clock has not run the retention), and once both clocks have,
// the retention pass removes it.
func TestTombstonesExpireByBrokerTime(t *testing.T) {
	clocks := newClocks()
	b := openRetentionBroker(t, Config{}, clocks)
	l := createCompacted(t, b, "latest", time.Hour)
	appendKeyed(t, l, 60, 3, func(i int) bool { return i >= 57 }) // the last record of each key is a tombstone
	if _, err := b.CompactStream(context.Background(), "latest"); err != nil {
		t.Fatal(err)
	}
	tombstones := func() int {
		n := 0
		for _, tombstone := range presentOffsets(t, l) {
			if tombstone {
				n++
			}
		}
		return n
	}
	if got := len(presentOffsets(t, l)); got != 3 || tombstones() != 3 {
		t.Fatalf("after compaction %d records, %d tombstones; want the 3 tombstones", got, tombstones())
	}
	clocks.wall.advance(10 * 365 * 24 * time.Hour)
	b.retentionPass()
	if _, err := b.CompactStream(context.Background(), "latest"); err != nil {
		t.Fatal(err)
	}
	if tombstones() != 3 {
		t.Fatal("a wall-clock step expired tombstones")
	}
	clocks.mono.advance(2 * time.Hour)
	b.retentionPass()
	if n := tombstones(); n != 0 {
		t.Fatalf("%d tombstones left after their delete retention", n)
	}
	if stats := b.CompactionStats(); stats.TombstonesRemoved != 3 {
		t.Fatalf("stats %+v", stats)
	}
}

// TestRetentionPassCompacts: the background pass compacts a compacted
// stream once it has sealed data, and leaves the active segment alone.
func TestRetentionPassCompacts(t *testing.T) {
	b := openRetentionBroker(t, Config{}, newClocks())
	l := createCompacted(t, b, "latest", 0)
	appendKeyed(t, l, 100, 4, nil)
	b.retentionPass()
	stats := b.CompactionStats()
	if stats.Passes == 0 || stats.RecordsRemoved == 0 {
		t.Fatalf("the pass did not compact: %+v", stats)
	}
	segs := l.Segments()
	active := segs[len(segs)-1]
	present := presentOffsets(t, l)
	for offset := active.Base; offset < active.Next; offset++ {
		if _, ok := present[offset]; !ok {
			t.Fatalf("offset %d of the active segment was removed", offset)
		}
	}
}

// TestCompactionPastGroups: a stream created with CompactPastGroups
// compacts below a group that committed nothing, and the group then
// reads the removed records as compacted gaps.
func TestCompactionPastGroups(t *testing.T) {
	b := openRetentionBroker(t, Config{}, newClocks())
	info, _, err := b.CreateStream(StreamSettings{Name: "latest", Partitions: 1, Compact: true, CompactPastGroups: true})
	if err != nil || !info.CompactPastGroups {
		t.Fatalf("created %+v %v", info, err)
	}
	l := streamLog(t, b, "latest")
	group := streamingGroup(t, b, "latest", "slow", 0)
	appendKeyed(t, l, 100, 4, nil)
	if _, err := b.CompactStream(context.Background(), "latest"); err != nil {
		t.Fatal(err)
	}
	// Background compactions the seals started may have done part of it.
	if removed := b.CompactionStats().RecordsRemoved; removed != 96 || len(presentOffsets(t, l)) != 4 {
		t.Fatalf("removed %d with a group at 0; want every superseded record (96)", removed)
	}
	deliveries, gaps, err := group.Read(0, 100, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(deliveries) != 4 || len(gaps) == 0 || gaps[0].Reason != segment.GapCompacted {
		t.Fatalf("the group read %d records and gaps %+v", len(deliveries), gaps)
	}
}

// TestBackgroundCompactionKeepsWhatGroupsHaveNotCommitted: the retention
// pass's compaction honours the groups' floor as a requested one does.
func TestBackgroundCompactionKeepsWhatGroupsHaveNotCommitted(t *testing.T) {
	clocks := newClocks()
	b := openRetentionBroker(t, Config{}, clocks)
	l := createCompacted(t, b, "latest", 0)
	slow := streamingGroup(t, b, "latest", "slow", 0)
	appendKeyed(t, l, 200, 5, nil)
	clocks.mono.advance(time.Hour) // past any recheck
	b.retentionPass()
	if got := len(presentOffsets(t, l)); got != 200 || b.CompactionStats().RecordsRemoved != 0 {
		t.Fatalf("with a group at 0 the pass left %d of 200 records", got)
	}
	commitGroup(t, slow, 100)
	clocks.mono.advance(time.Hour)
	b.retentionPass()
	present := presentOffsets(t, l)
	for offset := uint64(100); offset < 200; offset++ {
		if _, ok := present[offset]; !ok {
			t.Fatalf("offset %d, at or above the group's position, was removed", offset)
		}
	}
	if len(present) == 200 {
		t.Fatal("nothing below the group's position was compacted")
	}
}
