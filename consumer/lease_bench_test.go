package consumer

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// BenchmarkWorkFetchAck measures the leased hot path: one op is a Fetch
// of up to 100 records from a work group and an Ack of each, under the
// lease tokens the Fetch granted.
func BenchmarkWorkFetchAck(b *testing.B) {
	const records, batch = 20_000, 100
	r := mustRig(b, vfs.NewMemFS())
	r.appendRecords(records, nil)
	groups := 0
	open := func() *Group {
		groups++
		g, err := Open(r.log, fmt.Sprint("work-", groups), Options{Type: TypeWork, MaxInFlight: batch})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	g := open()
	b.ReportAllocs()
	b.ResetTimer()
	acked := 0
	for range b.N {
		got, _, err := g.Fetch(1, batch, 1<<20, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.StopTimer()
			_ = g.Close()
			g = open()
			b.StartTimer()
			continue
		}
		for _, d := range got {
			if status := g.Ack(d.Offset, d.Lease); status != StatusOK {
				b.Fatalf("ack %d: %v", d.Offset, status)
			}
		}
		acked += len(got)
	}
	b.StopTimer()
	_ = g.Close()
	b.ReportMetric(float64(acked)/b.Elapsed().Seconds(), "records/s")
}
