package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/consumer"
)

// A publish to an unknown stream creates it with one partition unless
// the broker is configured not to; then it is no such stream, naming it,
// until an explicit create.
func TestAutoCreateStreamsSetting(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprint("disabled=", disabled), func(t *testing.T) {
			b := openTestBroker(t, Config{DisableAutoCreateStreams: disabled})
			served, err := b.ProduceStream([]byte("fresh"), "")
			if disabled {
				if !errors.Is(err, ErrNoSuchStream) || !strings.Contains(err.Error(), `"fresh"`) {
					t.Fatalf("a publish to an unknown stream with auto-create off: %v", err)
				}
				if _, err := b.Stream([]byte("fresh")); !errors.Is(err, ErrNoSuchStream) {
					t.Fatalf("the refused publish created the stream: %v", err)
				}
				if _, _, err := b.CreateStream(StreamSettings{Name: "fresh"}); err != nil {
					t.Fatal(err)
				}
				if served, err = b.ProduceStream([]byte("fresh"), ""); err != nil {
					t.Fatalf("a publish to a created stream: %v", err)
				}
			}
			if err != nil || served.Name() != "fresh" || served.Partitions() != 1 {
				t.Fatalf("publish to a new stream: %v %+v", err, served)
			}
			if _, err := b.ProduceStream([]byte("bad/name"), ""); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("an invalid name: %v", err)
			}
			if _, err := b.ProduceStream([]byte(".dlq.fresh"), ""); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("a publish to a dead-letter queue: %v", err)
			}
		})
	}
}

// Consuming, opening a group, acknowledging and every admin verb but
// create answer no such stream for an unknown name, and create nothing:
// not the stream, not its dead-letter queue, whatever the auto-create
// setting.
func TestLookupsNeverCreateStreams(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprint("disabled=", disabled), func(t *testing.T) {
			dir := t.TempDir()
			b := openTestBroker(t, Config{DataDir: dir, DisableAutoCreateStreams: disabled})
			work := GroupSpec{Type: consumer.TypeWork}
			calls := map[string]func() error{
				"open group": func() error { _, err := b.OpenGroup([]byte("typo"), 0, []byte("g"), work); return err },
				"open all":   func() error { _, err := b.OpenGroups([]byte("typo"), AllPartitions, []byte("g"), work); return err },
				"dlq group":  func() error { _, err := b.OpenGroup([]byte(".dlq.typo"), 0, []byte("g"), work); return err },
				"dlq all": func() error {
					_, err := b.OpenGroups([]byte(".dlq.typo"), AllPartitions, []byte("g"), work)
					return err
				},
				"ack lookup": func() error { _, err := b.LoadedGroup([]byte("typo"), 0, []byte("g")); return err },
				"stream":     func() error { _, err := b.Stream([]byte("typo")); return err },
				"groups":     func() error { _, err := b.ListGroups("typo", 0); return err },
				"group info": func() error { _, err := b.GroupInfo("typo", 0, "g"); return err },
				"reset": func() error {
					_, err := b.ResetGroup("typo", 0, "g", consumer.StartPosition{Kind: consumer.StartEarliest})
					return err
				},
				"delete group": func() error { _, err := b.DeleteGroup("typo", 0, "g"); return err },
				"dlq list":     func() error { _, err := b.DeadLetterQueues("typo"); return err },
				"redrive":      func() error { _, _, err := b.Redrive(context.Background(), "typo", 10); return err },
				"describe":     func() error { _, _, err := b.DescribeStream("typo"); return err },
				"purge":        func() error { _, _, err := b.PurgeStream(context.Background(), "typo"); return err },
				"remove":       func() error { _, _, err := b.RemoveStream("typo"); return err },
				"bind":         func() error { _, err := b.Bind("typo.>", "typo", nil); return err },
			}
			for name, call := range calls {
				err := call()
				if !errors.Is(err, ErrNoSuchStream) || !strings.Contains(err.Error(), "typo") {
					t.Errorf("%s on an unknown stream: %v; want no such stream naming it", name, err)
				}
			}
			if streams := b.Streams(); len(streams) != 0 {
				t.Fatalf("lookups created streams: %+v", streams)
			}
			if _, err := os.Stat(filepath.Join(dir, deadLetterDirName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("lookups created the dead-letter directory: %v", err)
			}
		})
	}
}

// A dead-letter queue exists while its stream does: it is read through
// its parent's name and has one partition.
func TestDeadLetterQueueFollowsItsStream(t *testing.T) {
	b := openTestBroker(t, Config{DisableAutoCreateStreams: true})
	if _, _, err := b.CreateStream(StreamSettings{Name: "orders", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	work := GroupSpec{Type: consumer.TypeWork}
	groups, err := b.OpenGroups([]byte(".dlq.orders"), AllPartitions, []byte("g"), work)
	if err != nil || len(groups) != 1 || groups[0].Stream() != ".dlq.orders" {
		t.Fatalf("the queue of an existing stream: %v %v", groups, err)
	}
	if _, err := b.OpenGroup([]byte(".dlq.orders"), 1, []byte("g"), work); !errors.Is(err, ErrNoSuchPartition) {
		t.Fatalf("partition 1 of a queue: %v", err)
	}
	if _, err := b.OpenGroup([]byte("orders"), 2, []byte("g"), work); !errors.Is(err, ErrNoSuchPartition) {
		t.Fatalf("partition 2 of a two-partition stream: %v", err)
	}
}

// A stream's own retention bound applies to each of its partitions and
// only to it; another stream keeps the broker's default (unbounded here).
func TestPerStreamRetentionBounds(t *testing.T) {
	b := openRetentionBroker(t, Config{}, newClocks())
	if _, _, err := b.CreateStream(StreamSettings{Name: "bounded", Partitions: 2, MaxRecords: 40}); err != nil {
		t.Fatal(err)
	}
	free := streamLog(t, b, "free")
	fillLog(t, free, 120)
	for p := uint32(0); p < 2; p++ {
		fillLog(t, partitionOf(t, b, "bounded", p).Log(), 120)
	}
	b.retentionPass()
	for p := uint32(0); p < 2; p++ {
		l := partitionOf(t, b, "bounded", p).Log()
		if _, records := logBytes(checkWholeSegments(t, l)); records > 40 || records < 20 {
			t.Fatalf("bounded/%d keeps %d records, want at most 40", p, records)
		}
	}
	if _, records := logBytes(checkWholeSegments(t, free)); records != 120 {
		t.Fatalf("the unbounded stream keeps %d of 120 records", records)
	}
}

// Logs found on disk without a catalog entry (a data directory from
// before named streams) are adopted with their highest partition + 1.
func TestLogsWithoutACatalogEntryAreAdopted(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []uint32{0, 2} {
		if err := os.MkdirAll(filepath.Join(dir, "streams", "legacy", fmt.Sprint(p)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if served, err := b.Stream([]byte("legacy")); err != nil || served.Partitions() != 3 {
		t.Fatalf("legacy adopted: %v", err)
	}
	if s, ok := b.catalog.Catalog().Stream("legacy"); !ok || s.Partitions != 3 {
		t.Fatalf("catalog entry %+v %v", s, ok)
	}
}
