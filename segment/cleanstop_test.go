package segment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"reflect"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

const logDirPath = "/data/streams/" + DefaultStream + "/0"

// cleanSubjectBody is body(index) with one of a few subjects, and now and then
// a subject of its own, so the summary has ids, unknowns and spots.
func cleanSubjectBody(index uint64) []byte {
	subject := fmt.Sprintf("sensors.%d", index%5)
	if index%11 == 0 {
		subject = fmt.Sprintf("rare.%d", index)
	}
	payload := make([]byte, 16+int(index*7919%700))
	binary.LittleEndian.PutUint64(payload, index)
	binary.LittleEndian.PutUint64(payload[8:], ^index)
	encoded, err := record.AppendBody(nil, record.Body{Subject: []byte(subject), Payload: payload})
	if err != nil {
		panic(err)
	}
	return encoded
}

func appendSubjects(t *testing.T, l *Log, from, to uint64) {
	t.Helper()
	for i := from; i < to; i += 4 {
		var bodies [][]byte
		var crcs []uint32
		for j := i; j < min(i+4, to); j++ {
			b := cleanSubjectBody(j)
			bodies, crcs = append(bodies, b), append(crcs, crc(b))
		}
		ticket, err := l.AppendBatch(context.Background(), bodies, crcs)
		if err != nil {
			t.Fatal(err)
		}
		waitTicket(t, ticket)
	}
}

// cleanImage appends records and closes cleanly; it returns the file
// system holding the marker.
func cleanImage(t *testing.T, opts Options, records uint64) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMemFS()
	d := openDir(t, mem, opts)
	appendSubjects(t, openLog(t, d), 0, records)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(path.Join(logDirPath, cleanStopName)); err != nil {
		t.Fatalf("no clean-stop marker after a clean close: %v", err)
	}
	return mem
}

func withoutMarker(t *testing.T, mem *vfs.MemFS) *vfs.MemFS {
	t.Helper()
	clone := mem.CrashClone(vfs.CrashOptions{})
	if err := clone.Remove(path.Join(logDirPath, cleanStopName)); err != nil {
		t.Fatal(err)
	}
	return clone
}

// activeState is what a restart must restore of the active segment, from
// the marker or from a scan alike.
func activeState(l *Log) map[string]any {
	a := &l.app
	s := a.active
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{
		"pos": a.pos, "size": a.size, "next": a.next, "count": a.count, "first": a.first,
		"minTS": a.minTS, "maxTS": a.maxTS, "lastIndexed": a.lastIndexed,
		"dictSlab": string(a.dict.dict.slab), "dictEnds": fmt.Sprint(a.dict.dict.ends), "slots": a.dict.slots,
		"spotEnds": fmt.Sprint(a.spots.ends), "spots": fmt.Sprint(a.spots.spots),
		"spotOpen": a.spots.open, "spotSpoiled": a.spots.spoiled, "spotStart": a.spots.start,
		"index": fmt.Sprint(s.mu.index), "blocks": fmt.Sprint(s.mu.summary.blocks),
		"segNext": s.mu.next, "records": s.mu.records, "segMin": s.mu.minTS, "segMax": s.mu.maxTS,
		"segSize": s.mu.size, "indexBuilt": s.mu.indexBuilt,
	}
}

func TestCleanStopRestoresWhatAScanFinds(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(3)
			opts.IOMode = mode
			opts.SegmentSize = 1 << 20
			trusted := cleanImage(t, opts, 1500)
			scanned := withoutMarker(t, trusted)

			dt, ds := openDir(t, trusted, opts), openDir(t, scanned, opts)
			lt, ls := openLog(t, dt), openLog(t, ds)
			if r := lt.Report(); !r.CleanStop || r.ScannedBytes != 0 {
				t.Fatalf("clean restart scanned: %+v", r)
			}
			if r := ls.Report(); r.CleanStop || r.ScannedBytes == 0 {
				t.Fatalf("restart without a marker did not scan: %+v", r)
			}
			if _, err := trusted.Stat(path.Join(logDirPath, cleanStopName)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the marker outlives the open that trusted it: %v", err)
			}
			if got, want := activeState(lt), activeState(ls); !reflect.DeepEqual(got, want) {
				for k := range want {
					if !reflect.DeepEqual(got[k], want[k]) {
						t.Errorf("%s: from the marker %v, from a scan %v", k, got[k], want[k])
					}
				}
				t.FailNow()
			}
			if !lt.app.active.trustPending.Load() || ls.app.active.trustPending.Load() {
				t.Fatal("only the segment installed from the marker waits for its first-read check")
			}
			// The same appends then write the same bytes, and the same
			// marker.
			appendSubjects(t, lt, 1500, 1700)
			appendSubjects(t, ls, 1500, 1700)
			name := lt.app.active.name
			_ = dt.Close()
			_ = ds.Close()
			for _, file := range []string{name, cleanStopName} {
				a, errA := vfs.ReadFile(trusted, path.Join(logDirPath, file))
				b, errB := vfs.ReadFile(scanned, path.Join(logDirPath, file))
				if errA != nil || errB != nil || !slices.Equal(a, b) {
					t.Fatalf("%s differs after the same appends (%v, %v)", file, errA, errB)
				}
			}
			d := openDir(t, trusted, opts)
			entries, gaps := readAll(t, openLog(t, d))
			if len(entries) != 1700 || len(gaps) != 0 {
				t.Fatalf("read %d records and %d gaps, want 1700 and none", len(entries), len(gaps))
			}
			for i, e := range entries {
				if e.Offset != uint64(i) || !slices.Equal(e.Body, cleanSubjectBody(uint64(i))) {
					t.Fatalf("offset %d: wrong record", e.Offset)
				}
			}
			_ = d.Close()
		})
	}
}

// rewriteMarker decodes the marker, lets change edit it, and writes it
// back with a valid CRC.
func rewriteMarker(t *testing.T, mem *vfs.MemFS, change func(m *cleanStop)) {
	t.Helper()
	file := path.Join(logDirPath, cleanStopName)
	image, err := vfs.ReadFile(mem, file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeCleanStop(image)
	if err != nil {
		t.Fatal(err)
	}
	change(m)
	if err := vfs.WriteFileAtomic(mem, file, m.encode()); err != nil {
		t.Fatal(err)
	}
}

func TestCleanStopNotTrusted(t *testing.T) {
	opts := testOptions(5)
	cases := map[string]func(t *testing.T, mem *vfs.MemFS){
		"flipped byte": func(t *testing.T, mem *vfs.MemFS) {
			file := path.Join(logDirPath, cleanStopName)
			image, _ := vfs.ReadFile(mem, file)
			image[len(image)/2] ^= 1
			_ = vfs.WriteFileAtomic(mem, file, image)
		},
		"newer version": func(t *testing.T, mem *vfs.MemFS) {
			file := path.Join(logDirPath, cleanStopName)
			image, _ := vfs.ReadFile(mem, file)
			binary.LittleEndian.PutUint16(image[4:6], cleanStopVersion+1)
			binary.LittleEndian.PutUint32(image[len(image)-4:], format.CRC(image[:len(image)-4]))
			if _, err := decodeCleanStop(image); !errors.Is(err, ErrTooNew) {
				t.Fatalf("a newer marker decodes with %v, want ErrTooNew", err)
			}
			_ = vfs.WriteFileAtomic(mem, file, image)
		},
		"other token":     func(t *testing.T, mem *vfs.MemFS) { rewriteMarker(t, mem, func(m *cleanStop) { m.token++ }) },
		"other file size": func(t *testing.T, mem *vfs.MemFS) { rewriteMarker(t, mem, func(m *cleanStop) { m.fileSize++ }) },
		"end too early":   func(t *testing.T, mem *vfs.MemFS) { rewriteMarker(t, mem, func(m *cleanStop) { m.end -= 8 }) },
		"next off by one": func(t *testing.T, mem *vfs.MemFS) { rewriteMarker(t, mem, func(m *cleanStop) { m.next-- }) },
		"other partition": func(t *testing.T, mem *vfs.MemFS) { rewriteMarker(t, mem, func(m *cleanStop) { m.partition++ }) },
		"leftover temp only": func(t *testing.T, mem *vfs.MemFS) {
			if err := mem.Rename(path.Join(logDirPath, cleanStopName), path.Join(logDirPath, cleanStopTempName)); err != nil {
				t.Fatal(err)
			}
		},
		// A marker that outlived later writes (restored from an old copy,
		// or left by a binary that did not remove it) must not hide them.
		"stale after appends": func(t *testing.T, mem *vfs.MemFS) {
			file := path.Join(logDirPath, cleanStopName)
			old, _ := vfs.ReadFile(mem, file)
			d := openDir(t, mem, opts)
			appendSubjects(t, openLog(t, d), 400, 430)
			_ = d.Close()
			_ = vfs.WriteFileAtomic(mem, file, old)
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			mem := cleanImage(t, opts, 400)
			spoil(t, mem)
			want := uint64(400)
			if name == "stale after appends" {
				want = 430
			}
			d := openDir(t, mem, opts)
			defer d.Close()
			l := openLog(t, d)
			if r := l.Report(); r.CleanStop || r.NextOffset != want || r.HasDataLoss() {
				t.Fatalf("report %+v, want a scan ending at %d", r, want)
			}
			for _, file := range []string{cleanStopName, cleanStopTempName} {
				if _, err := mem.Stat(path.Join(logDirPath, file)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s left after a writable open: %v", file, err)
				}
			}
			if entries, _ := readAll(t, l); len(entries) != int(want) {
				t.Fatalf("read %d records, want %d", len(entries), want)
			}
		})
	}
}

func TestCleanStopReadOnlyOpenScansAndKeepsMarker(t *testing.T) {
	opts := testOptions(6)
	mem := cleanImage(t, opts, 200)
	ro := opts
	ro.ReadOnly = true
	d := openDir(t, mem, ro)
	l := openLog(t, d)
	if r := l.Report(); r.CleanStop || r.ScannedBytes == 0 {
		t.Fatalf("a read-only open must scan: %+v", r)
	}
	_ = d.Close()
	if _, err := mem.Stat(path.Join(logDirPath, cleanStopName)); err != nil {
		t.Fatalf("a read-only open removed the marker: %v", err)
	}
	d = openDir(t, mem, opts)
	defer d.Close()
	if r := openLog(t, d).Report(); !r.CleanStop {
		t.Fatalf("the marker kept by a read-only open is not trusted: %+v", r)
	}
}

// TestCrashCleanStopProtocol cuts power at every write of two runs: a
// writable open that trusts and removes the marker, appends, and a clean
// close that writes the marker again; then a second open, appends and
// close. Each image must recover every acknowledged record, so no marker
// ever hides a write made after it.
func TestCrashCleanStopProtocol(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		for _, keep := range []float64{0, 0.5} {
			t.Run(fmt.Sprintf("%s/keep-unsynced-%v", mode, keep), func(t *testing.T) {
				opts := testOptions(0)
				opts.IOMode = mode
				base, acked := cleanCrashImage(t, opts)
				crashEveryWrite(t, "clean-stop", opts, keep, func() (*vfs.MemFS, map[uint64]uint64) {
					return base.CrashClone(vfs.CrashOptions{}), maps.Clone(acked)
				}, func(c *crashRig, l *Log) {
					if r := l.Report(); !r.CleanStop {
						t.Fatalf("the clean image was scanned: %+v", r)
					}
					c.appendWorkload(l, 2, 12, 0)
					if l.dir.Close() != nil || c.crashed.Load() {
						return
					}
					d, err := Open(c.fs, "/data", opts)
					if err != nil {
						return
					}
					defer d.Close()
					if l, err := d.OpenLog(defaultLog); err == nil {
						c.appendWorkload(l, 1, 8, 0)
					}
				})
			})
		}
	}
}

// cleanCrashImage is a cleanly closed log of the crash workload's records.
func cleanCrashImage(t *testing.T, opts Options) (*vfs.MemFS, map[uint64]uint64) {
	t.Helper()
	c := newCrashRig(vfs.NewMemFS(), 1<<40, vfs.CrashOptions{})
	d := openDir(t, c.fs, opts)
	c.appendWorkload(openLog(t, d), 1, 30, 0)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return c.mem, c.acked
}

// TestCleanStopDamageFoundOnFirstRead: bytes that rot after a clean close
// are not read at open; the first read of the segment checks the trusted
// part in full, reports the damage, covers it with a skip frame, and the
// close leaves no marker, so the next open scans and finds a known gap.
func TestCleanStopDamageFoundOnFirstRead(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(7)
			opts.IOMode = mode
			mem := cleanImage(t, opts, 40)
			segPath := path.Join(logDirPath, segmentFileName(0))
			// The last record: its damage sits in the block the
			// appender writes into next.
			flipByte(t, mem, segPath, recordPosition(t, mem, segPath, 39)+record.FrameHeaderSize+3)
			d := openDir(t, mem, opts)
			l := openLog(t, d)
			if r := l.Report(); !r.CleanStop || r.HasDataLoss() {
				t.Fatalf("open: %+v", r)
			}
			if r, err := l.Validate(); err != nil || r.LossRecords != 4 {
				t.Fatalf("Validate does not check the trusted part: %+v %v", r, err)
			}
			entries, gaps := readAll(t, l)
			if len(entries) != 36 || len(gaps) != 1 || gaps[0].From != 36 || gaps[0].To != 40 {
				t.Fatalf("entries %d gaps %+v", len(entries), gaps)
			}
			if r := l.Report(); r.LossRecords != 4 || !r.Events[0].Applied {
				t.Fatalf("after the first read: %+v", r)
			}
			appendSubjects(t, l, 40, 60)
			_ = d.Close()
			if _, err := mem.Stat(path.Join(logDirPath, cleanStopName)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a marker was left for a segment with a gap: %v", err)
			}
			d = openDir(t, mem, opts)
			defer d.Close()
			l = openLog(t, d)
			if r := l.Report(); r.CleanStop || r.HasDataLoss() || r.KnownGaps != 4 {
				t.Fatalf("the next open: %+v", r)
			}
			if entries, _ := readAll(t, l); len(entries) != 56 {
				t.Fatalf("read %d records, want 56", len(entries))
			}
		})
	}
}

// TestCleanStopSurvivesIdleRuns: a run that writes nothing leaves the
// marker again, so restart after restart skips the scan.
func TestCleanStopSurvivesIdleRuns(t *testing.T) {
	opts := testOptions(8)
	mem := cleanImage(t, opts, 100)
	for run := range 3 {
		d := openDir(t, mem, opts)
		if r := openLog(t, d).Report(); !r.CleanStop || r.NextOffset != 100 {
			t.Fatalf("run %d: %+v", run, r)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCleanStopDamageReadsAsAfterAScan: once the first read found damage
// in the trusted part, readers (filtered or not, from any offset) see what
// they would see had the open scanned the same bytes.
func TestCleanStopDamageReadsAsAfterAScan(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(9)
			opts.IOMode = mode
			opts.SegmentSize = 1 << 20
			trusted := cleanImage(t, opts, 1500)
			// Damage a record that starts an index block in the middle of
			// its batch, so an index entry lies inside the damaged region.
			probe := openDir(t, trusted.CrashClone(vfs.CrashOptions{}), opts)
			var hit uint64
			for _, e := range openLog(t, probe).app.active.mu.index {
				if e.Offset%4 != 0 && e.Offset > 400 {
					hit = e.Offset
					break
				}
			}
			_ = probe.Close()
			if hit == 0 {
				t.Fatal("no index entry inside a batch")
			}
			segPath := path.Join(logDirPath, segmentFileName(0))
			flipByte(t, trusted, segPath, recordPosition(t, trusted, segPath, hit)+record.FrameHeaderSize+3)
			scanned := withoutMarker(t, trusted)
			dt, ds := openDir(t, trusted, opts), openDir(t, scanned, opts)
			defer dt.Close()
			defer ds.Close()
			lt, ls := openLog(t, dt), openLog(t, ds)
			if !lt.Report().CleanStop || ls.Report().LossRecords != 4 {
				t.Fatalf("trusted %+v, scanned %+v", lt.Report(), ls.Report())
			}
			batch := hit &^ 3
			filters := []Matcher{nil, subjectSet{"sensors.2": true}, subjectSet{
				fmt.Sprint("rare.", batch/11*11): true, fmt.Sprint("rare.", batch/11*11+11): true}}
			for _, from := range []uint64{0, batch - 50, batch - 1, batch, hit, batch + 3, batch + 4, batch + 5, 1400} {
				for i, m := range filters {
					got, want := readEntriesFrom(t, lt, m, from), readEntriesFrom(t, ls, m, from)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("from %d, filter %d: trusted read %d items, scanned %d\n%v\n%v", from, i, len(got), len(want), got, want)
					}
				}
			}
			for i, m := range filters {
				got, want := readRuns(t, lt, m, 64, 64<<10), readRuns(t, ls, m, 64, 64<<10)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("runs, filter %d: trusted read %d items, scanned %d", i, len(got), len(want))
				}
			}
		})
	}
}

// TestCrashRepairOfTrustedPart cuts power at every write of a run whose
// first read finds damage in the part a marker vouched for (quarantine
// copy, skip frame, sync) while records are appended, then the close.
// Every image must open writable and unfrozen, lose only the damaged
// batch, and keep every acknowledged record.
func TestCrashRepairOfTrustedPart(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(0)
			opts.IOMode = mode
			base, acked := cleanCrashImage(t, opts)
			segPath := path.Join(logDirPath, segmentFileName(0))
			damaged := uint64(5)
			flipByte(t, base, segPath, recordPosition(t, base, segPath, damaged)+record.FrameHeaderSize+3)
			for k := int64(0); ; k++ {
				c := newCrashRig(base.CrashClone(vfs.CrashOptions{}), k, vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5, Reorder: true, Tear: true})
				maps.Copy(c.acked, acked)
				maps.Copy(c.assigned, acked)
				if d, err := Open(c.fs, "/data", opts); err == nil {
					if l, err := d.OpenLog(defaultLog); err == nil {
						r := l.NewReader(0)
						for {
							if _, err := r.Next(); err != nil {
								break
							}
						}
						r.Close()
						c.appendWorkload(l, 1, 6, 0)
					}
					_ = d.Close()
				}
				if !c.crashed.Load() {
					t.Logf("%d crash points checked", k)
					return
				}
				checkRepairImage(t, c, opts, damaged, fmt.Sprintf("crash at op %d", k))
			}
		})
	}
}

// checkRepairImage recovers a crash image of TestCrashRepairOfTrustedPart.
func checkRepairImage(t *testing.T, c *crashRig, opts Options, damaged uint64, label string) {
	t.Helper()
	d, err := Open(c.image, "/data", opts)
	if err != nil {
		t.Fatalf("%s: reopen: %v", label, err)
	}
	defer d.Close()
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		t.Fatalf("%s: recover: %v", label, err)
	}
	if r := l.Report(); r.Outcome == OutcomeFrozen || r.LossRecords > 4 {
		t.Fatalf("%s: report %+v", label, r)
	}
	entries, gaps := readAll(t, l)
	seen := map[uint64]bool{}
	for _, e := range entries {
		seen[e.Offset] = true
		if want, ok := c.assigned[e.Offset]; ok && want != payloadIndex(t, e.Body) {
			t.Fatalf("%s: offset %d holds the wrong record", label, e.Offset)
		}
	}
	for _, g := range gaps {
		if g.From > damaged || g.To <= damaged {
			t.Fatalf("%s: gap %+v away from the damage at %d", label, g, damaged)
		}
	}
	for offset := range c.ackedAtCrash {
		if !seen[offset] && (offset < damaged-3 || offset > damaged+3) {
			t.Fatalf("%s: acknowledged offset %d lost", label, offset)
		}
	}
}
