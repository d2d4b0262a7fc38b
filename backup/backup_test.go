package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/brokertime"
	"github.com/ironbus/ironbus/producer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func recordBody(t testing.TB, index int) []byte {
	t.Helper()
	encoded, err := record.AppendBody(nil, record.Body{Key: fmt.Appendf(nil, "k%d", index),
		Payload: fmt.Appendf(nil, "record %06d %0180d", index, index)})
	if err != nil {
		t.Fatal(err)
	}
	return encoded
}

// liveDir opens a writable data directory (holding its lock, like a
// broker) with small segments and one log of count records.
func liveDir(t testing.TB, root string, count int) (*segment.Dir, *segment.Log) {
	t.Helper()
	dir, err := segment.Open(vfs.OS{}, root, segment.Options{SegmentSize: segment.MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dir.Close() })
	log, err := dir.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	appendRecords(t, log, 0, count)
	return dir, log
}

func appendRecords(t testing.TB, log *segment.Log, from, count int) {
	t.Helper()
	var last segment.Ticket
	for i := from; i < from+count; i++ {
		b := recordBody(t, i)
		ticket, err := log.Append(context.Background(), b, record.Checksum(b))
		if err != nil {
			t.Fatal(err)
		}
		last = ticket
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// readLog opens a data directory read-only and returns the payload
// indexes of every record of orders/0, failing on any gap or damage.
func readLog(t testing.TB, root string) int {
	t.Helper()
	dir, err := segment.Open(vfs.OS{}, root, segment.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	log, err := dir.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	report, err := log.Validate()
	if err != nil || report.HasDataLoss() || report.Outcome == segment.OutcomeFrozen {
		t.Fatalf("restored log: %+v %v", report, err)
	}
	reader := log.NewReader(0)
	defer reader.Close()
	count := 0
	for {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return count
		}
		if err != nil || entry.Gap != nil || entry.Offset != uint64(count) {
			t.Fatalf("record %d: %+v %v", count, entry, err)
		}
		count++
	}
}

func TestBackupLiveRestoreRoundTrip(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	_, log := liveDir(t, source, 3000)
	if err := log.WriteCheckpoint("group-g", []byte("cursor one")); err != nil {
		t.Fatal(err)
	}
	if err := log.WriteCheckpoint("group-g", []byte("cursor two")); err != nil {
		t.Fatal(err)
	}
	before := log.Committed()
	// A producer keeps writing while the backup runs.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 3000; !stop.Load(); i += 50 {
			appendRecords(t, log, i, 50)
		}
	}()
	out := filepath.Join(base, "backup")
	result, err := Create(source, out, Options{})
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	after := log.Committed()
	if len(result.Damage) != 0 || len(result.Manifest.Logs) != 1 {
		t.Fatalf("backup: %+v", result)
	}
	held := result.Manifest.Logs[0]
	if held.FirstOffset != 0 || held.NextOffset < before || held.NextOffset > after || held.Segments < 2 || held.Checkpoints != 2 {
		t.Fatalf("backup holds %+v; acknowledged %d before it, %d after", held, before, after)
	}
	target := filepath.Join(base, "restored")
	if _, err := Restore(out, target, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readLog(t, target); uint64(got) != held.NextOffset {
		t.Fatalf("restored %d records, the manifest says %d", got, held.NextOffset)
	}
	report, err := Scrub(nil, target, nil)
	if err != nil || report.Damaged != 0 {
		t.Fatalf("scrub of the restored directory: %+v %v", report, err)
	}
	// A broker starts on it and appends after the restored records.
	dir, err := segment.Open(vfs.OS{}, target, segment.Options{SegmentSize: segment.MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	restored, err := dir.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := restored.ReadCheckpoint("group-g"); err != nil || string(data) != "cursor two" {
		t.Fatalf("checkpoint: %q %v", data, err)
	}
	appendRecords(t, restored, int(held.NextOffset), 10)
	if err := dir.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLog(t, target); uint64(got) != held.NextOffset+10 {
		t.Fatalf("after appending: %d records", got)
	}
}

func TestRestoreRefusesTamperedBackupBeforeWriting(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	liveDir(t, source, 500)
	out := filepath.Join(base, "backup")
	result, err := Create(source, out, Options{NoLink: true})
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, file := range result.Manifest.Files {
		if file.Kind == KindSegment {
			victim = filepath.Join(out, DataDirName, file.Path)
		}
	}
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[5000] ^= 0x01
	if err := os.WriteFile(victim, data, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "restored")
	if _, err := Restore(out, target, RestoreOptions{}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("restore of a tampered backup: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore wrote %s before refusing: %v", target, err)
	}
	if _, err := os.Stat(target + ".restore-tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore staged files before refusing: %v", err)
	}
}

func TestRestoreRefusesNonEmptyTargetWithoutForce(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	dir, _ := liveDir(t, source, 100)
	out := filepath.Join(base, "backup")
	if _, err := Create(source, out, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(out, source, RestoreOptions{Force: true}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("restore over a live directory: %v", err)
	}
	_ = dir.Close()
	if _, err := Restore(out, source, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore over a full directory: %v", err)
	}
	result, err := Restore(out, source, RestoreOptions{Force: true})
	if err != nil || result.MovedAside == "" {
		t.Fatalf("forced restore: %+v %v", result, err)
	}
	if _, err := os.Stat(filepath.Join(result.MovedAside, "FORMAT")); err != nil {
		t.Fatalf("the previous directory was not kept: %v", err)
	}
	if got := readLog(t, source); got != 100 {
		t.Fatalf("restored %d records", got)
	}
}

func TestScrubFindsDamage(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	_, log := liveDir(t, root, 2000)
	if err := log.WriteCheckpoint("group-g", []byte("cursor")); err != nil {
		t.Fatal(err)
	}
	report, err := Scrub(nil, root, nil)
	if err != nil || report.Damaged != 0 || report.Logs[0].NextOffset != 2000 {
		t.Fatalf("clean scrub: %+v %v", report, err)
	}
	first := filepath.Join(root, "streams", "orders", "0", "00000000000000000000.seg")
	flip(t, first, 6000)
	flip(t, filepath.Join(root, "streams", "orders", "0", "checkpoints", "group-g.ckpt"), 11)
	report, err = Scrub(nil, root, nil)
	if err != nil || report.Damaged != 1 {
		t.Fatalf("damaged scrub: %+v %v", report, err)
	}
	reasons := map[segment.Reason]bool{}
	for _, event := range report.Logs[0].Events {
		reasons[event.Reason] = true
	}
	if !reasons[segment.ReasonCorruptCheckpoint] || len(reasons) < 2 {
		t.Fatalf("events: %+v", report.Logs[0].Events)
	}
	// A segment of another log, copied into the wrong directory, is not
	// judged as this log's: the log reports an error.
	foreign := filepath.Join(root, "streams", "payments", "0")
	if err := os.MkdirAll(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "00000000000000000000.seg"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	report, err = Scrub(nil, root, nil)
	if err != nil || len(report.Logs) != 2 || !strings.Contains(report.Logs[1].Error, "another log") {
		t.Fatalf("scrub with a foreign segment: %+v %v", report.Logs, err)
	}
}

func flip(t testing.TB, name string, at int64) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0x40
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackupCarriesTheBrokerMetadata: the stream catalog (partitions,
// retention bounds, bindings) and the wall-clock high-water come back
// with a restore, byte for byte; without them a restored broker would
// re-adopt its streams with default settings and lose every binding.
func TestBackupCarriesTheBrokerMetadata(t *testing.T) {
	if !slices.Contains(metadataFiles, catalog.FileName) {
		t.Fatalf("the backup's metadata files %v miss the catalog %q", metadataFiles, catalog.FileName)
	}
	if !slices.Contains(metadataFiles, brokertime.FileName) {
		t.Fatalf("the backup's metadata files %v miss the broker clock's floor %q", metadataFiles, brokertime.FileName)
	}
	base := t.TempDir()
	source := filepath.Join(base, "data")
	liveDir(t, source, 10)
	if !slices.Contains(metadataFiles, producer.RegistryFileName) {
		t.Fatalf("the backup's metadata files %v miss the producer registry %q", metadataFiles, producer.RegistryFileName)
	}
	files := map[string]string{"streams.json": `{"catalog":"current"}`, "streams.json.prev": `{"catalog":"previous"}`, "wallclock": "high-water",
		"producers.log": "registry"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(source, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(base, "backup")
	result, err := Create(source, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := 0
	for _, file := range result.Manifest.Files {
		if file.Kind == KindMetadata {
			kinds++
		}
	}
	if kinds != len(files) {
		t.Fatalf("the manifest lists %d metadata files, want %d: %+v", kinds, len(files), result.Manifest.Files)
	}
	target := filepath.Join(base, "restored")
	if _, err := Restore(out, target, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		got, err := os.ReadFile(filepath.Join(target, name))
		if err != nil || string(got) != content {
			t.Fatalf("restored %s: %q %v, want %q", name, got, err, content)
		}
	}
}

// TestBackupOfACleanStopCopiesNoMarker: a cleanly stopped directory holds
// a clean-stop marker per log; a backup copies segments and checkpoints
// only, so the restored directory is scanned on its first start instead
// of trusting a marker written for other files.
func TestBackupOfACleanStopCopiesNoMarker(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	dir, _ := liveDir(t, source, 500)
	if err := dir.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(source, "streams", "orders", "0", "clean-stop.prepare")); err != nil {
		t.Fatalf("the clean stop left no marker: %v", err)
	}
	out := filepath.Join(base, "backup")
	if _, err := Create(source, out, Options{}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "restored")
	if _, err := Restore(out, target, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, "streams", "orders", "0", "clean-stop.prepare")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the marker was restored: %v", err)
	}
	restored, err := segment.Open(vfs.OS{}, target, segment.Options{SegmentSize: segment.MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	log, err := restored.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if report := log.Report(); report.CleanStop || report.NextOffset != 500 {
		t.Fatalf("restored log: %+v", report)
	}
	if err := restored.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLog(t, target); got != 500 {
		t.Fatalf("restored %d records", got)
	}
}
