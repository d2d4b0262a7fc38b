package segment

import (
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

func TestRealDiskModes(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect, IOAuto} {
		for _, prealloc := range []Preallocation{PreallocateAllocate, PreallocateZero, PreallocateNone} {
			t.Run(mode.String()+"/"+prealloc.String(), func(t *testing.T) {
				dir := t.TempDir()
				opts := testOptions(2)
				opts.IOMode, opts.Preallocation = mode, prealloc
				d, err := Open(vfs.OS{}, dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				l := openLog(t, d)
				var last Ticket
				for i := uint64(0); i < 2000; i++ {
					last = appendBody(t, l, body(i, 20+int(i%500)))
				}
				waitTicket(t, last)
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				d, err = Open(vfs.OS{}, dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				l = openLog(t, d)
				entries, gaps := readAll(t, l)
				if len(entries) != 2000 || len(gaps) != 0 {
					t.Fatalf("got %d entries %d gaps (report %+v)", len(entries), len(gaps), l.Report())
				}
				for i, e := range entries {
					if payloadIndex(t, e.Body) != uint64(i) {
						t.Fatalf("entry %d wrong", i)
					}
				}
				t.Logf("io mode %s", d.IOMode())
			})
		}
	}
}
