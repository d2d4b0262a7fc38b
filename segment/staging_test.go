package segment

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/segment/vfs"
)

// TestStagingBuffersComeFromTheSlabAndGoBack: every writable log takes its
// buffers from Options.StagingBuffers when it starts and returns them when
// it closes; appends, a record larger than the staging size and a log
// past the slab's capacity (heap fallback) all keep working.
func TestStagingBuffersComeFromTheSlabAndGoBack(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(3)
			opts.IOMode = mode
			perLog := StagingBuffersPerLog(mode)
			slab, err := arena.NewLazySlab(arena.NewBudget(), "append staging", "--test", StagingBufferSize(opts), 2*perLog)
			if err != nil {
				t.Fatal(err)
			}
			opts.StagingBuffers = slab
			d := openDir(t, vfs.NewMemFS(), opts)
			var logs []*Log
			for i := range 3 { // the third log finds the slab exhausted
				l, err := d.OpenLog(LogID{Stream: fmt.Sprintf("s%d", i)})
				if err != nil {
					t.Fatalf("open log %d: %v", i, err)
				}
				logs = append(logs, l)
			}
			if got := slab.InUse(); got != 2*perLog {
				t.Fatalf("slab buffers in use %d, want %d (two logs × %d)", got, 2*perLog, perLog)
			}
			for index, l := range logs {
				var last Ticket
				for i := range 200 {
					last = appendBody(t, l, body(uint64(i), 100+i*7))
				}
				last = appendBody(t, l, body(1000, 3*opts.StagingBytes)) // larger than staging
				appendBody(t, l, body(1001, 64))
				waitTicket(t, last)
				entries, _ := readAll(t, l)
				if len(entries) < 201 {
					t.Fatalf("log %d: %d entries read back, want at least 201", index, len(entries))
				}
				for i, e := range entries[:200] {
					if got := payloadIndex(t, e.Body); got != uint64(i) {
						t.Fatalf("log %d entry %d holds record %d", index, i, got)
					}
				}
			}
			for _, l := range logs {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if got := slab.InUse(); got != 0 {
				t.Errorf("after closing every log %d staging buffers are still held", got)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if err := slab.Close(); err != nil {
				t.Fatalf("slab close: %v", err)
			}
		})
	}
}
