package segment

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestFsyncErrorFreezes(t *testing.T) {
	mem := vfs.NewMemFS()
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpSyncData, vfs.OpSync), Err: vfs.InjectedEIO}
	d := openDir(t, vfs.Inject(mem, fault), testOptions(3))
	defer d.Close()
	l := openLog(t, d)
	var last Ticket
	for i := uint64(0); i < 50; i++ {
		last = appendBody(t, l, body(i, 100))
	}
	waitTicket(t, last)
	durable := l.Committed()

	fault.Set(true)
	failed := appendBody(t, l, body(50, 100))
	if err := failed.Wait(context.Background()); !errors.Is(err, ErrFrozen) || !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append after a failed fdatasync: %v, want ErrFrozen wrapping the cause", err)
	}
	fault.Set(false) // the disk "recovers": the log must not believe it
	if _, err := l.Append(context.Background(), body(51, 100), crc(body(51, 100))); !errors.Is(err, ErrFrozen) {
		t.Fatalf("append on a frozen log: %v, want ErrFrozen", err)
	}
	if _, err := l.WaitCommitted(context.Background(), durable); !errors.Is(err, ErrFrozen) {
		t.Fatalf("WaitCommitted on a frozen log: %v", err)
	}
	if l.Committed() != durable {
		t.Fatalf("committed moved from %d to %d after the failed sync", durable, l.Committed())
	}
	entries, gaps := readAll(t, l)
	if len(entries) != int(durable) || len(gaps) != 0 {
		t.Fatalf("frozen log reads %d records, %d gaps; want %d, 0", len(entries), len(gaps), durable)
	}
	if l.Info().Frozen == "" {
		t.Fatal("Info does not report the freeze")
	}
}

func TestFsyncErrorDuringSealFreezes(t *testing.T) {
	mem := vfs.NewMemFS()
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpSync), Err: vfs.InjectedEIO}
	d := openDir(t, vfs.Inject(mem, fault), testOptions(3))
	defer d.Close()
	l := openLog(t, d)
	waitTicket(t, appendBody(t, l, body(0, 100)))
	fault.Set(true)
	// A record larger than the room left forces a seal, whose fsync fails.
	ticket := appendBody(t, l, body(1, 63_000))
	if err := ticket.Wait(context.Background()); !errors.Is(err, ErrFrozen) {
		t.Fatalf("append across a failed seal: %v", err)
	}
}

func TestNoSpaceIsTypedAndRecoverable(t *testing.T) {
	mem := vfs.NewMemFS()
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpWrite), Err: vfs.InjectedNoSpace}
	opts := testOptions(4)
	d := openDir(t, vfs.Inject(mem, fault), opts)
	l := openLog(t, d)
	acked := map[uint64]uint64{}
	var next uint64
	appendSome := func(n int) {
		for i := 0; i < n; i++ {
			ticket := appendBody(t, l, body(next, bodySize(next)))
			waitTicket(t, ticket)
			acked[ticket.First] = next
			next++
		}
	}
	appendSome(40)
	fault.Set(true)
	for i := 0; i < 5; i++ {
		ticket, err := l.Append(context.Background(), body(1000, 100), crc(body(1000, 100)))
		if err == nil {
			err = ticket.Wait(context.Background())
		}
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("append on a full disk: %v, want ErrNoSpace", err)
		}
	}
	if l.Err() != nil {
		t.Fatalf("no space must not freeze the log: %v", l.Err())
	}
	fault.Set(false)
	appendSome(80) // crosses rolls, so the full-disk path met the roll too
	assertLogAndReopened(t, d, l, mem, opts, acked)
}

func TestNoSpaceAtRollResumes(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(5)
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	acked := map[uint64]uint64{}
	waitTicket(t, appendBody(t, l, body(0, 100)))
	acked[0] = 0
	mem.SetCapacity(150 << 10) // room for the active segment, not for many more
	var next uint64 = 1
	sawNoSpace := false
	for i := 0; i < 200 && !sawNoSpace; i++ {
		ticket, err := l.Append(context.Background(), body(next, 3000), crc(body(next, 3000)))
		if err == nil {
			err = ticket.Wait(context.Background())
		}
		switch {
		case errors.Is(err, ErrNoSpace):
			sawNoSpace = true
		case err != nil:
			t.Fatalf("append: %v", err)
		default:
			acked[ticket.First] = next
			next++
		}
	}
	if !sawNoSpace {
		t.Fatal("the capacity limit never produced ErrNoSpace")
	}
	mem.SetCapacity(0)
	for i := 0; i < 30; i++ {
		ticket := appendBody(t, l, body(next, 3000))
		waitTicket(t, ticket)
		acked[ticket.First] = next
		next++
	}
	assertLog(t, l, acked)
	_ = d.Close()
}

// assertLog checks that l holds exactly the acknowledged records, in order,
// with no gaps and no reused offsets.
// assertLogAndReopened asserts the log holds acked, closes its directory
// (d must not be closed elsewhere) and asserts it again after a reopen
// on fsys without the faults d was opened with.
func assertLogAndReopened(t *testing.T, d *Dir, l *Log, fsys vfs.FS, opts Options, acked map[uint64]uint64) {
	t.Helper()
	assertLog(t, l, acked)
	_ = d.Close()
	reopened := openDir(t, fsys, opts)
	defer reopened.Close()
	assertLog(t, openLog(t, reopened), acked)
}

func assertLog(t *testing.T, l *Log, acked map[uint64]uint64) {
	t.Helper()
	entries, gaps := readAll(t, l)
	if len(gaps) != 0 {
		t.Fatalf("unexpected gaps %+v", gaps)
	}
	if len(entries) != len(acked) {
		t.Fatalf("log holds %d records, %d were acknowledged", len(entries), len(acked))
	}
	for i, e := range entries {
		if e.Offset != uint64(i) {
			t.Fatalf("entry %d has offset %d", i, e.Offset)
		}
		if got, want := payloadIndex(t, e.Body), acked[e.Offset]; got != want {
			t.Fatalf("offset %d holds record %d, acknowledged %d", e.Offset, got, want)
		}
	}
}

// buildSealedLog writes small records in single-record batches and then a
// large one, so the first segment is sealed small and a second is active.
func buildSealedLog(t *testing.T, records int) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(6))
	l := openLog(t, d)
	for i := 0; i < records; i++ {
		waitTicket(t, appendBody(t, l, body(uint64(i), 20)))
	}
	waitTicket(t, appendBody(t, l, body(uint64(records), 63_000)))
	if got := len(l.segments.Load().segments); got != 2 {
		t.Fatalf("want 2 segments, got %d", got)
	}
	_ = d.Close()
	return mem
}

func firstSegmentPath() string {
	return path.Join("/data", streamsDirName, DefaultStream, "0", segmentFileName(0))
}

func TestCorruptSegmentHeaderIsQuarantined(t *testing.T) {
	mem := buildSealedLog(t, 8)
	flipByte(t, mem, firstSegmentPath(), 20)
	d := openDir(t, mem, testOptions(7))
	l := openLog(t, d)
	report := l.Report()
	if len(report.Events) != 1 || report.Events[0].Reason != ReasonCorruptSegmentHdr || report.Events[0].Records != 8 {
		t.Fatalf("report %+v", report)
	}
	if q := report.Events[0].Quarantine; !strings.HasPrefix(q, "quarantine/") {
		t.Fatalf("not quarantined: %q", q)
	}
	entries, gaps := readAll(t, l)
	if len(entries) != 1 || len(gaps) != 1 || gaps[0].From != 0 || gaps[0].To != 8 {
		t.Fatalf("entries %d gaps %+v", len(entries), gaps)
	}
	waitTicket(t, appendBody(t, l, body(9, 10)))
	_ = d.Close()
	// The stub explains the gap: a second recovery finds nothing new.
	d = openDir(t, mem, testOptions(7))
	defer d.Close()
	l = openLog(t, d)
	if r := l.Report(); r.Outcome != OutcomeClean {
		t.Fatalf("second recovery: %+v", r)
	}
	entries, gaps = readAll(t, l)
	if len(entries) != 2 || len(gaps) != 1 {
		t.Fatalf("after reopen: entries %d gaps %+v", len(entries), gaps)
	}
}

func TestCorruptRecordInActiveSegmentCostsOneBatch(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(8)
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	for i := uint64(0); i < 30; i++ {
		waitTicket(t, appendBody(t, l, body(i, 50)))
	}
	_ = d.Close()
	// Damage the body of record 10: its batch (one record) is lost, the
	// rest of the segment survives.
	segPath := path.Join("/data", streamsDirName, DefaultStream, "0", segmentFileName(0))
	pos := recordPosition(t, mem, segPath, 10)
	flipByte(t, mem, segPath, pos+record.FrameHeaderSize+3)
	d = openDir(t, mem, opts)
	l = openLog(t, d)
	// The clean close left a marker, so the damage is found by the first
	// read of the segment rather than by recovery.
	entries, gaps := readAll(t, l)
	if len(entries) != 29 || len(gaps) != 1 || gaps[0].From != 10 || gaps[0].To != 11 {
		t.Fatalf("entries %d gaps %+v", len(entries), gaps)
	}
	report := l.Report()
	if report.LossRecords != 1 || report.Events[0].FirstOffset != 10 || report.Events[0].Reason != ReasonCorruptRecordBody {
		t.Fatalf("report %+v", report)
	}
	waitTicket(t, appendBody(t, l, body(30, 50)))
	_ = d.Close()
	d = openDir(t, mem, opts)
	defer d.Close()
	if r := openLog(t, d).Report(); r.Outcome != OutcomeClean || r.KnownGaps != 1 {
		t.Fatalf("the skip frame should make the second recovery clean, with one known gap: %+v", r)
	}
}

func TestCorruptBeyondCapsFreezesWithoutChanges(t *testing.T) {
	mem := vfs.NewMemFS()
	opts := testOptions(9)
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	for i := uint64(0); i < 300; i++ {
		waitTicket(t, appendBody(t, l, body(i, 1000)))
	}
	segs := l.segments.Load().segments
	if len(segs) < 4 {
		t.Fatalf("want at least 4 segments, have %d", len(segs))
	}
	damaged := []string{segs[1].name, segs[2].name}
	_ = d.Close()
	// Two unreadable segment headers: two whole segments lost, above the
	// cap of max(1 % of the log, one segment).
	logPath := path.Join("/data", streamsDirName, DefaultStream, "0")
	for _, name := range damaged {
		flipByte(t, mem, path.Join(logPath, name), 3)
	}
	before := snapshotFiles(t, mem, "/data")
	d = openDir(t, mem, opts)
	l = openLog(t, d)
	if !errors.Is(l.Err(), ErrLossCapExceeded) || !errors.Is(l.Err(), ErrFrozen) {
		t.Fatalf("want a frozen log above the caps, got %v (report %+v)", l.Err(), l.Report())
	}
	if _, err := l.Append(context.Background(), body(1, 10), crc(body(1, 10))); !errors.Is(err, ErrFrozen) {
		t.Fatalf("append on a log frozen by the caps: %v", err)
	}
	entries, gaps := readAll(t, l)
	if len(entries) == 0 || len(gaps) != 1 {
		t.Fatalf("frozen log should still serve its intact records: %d records, gaps %+v", len(entries), gaps)
	}
	_ = d.Close()
	delete(before, "/data/"+reportFileName)
	after := snapshotFiles(t, mem, "/data")
	delete(after, "/data/"+reportFileName)
	for name, data := range before {
		if after[name] != data {
			t.Fatalf("%s changed although recovery was above the caps", name)
		}
	}
	// What `ironbus repair` does: accept the loss.
	opts.AcceptLoss = true
	d = openDir(t, mem, opts)
	defer d.Close()
	l = openLog(t, d)
	if l.Err() != nil || l.Report().LossRecords == 0 {
		t.Fatalf("repair should apply the loss: %v %+v", l.Err(), l.Report())
	}
	waitTicket(t, appendBody(t, l, body(300, 10)))
}

// snapshotFiles returns the contents of every file under dir.
func snapshotFiles(t *testing.T, mem *vfs.MemFS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, err := mem.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		full := path.Join(dir, name)
		info, err := mem.Stat(full)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir {
			for k, v := range snapshotFiles(t, mem, full) {
				out[k] = v
			}
			continue
		}
		data, err := vfs.ReadFile(mem, full)
		if err != nil {
			t.Fatal(err)
		}
		out[full] = string(data)
	}
	return out
}

func TestBitFlipSweepSealedSegment(t *testing.T) {
	const records = 6
	original := buildSealedLog(t, records)
	segPath := firstSegmentPath()
	data, err := vfs.ReadFile(original, segPath)
	if err != nil {
		t.Fatal(err)
	}
	batchOf := batchBoundaries(t, data)
	positions := flipPositions(len(data))
	started := time.Now()
	for _, pos := range positions {
		for bit := 0; bit < 8; bit++ {
			image := original.CrashClone(vfs.CrashOptions{})
			flipBit(t, image, segPath, pos, bit)
			checkFlip(t, image, pos, bit, records, batchOf)
		}
	}
	t.Logf("%d bit flips over a %d-byte sealed segment in %v", len(positions)*8, len(data), time.Since(started))
}

// flipPositions lists every byte of a small sealed segment that carries
// information: the header, every frame and the footer (the zero padding
// of the header block is sampled).
func flipPositions(size int) []int {
	var positions []int
	for pos := 0; pos < size; pos++ {
		if pos >= format.SegmentHeaderSize && pos < format.SegmentDataStart && pos%97 != 0 {
			continue
		}
		positions = append(positions, pos)
	}
	return positions
}

// checkFlip opens an image with one flipped bit and checks the promise:
// every record is returned intact or covered by a reported gap, records of
// batches the flip did not touch survive, nothing panics, nothing wrong is
// returned.
func checkFlip(t *testing.T, image *vfs.MemFS, pos, bit, records int, batchOf map[int][2]int) {
	t.Helper()
	label := fmt.Sprintf("flip byte %d bit %d", pos, bit)
	d, err := Open(image, "/data", testOptions(10))
	if err != nil {
		t.Fatalf("%s: open: %v", label, err)
	}
	defer d.Close()
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		t.Fatalf("%s: open log: %v", label, err)
	}
	entries, gaps := readAll(t, l)
	report := l.Report()
	present := map[uint64]bool{}
	for _, e := range entries {
		if payloadIndex(t, e.Body) != e.Offset || string(e.Body) != string(body(e.Offset, bodySizeForFlip(e.Offset, records))) {
			t.Fatalf("%s: offset %d returned a wrong record", label, e.Offset)
		}
		present[e.Offset] = true
	}
	for offset := uint64(0); offset <= uint64(records); offset++ {
		if present[offset] {
			continue
		}
		if !covered(gaps, offset) {
			t.Fatalf("%s: offset %d missing without a gap; gaps %+v", label, offset, gaps)
		}
		if !report.HasDataLoss() {
			t.Fatalf("%s: offset %d lost but no loss reported: %+v", label, offset, report)
		}
		inHeader := pos < format.SegmentHeaderSize
		if batch, ok := batchOf[pos]; !inHeader && (!ok || offset < uint64(batch[0]) || offset > uint64(batch[1])) {
			t.Fatalf("%s: offset %d lost though the flip hit batch %v", label, offset, batch)
		}
	}
}

func bodySizeForFlip(offset uint64, records int) int {
	if offset == uint64(records) {
		return 63_000
	}
	return 20
}

func covered(gaps []Gap, offset uint64) bool {
	for _, g := range gaps {
		if offset >= g.From && offset < g.To {
			return true
		}
	}
	return false
}

// batchBoundaries maps every byte position of a segment's data to the
// offsets of the batch holding it (records and their commit frame).
func batchBoundaries(t *testing.T, data []byte) map[int][2]int {
	t.Helper()
	result := map[int][2]int{}
	pos, start := format.SegmentDataStart, format.SegmentDataStart
	first, last := -1, -1
	for pos < len(data) {
		switch format.PeekKind(data[pos:]) {
		case format.KindRecord:
			h, _, err := record.ParseFrame(data[pos:], record.DefaultMaxBody)
			if err != nil {
				t.Fatal(err)
			}
			if first < 0 {
				first = int(h.Offset)
			}
			last = int(h.Offset)
			pos += int(h.FrameLength)
		case format.KindCommit:
			pos += format.CommitFrameSize
			for p := start; p < pos; p++ {
				result[p] = [2]int{first, last}
			}
			start, first = pos, -1
		default:
			return result
		}
	}
	return result
}

func recordPosition(t *testing.T, mem *vfs.MemFS, file string, offset uint64) int {
	t.Helper()
	data, err := vfs.ReadFile(mem, file)
	if err != nil {
		t.Fatal(err)
	}
	for pos := format.SegmentDataStart; pos < len(data); {
		switch format.PeekKind(data[pos:]) {
		case format.KindRecord:
			h, err := record.ParseFrameHeader(data[pos:], record.DefaultMaxBody)
			if err != nil {
				t.Fatal(err)
			}
			if h.Offset == offset {
				return pos
			}
			pos += int(h.FrameLength)
		case format.KindCommit:
			pos += format.CommitFrameSize
		default:
			t.Fatalf("offset %d not found in %s", offset, file)
		}
	}
	t.Fatalf("offset %d not found in %s", offset, file)
	return 0
}

func firstOffsetOf(t *testing.T, mem *vfs.MemFS, file string) uint64 {
	t.Helper()
	data, err := vfs.ReadFile(mem, file)
	if err != nil {
		t.Fatal(err)
	}
	h, err := format.DecodeSegmentHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	return h.BaseOffset
}

func flipByte(t *testing.T, mem *vfs.MemFS, file string, pos int) { flipBit(t, mem, file, pos, 0) }

func flipBit(t *testing.T, mem *vfs.MemFS, file string, pos, bit int) {
	t.Helper()
	f, err := mem.OpenFile(file, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, int64(pos)); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, int64(pos)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptReportFileRecordsTheLoss(t *testing.T) {
	mem := buildSealedLog(t, 8)
	flipByte(t, mem, firstSegmentPath(), 20)
	d := openDir(t, mem, testOptions(12))
	openLog(t, d)
	_ = d.Close()
	data, err := vfs.ReadFile(mem, "/data/"+reportFileName)
	if err != nil {
		t.Fatal(err)
	}
	var report RecoveryReport
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatal(err)
	}
	if report.Schema != ReportSchema || len(report.Logs) != 1 || report.Logs[0].Outcome != OutcomeDataLoss ||
		report.Logs[0].Events[0].Reason != ReasonCorruptSegmentHdr || report.Logs[0].LossRecords != 8 {
		t.Fatalf("recovery-report.json: %s", data)
	}
}

func TestCorruptReadErrorFailsOnlyThatLog(t *testing.T) {
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(13))
	for _, stream := range []string{"good", "bad"} {
		l, err := d.OpenLog(LogID{Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		waitTicket(t, appendBody(t, l, body(0, 10)))
	}
	_ = d.Close()
	readFault := &vfs.Toggle{Match: func(op vfs.Op) bool {
		return op.Kind == vfs.OpRead && strings.Contains(op.Path, "/bad/")
	}, Err: vfs.InjectedEIO}
	readFault.Set(true)
	d = openDir(t, vfs.Inject(mem, readFault), testOptions(13))
	defer d.Close()
	if _, err := d.OpenLog(LogID{Stream: "bad"}); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("a read error during recovery: %v", err)
	}
	good, err := d.OpenLog(LogID{Stream: "good"})
	if err != nil {
		t.Fatalf("another log must still open: %v", err)
	}
	waitTicket(t, appendBody(t, good, body(1, 10)))
}

func TestCorruptNewerFormatIsRefused(t *testing.T) {
	mem := buildSealedLog(t, 3)
	// A segment header from a newer format, with a valid checksum.
	f, err := mem.OpenFile(firstSegmentPath(), vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, format.SegmentHeaderSize)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	head[8] = format.SegmentFormatVersion + 1
	binary.LittleEndian.PutUint32(head[60:], format.CRC(head[:60]))
	if _, err := f.WriteAt(head, 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	d := openDir(t, mem, testOptions(14))
	defer d.Close()
	l := openLog(t, d)
	if !errors.Is(l.Err(), ErrTooNew) || !errors.Is(l.Err(), ErrFrozen) {
		t.Fatalf("a newer segment format: %v", l.Err())
	}
	if err := mem.MkdirAll("/other"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "/other/"+formatFileName, []byte(`{"format":"ironbus-data","version":99}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem, "/other", testOptions(14)); !errors.Is(err, ErrTooNew) {
		t.Fatalf("a newer data directory: %v", err)
	}
}

func TestCorruptMixedUpFilesFreeze(t *testing.T) {
	for _, tc := range []struct {
		name  string
		place func(t *testing.T, mem *vfs.MemFS, logPath string)
	}{
		{"foreign segment", func(t *testing.T, mem *vfs.MemFS, logPath string) {
			// A segment of another stream copied under this log's name
			// for the next base offset.
			other := path.Join("/data", streamsDirName, "other", "0", segmentFileName(0))
			data, err := vfs.ReadFile(mem, other)
			if err != nil {
				t.Fatal(err)
			}
			if err := vfs.WriteFileAtomic(mem, path.Join(logPath, segmentFileName(1000)), data); err != nil {
				t.Fatal(err)
			}
		}},
		{"misnamed segment", func(t *testing.T, mem *vfs.MemFS, logPath string) {
			if err := mem.Rename(path.Join(logPath, segmentFileName(0)), path.Join(logPath, segmentFileName(1))); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := buildSealedLog(t, 4)
			d := openDir(t, mem, testOptions(16))
			other, err := d.OpenLog(LogID{Stream: "other"})
			if err != nil {
				t.Fatal(err)
			}
			waitTicket(t, appendBody(t, other, body(0, 10)))
			_ = d.Close()
			logPath := path.Join("/data", streamsDirName, DefaultStream, "0")
			tc.place(t, mem, logPath)
			d = openDir(t, mem, testOptions(16))
			defer d.Close()
			l := openLog(t, d)
			if !errors.Is(l.Err(), ErrInconsistent) || !errors.Is(l.Err(), ErrFrozen) {
				t.Fatalf("mixed-up files: %v", l.Err())
			}
			if _, err := d.OpenLog(LogID{Stream: "other"}); err != nil {
				t.Fatalf("the other log must be unaffected: %v", err)
			}
		})
	}
}

func TestFsyncErrorStopsTheCommittedMark(t *testing.T) {
	// A sync fails while more batches are already written: nothing after
	// the failure may become committed, even if a later sync succeeds.
	mem := vfs.NewMemFS()
	var armed, failed atomic.Bool
	fault := vfs.InjectorFunc(func(op vfs.Op) error {
		if armed.Load() && op.Kind == vfs.OpSyncData && isLogFile(op.Path) && failed.CompareAndSwap(false, true) {
			return vfs.InjectedEIO
		}
		return nil
	})
	d := openDir(t, mem, testOptions(17))
	defer d.Close()
	l := openLog(t, d)
	waitTicket(t, appendBody(t, l, body(0, 10)))
	_ = d.Close()
	d = openDir(t, vfs.Inject(mem, fault), testOptions(17))
	l = openLog(t, d)
	armed.Store(true) // one fdatasync fails; the ones after it succeed
	before := l.Committed()
	var tickets []Ticket
	for i := uint64(1); i < 200; i++ {
		ticket, err := l.Append(context.Background(), body(i, 100), crc(body(i, 100)))
		if err != nil {
			break
		}
		tickets = append(tickets, ticket)
	}
	for _, ticket := range tickets {
		if err := ticket.Wait(context.Background()); err == nil {
			t.Fatalf("offset %d acknowledged after a failed fdatasync", ticket.First)
		}
	}
	time.Sleep(10 * time.Millisecond) // let any in-flight cycle finish
	if got := l.Committed(); got != before {
		t.Fatalf("committed mark moved from %d to %d after the failed sync", before, got)
	}
}
