package backup

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// memLog writes count records to log id of the data directory root on
// mem, with small segments.
func memLog(t *testing.T, mem *vfs.MemFS, root string, id segment.LogID, count int) {
	t.Helper()
	dir, err := segment.Open(mem, root, segment.Options{SegmentSize: segment.MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	log, err := dir.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	var last segment.Ticket
	for i := 0; i < count; i++ {
		b := recordBody(t, i)
		if last, err = log.Append(context.Background(), b, record.Checksum(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := dir.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBackupSurvivesRetentionAndCopiesDeadLetters: the oldest segment
// vanishing just before it is copied (retention) moves the backup's start
// on, with a note; nested data directories (deadletters/) come along and
// restore.
func TestBackupSurvivesRetentionAndCopiesDeadLetters(t *testing.T) {
	mem := vfs.NewMemFS()
	orders := segment.LogID{Stream: "orders"}
	memLog(t, mem, "/data", orders, 1500)
	memLog(t, mem, "/data/deadletters", orders, 30)
	oldest := "/data/streams/orders/0/00000000000000000000.seg"
	var deleted atomic.Bool
	fsys := vfs.Inject(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpOpen && op.Path == oldest && !deleted.Swap(true) {
			_ = mem.Remove(oldest) // retention, at the worst moment
		}
		return nil
	}))
	result, err := Create("/data", "/backup", Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Warnings) != 1 || !strings.Contains(result.Warnings[0], "retention") {
		t.Fatalf("warnings: %q", result.Warnings)
	}
	logs := result.Manifest.Logs
	if len(logs) != 2 || logs[0].FirstOffset == 0 || logs[0].NextOffset != 1500 ||
		logs[1].Dir != "deadletters" || logs[1].NextOffset != 30 {
		t.Fatalf("backup holds %+v", logs)
	}
	if _, err := Restore("/backup", "/restored", RestoreOptions{FS: mem}); err != nil {
		t.Fatal(err)
	}
	report, err := Scrub(mem, "/restored", nil)
	if err != nil || report.Damaged != 0 || len(report.Logs) != 2 || report.Logs[1].NextOffset != 30 {
		t.Fatalf("scrub of the restore: %+v %v", report, err)
	}
	dir, err := segment.Open(mem, "/restored", segment.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	log, err := dir.OpenLog(orders)
	if err != nil {
		t.Fatal(err)
	}
	if log.FirstOffset() != logs[0].FirstOffset || log.Committed() != 1500 {
		t.Fatalf("restored log holds %d..%d", log.FirstOffset(), log.Committed())
	}
}
