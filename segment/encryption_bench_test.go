package segment

// The cost of opening encrypted records on the way out, against the zero
// copy runs of a plain log (docs/SECURITY.md, "Encryption at rest").

import (
	"errors"
	"io"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

func benchmarkRuns(b *testing.B, encrypted bool) {
	opts := testOptions(1)
	opts.SegmentSize = 64 << 20
	if encrypted {
		opts.Encryption = testRing(b)
	}
	d := openDir(b, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(b, d)
	payload := make([]byte, 256)
	body, _ := record.AppendBody(nil, record.Body{Payload: payload})
	bodies := make([][]byte, 100)
	crcs := make([]uint32, 100)
	for i := range bodies {
		bodies[i], crcs[i] = body, record.Checksum(body)
	}
	var last Ticket
	for range 1000 {
		t, err := l.AppendBatch(b.Context(), bodies, crcs)
		if err != nil {
			b.Fatal(err)
		}
		last = t
	}
	waitTicket(b, last)
	b.ResetTimer()
	records := 0
	for range b.N {
		r := l.NewReader(0)
		for {
			run, err := r.NextRun(1000, 256<<10)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			records += run.Count
			run.Release()
		}
		r.Close()
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkRunsPlain(b *testing.B)     { benchmarkRuns(b, false) }
func BenchmarkRunsEncrypted(b *testing.B) { benchmarkRuns(b, true) }
