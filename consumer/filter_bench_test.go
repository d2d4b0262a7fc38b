package consumer

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// BenchmarkBroadcastTraversal measures a broadcast group reading a log of
// 20,000 records to its end, unfiltered and with a filter matching 1 in
// 100: the filtered read skips blocks through the subject summary.
func BenchmarkBroadcastTraversal(b *testing.B) {
	const records = 20_000
	r := mustRig(b, vfs.NewMemFS())
	r.appendSubjects(records, func(i int) string {
		if i%100 == 0 {
			return "orders.eu.fr"
		}
		return fmt.Sprint("billing.eu.", i%7)
	})
	for _, filter := range []string{"", "orders.*.fr"} {
		b.Run(fmt.Sprintf("filter=%q", filter), func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				g, err := Open(r.log, fmt.Sprint("g", len(filter), "-", i), Options{Type: TypeBroadcast, Filter: filter})
				if err != nil {
					b.Fatal(err)
				}
				delivered := 0
				for {
					got, gaps, err := g.Fetch(1, 1000, 1<<20, 0)
					if err != nil {
						b.Fatal(err)
					}
					if len(got) == 0 && len(gaps) == 0 {
						break
					}
					delivered += len(got)
				}
				_ = g.Close()
			}
			b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "offsets/s")
		})
	}
}
