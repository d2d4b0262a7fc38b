package client_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/client"
)

// BenchmarkProducerSend measures the pipelined producer against the fake
// broker over loopback TCP (client and server share the CPU). mallocs/op
// is exact, not rounded like allocs/op, and covers the whole process.
func BenchmarkProducerSend(b *testing.B) {
	for _, size := range []int{100, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			fb := startFake(b, func(f *fakeBroker) { f.discard = true; f.welcome.Window = 1024 })
			c := dial(b, fb, client.Options{})
			p := c.NewProducer("bench", client.ProducerOptions{})
			failed := drain(p)
			record := client.Record{Key: []byte("key"), Payload: make([]byte, size)}
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for range b.N {
				if err := p.Send(ctx, record); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "mallocs/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			p.Close()
			if n := <-failed; n != 0 {
				b.Fatalf("%d sends failed", n)
			}
		})
	}
}

// BenchmarkProduceAwaited is one record per round trip, for contrast.
func BenchmarkProduceAwaited(b *testing.B) {
	fb := startFake(b, func(f *fakeBroker) { f.discard = true })
	c := dial(b, fb, client.Options{})
	record := client.Record{Key: []byte("key"), Payload: make([]byte, 100)}
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		if _, err := c.Produce(ctx, "bench", record); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
