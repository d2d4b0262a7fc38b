package segment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// zeroAheadState returns the active segment's write position, the end of
// its zeros written ahead, and the bytes between them.
func zeroAheadState(t *testing.T, l *Log) (pos, zeroedTo int64, between []byte) {
	t.Helper()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	pos, zeroedTo = l.app.pos, l.app.zeroedTo
	if zeroedTo > pos {
		// A handle of its own: the appender's may be direct, which reads
		// only aligned blocks.
		file, err := l.fs.OpenFile(l.app.active.path, vfs.ReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		between = make([]byte, zeroedTo-pos)
		if _, err := file.ReadAt(between, pos); err != nil {
			t.Fatalf("reading past the records: %v", err)
		}
	}
	return pos, zeroedTo, between
}

// TestZeroAheadSmallWrites: a log whose writes are smaller than a block
// keeps zeros written at least half a window past its records, in both
// I/O modes, and the records stay whole, before and after a reopen.
func TestZeroAheadSmallWrites(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			fsys := vfs.NewMemFS()
			opts := testOptions(0)
			opts.SegmentSize = 1 << 20
			opts.IOMode = mode
			d := openDir(t, fsys, opts)
			l := openLog(t, d)
			const records = 300
			for i := range uint64(records) {
				waitTicket(t, appendBody(t, l, body(i, 300)))
				pos, zeroedTo, between := zeroAheadState(t, l)
				if zeroedTo < pos+zeroAheadWindow/2 {
					t.Fatalf("after record %d: zeros end at %d, records at %d: want at least half a window ahead", i, zeroedTo, pos)
				}
				if zeroedTo%vfs.DirectAlignment != 0 || !bytes.Equal(between, make([]byte, len(between))) {
					t.Fatalf("after record %d: [%d, %d) is not whole zero blocks past the records", i, pos, zeroedTo)
				}
			}
			assertRecords(t, l, records)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = openDir(t, fsys, opts)
			defer d.Close()
			assertRecords(t, openLog(t, d), records)
		})
	}
}

// TestZeroAheadLeavesLargeWrites: pieces larger than a block write no
// zeros ahead, and neither does a log that does not fallocate, by choice
// or because the file system cannot.
func TestZeroAheadLeavesLargeWrites(t *testing.T) {
	noFallocate := vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpAllocate {
			return vfs.ErrNotSupported
		}
		return nil
	})
	cases := []struct {
		name  string
		size  int
		alloc Preallocation
		fs    func() vfs.FS
	}{
		{"large-pieces", 8 << 10, PreallocateAllocate, nil},
		{"zero-filled", 300, PreallocateZero, nil},
		{"sparse", 300, PreallocateNone, nil},
		{"fallocate-unsupported", 300, PreallocateAllocate, func() vfs.FS { return vfs.Inject(vfs.NewMemFS(), noFallocate) }},
	}
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", mode, c.name), func(t *testing.T) {
				opts := testOptions(0)
				opts.SegmentSize = 1 << 20
				opts.IOMode = mode
				opts.Preallocation = c.alloc
				var fsys vfs.FS = vfs.NewMemFS()
				if c.fs != nil {
					fsys = c.fs()
				}
				d := openDir(t, fsys, opts)
				defer d.Close()
				l := openLog(t, d)
				for i := range uint64(20) {
					waitTicket(t, appendBody(t, l, body(i, c.size)))
				}
				if _, zeroedTo, _ := zeroAheadState(t, l); zeroedTo != 0 {
					t.Fatalf("zeros written ahead up to %d", zeroedTo)
				}
				assertRecords(t, l, 20)
			})
		}
	}
}

// assertRecords checks that l holds records 0 … n-1, whole and in order.
func assertRecords(t *testing.T, l *Log, n int) {
	t.Helper()
	entries, gaps := readAll(t, l)
	if len(entries) != n || len(gaps) != 0 {
		t.Fatalf("read %d records and %d gaps, want %d and none", len(entries), len(gaps), n)
	}
	for i, e := range entries {
		if got := payloadIndex(t, e.Body); got != uint64(i) {
			t.Fatalf("record %d holds payload %d", i, got)
		}
	}
}

// TestCrashZeroAhead cuts power at every write of small appends into a
// segment large enough for whole windows of zeros ahead, with unsynced
// writes kept, reordered and torn at random: zeros written ahead, torn or
// not, never cost an acknowledged record nor make recovery fail.
func TestCrashZeroAhead(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(0)
			opts.SegmentSize = 1 << 20
			opts.IOMode = mode
			crashEveryWrite(t, "zero-ahead", opts, 0.5, emptyFS, func(c *crashRig, l *Log) {
				c.appendWorkload(l, 2, 60, 0)
				if !c.crashed.Load() {
					if _, zeroedTo, _ := zeroAheadState(t, l); zeroedTo == 0 {
						t.Fatal("no zeros were written ahead: the test does not cross them")
					}
				}
			})
		})
	}
}
