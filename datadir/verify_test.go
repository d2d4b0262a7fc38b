package datadir

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestJudge(t *testing.T) {
	torn := segment.LossEvent{Reason: segment.ReasonTornTail}
	footer := segment.LossEvent{Reason: segment.ReasonCorruptFooter}
	for _, test := range []struct {
		name   string
		report segment.LogReport
		frozen error
		want   Verdict
	}{
		{"clean", segment.LogReport{}, nil, Clean},
		{"torn tail only", segment.LogReport{Events: []segment.LossEvent{torn}}, nil, Clean},
		{"damaged footer", segment.LogReport{Events: []segment.LossEvent{torn, footer}}, nil, Damaged},
		{"frozen", segment.LogReport{Frozen: "caps"}, segment.ErrLossCapExceeded, Damaged},
		{"too new", segment.LogReport{Frozen: "new"}, fmt.Errorf("%w: x", segment.ErrTooNew), Unreadable},
		{"inconsistent", segment.LogReport{Frozen: "mixed"}, fmt.Errorf("%w: x", segment.ErrInconsistent), Unreadable},
	} {
		if got := Judge(test.report, test.frozen); got != test.want {
			t.Errorf("%s: %d, want %d", test.name, got, test.want)
		}
	}
}

// A clean directory verifies clean, its dead-letter queue included,
// and verifying writes nothing.
func TestVerifyCleanDirectory(t *testing.T) {
	mem := seed(t)
	mutations := 0
	fsys := vfs.Inject(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind.IsMutation() {
			mutations++
		}
		return nil
	}))
	check, err := Verify(fsys, root, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(check.Logs) != 3 || len(check.DeadLetterLogs) != 1 {
		t.Fatalf("checked %d logs and %d queues, want 3 and 1", len(check.Logs), len(check.DeadLetterLogs))
	}
	for _, log := range append(check.Logs, check.DeadLetterLogs...) {
		if log.Verdict != Clean || log.Err != nil {
			t.Errorf("%s/%d: verdict %d, %v", log.Report.Stream, log.Report.Partition, log.Verdict, log.Err)
		}
	}
	if first := check.Logs[0].Report; first.Stream != "audit" {
		t.Errorf("logs are not in stream order: first %s", first.Stream)
	}
	if mutations != 0 {
		t.Errorf("verify made %d mutations", mutations)
	}
}

func TestVerifyOneStream(t *testing.T) {
	mem := seed(t)
	check, err := Verify(mem, root, CheckOptions{Stream: "orders"})
	if err != nil || len(check.Logs) != 2 || check.DeadLetterLogs != nil {
		t.Fatalf("orders only: %+v %v", check, err)
	}
	if check.Logs[0].Report.Partition != 0 || check.Logs[1].Report.Partition != 1 {
		t.Errorf("partitions out of order: %+v", check.Logs)
	}
	if _, err := Verify(mem, root, CheckOptions{Stream: "nothing"}); !errors.Is(err, ErrNoSuchLog) {
		t.Fatalf("a stream with no log: %v", err)
	}
}

func TestVerifyRefusesAHeldDirectory(t *testing.T) {
	mem := seed(t)
	d, _ := openDir(t, mem, true)
	defer d.Close()
	if _, err := Verify(mem, root, CheckOptions{}); !errors.Is(err, segment.ErrLocked) {
		t.Fatalf("verify beside an exclusive holder: %v", err)
	}
	if _, err := Repair(mem, root, CheckOptions{}); !errors.Is(err, segment.ErrLocked) {
		t.Fatalf("repair beside an exclusive holder: %v", err)
	}
}

// Damage in a log is Damaged to Verify; Repair quarantines it and the
// log is writable (Clean) after, and verifies clean.
func TestRepairAcceptsDamage(t *testing.T) {
	mem := seed(t)
	corruptFirstRecord(t, mem, "orders", 1)
	check, err := Verify(mem, root, CheckOptions{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if got := check.Logs[1]; got.Verdict != Damaged || got.Report.LossRecords == 0 {
		t.Fatalf("damaged log: verdict %d, report %+v", got.Verdict, got.Report)
	}
	if check.Logs[0].Verdict != Clean {
		t.Fatalf("the intact partition: %d", check.Logs[0].Verdict)
	}
	repaired, err := Repair(mem, root, CheckOptions{Stream: "orders", Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, log := range repaired.Logs {
		if log.Verdict != Clean || log.Err != nil {
			t.Fatalf("after repair %s/%d: verdict %d, %v", log.Report.Stream, log.Report.Partition, log.Verdict, log.Err)
		}
	}
	again, err := Verify(mem, root, CheckOptions{Stream: "orders"})
	if err != nil || again.Logs[1].Verdict != Clean {
		t.Fatalf("verify after repair: %+v %v", again.Logs, err)
	}
}

// corruptFirstRecord flips bytes inside the first record of a log's
// first segment.
func corruptFirstRecord(t *testing.T, mem *vfs.MemFS, stream string, partition int) {
	t.Helper()
	dir := path.Join(root, "streams", stream, fmt.Sprint(partition))
	names, err := mem.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		file, err := mem.OpenFile(path.Join(dir, name), vfs.ReadWrite)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		info, err := mem.Stat(path.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		buffer := make([]byte, info.Size)
		if _, err := file.ReadAt(buffer, 0); err != nil {
			t.Fatal(err)
		}
		at := strings.Index(string(buffer), "record 0 of")
		if at < 0 {
			t.Fatalf("no record 0 in %s", name)
		}
		if _, err := file.WriteAt([]byte("XX"), int64(at)); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no segment in %s: %v", dir, names)
}

func TestSnapshot(t *testing.T) {
	mem := seed(t)
	doc, unlocked, err := Snapshot(mem, root, nil)
	if err != nil || unlocked {
		t.Fatalf("snapshot: unlocked %v, %v", unlocked, err)
	}
	if len(doc.Streams) != 3 || len(doc.Groups) != 1 || doc.Groups[0].Name != "billing" {
		t.Fatalf("streams %+v, groups %+v", doc.Streams, doc.Groups)
	}
	var queue bool
	for _, s := range doc.Streams {
		if s.Name == "orders" && s.Partition == 0 {
			queue = s.DeadLetter != nil && s.DeadLetter.NextOffset == 2
		}
	}
	if !queue || doc.Storage.DeadLetterBytes == 0 || len(doc.Recovery) != 4 {
		t.Fatalf("dead letters: %+v, recovery %d entries", doc.Storage, len(doc.Recovery))
	}

	d, _ := openDir(t, mem, true)
	defer d.Close()
	held, unlocked, err := Snapshot(mem, root, nil)
	if err != nil || !unlocked {
		t.Fatalf("snapshot of a held directory: unlocked %v, %v", unlocked, err)
	}
	if len(held.Streams) != 3 || len(held.Groups) != 0 || held.Readiness.Reason != "offline, a broker holds the directory" {
		t.Fatalf("without the lock: streams %d, groups %d, %q", len(held.Streams), len(held.Groups), held.Readiness.Reason)
	}
}

func TestSnapshotOfNoDirectory(t *testing.T) {
	if _, _, err := Snapshot(vfs.NewMemFS(), root, nil); !errors.Is(err, segment.ErrNotFound) {
		t.Fatalf("snapshot of nothing: %v", err)
	}
}
