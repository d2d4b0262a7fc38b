package segment

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

var updateTestdata = flag.Bool("update", false, "regenerate segment/testdata/demo and segment/testdata/damaged")

// demoRecords is how many records the checked-in demo log holds.
const demoRecords = 600

// writeDemoLog writes a small log deterministically (fixed clock, seeded
// tokens, one record per batch) into dir on the real file system.
func writeDemoLog(t *testing.T, dir string) {
	t.Helper()
	opts := testOptions(2026)
	opts.Preallocation = PreallocateNone
	d, err := Open(vfs.OS{}, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := openLog(t, d)
	for i := uint64(0); i < demoRecords; i++ {
		encoded, err := record.AppendBody(nil, record.Body{
			Key:     []byte(fmt.Sprintf("sensor-%d", i%5)),
			Subject: []byte("telemetry.temperature"),
			Headers: []record.Header{{Name: "unit", Value: []byte("celsius")}},
			Payload: []byte(fmt.Sprintf(`{"seq":%d,"celsius":%d.%d}`, i, 18+i%7, i%10)),
		})
		if err != nil {
			t.Fatal(err)
		}
		waitTicket(t, appendBody(t, l, encoded))
		if i == 350 {
			// One large record forces a roll, so the demo has a sealed
			// segment and an active one.
			big, _ := record.AppendBody(nil, record.Body{Key: []byte("firmware"), Payload: make([]byte, 60_000)})
			waitTicket(t, appendBody(t, l, big))
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, reportFileName))
}

// TestGenerateTestdata rewrites the checked-in directories with -update;
// without it, it checks that they still open as expected.
func TestGenerateTestdata(t *testing.T) {
	demo, damaged := filepath.Join("testdata", "demo"), filepath.Join("testdata", "damaged")
	if *updateTestdata {
		for _, dir := range []string{demo, damaged} {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}
		writeDemoLog(t, demo)
		writeDemoLog(t, damaged)
		corruptCommittedRecord(t, damaged)
	}
	checkTestdata(t, demo, false)
	checkTestdata(t, damaged, true)
}

// corruptCommittedRecord flips one byte in the body of a record in the
// middle of the active segment: committed data, with intact batches after.
func corruptCommittedRecord(t *testing.T, dir string) {
	t.Helper()
	segDir := filepath.Join(dir, streamsDirName, DefaultStream, "0")
	names, err := os.ReadDir(segDir)
	if err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(segDir, names[len(names)-1].Name())
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(format.SegmentDataStart)
	for i := 0; i < 40; i++ { // walk 20 batches (record + commit frame each)
		pos += int64(frameLength(data[pos:]))
	}
	data[pos+record.FrameHeaderSize+5] ^= 0x40
	if err := os.WriteFile(last, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func checkTestdata(t *testing.T, dir string, wantLoss bool) {
	t.Helper()
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(1)
	opts.ReadOnly = true
	d, err := Open(vfs.OS{}, tmp, opts)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	defer d.Close()
	l := openLog(t, d)
	report, err := l.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if report.HasDataLoss() != wantLoss {
		t.Fatalf("%s: data loss %v, want %v: %+v", dir, report.HasDataLoss(), wantLoss, report)
	}
	entries, gaps := readAll(t, l)
	want := demoRecords + 1
	if wantLoss {
		want--
	}
	if len(entries) != want || len(gaps) != btoi(wantLoss) {
		t.Fatalf("%s: %d records and %d gaps; want %d and %d", dir, len(entries), len(gaps), want, btoi(wantLoss))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
