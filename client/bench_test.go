package client_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/client"
)

// BenchmarkProducerSend measures the pipelined producer against the fake
// broker over loopback TCP (client and server share the CPU), without
// compression. mallocs/op is exact, not rounded like allocs/op, and
// covers the whole process.
func BenchmarkProducerSend(b *testing.B) {
	for _, size := range []int{100, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			benchmarkSend(b, client.CompressNone, make([]byte, size))
		})
	}
}

// BenchmarkProducerSendCompressed is the same producer compressing a
// JSON-like payload (which shrinks) and a random one (which the policy
// sends as is after lz4 gives up): the cost of compression on the
// producer, and what it saves on the wire (stored/raw).
func BenchmarkProducerSendCompressed(b *testing.B) {
	for _, compression := range []client.Compression{client.CompressLZ4, client.CompressZstd} {
		for _, kind := range []string{"json", "random"} {
			b.Run(fmt.Sprintf("%s/%s/payload=1024", compression, kind), func(b *testing.B) {
				payload := jsonPayload(1024)
				if kind == "random" {
					payload = randomPayload(1024)
				}
				benchmarkSend(b, compression, payload)
			})
		}
	}
}

func benchmarkSend(b *testing.B, compression client.Compression, payload []byte) {
	fb := startFake(b, func(f *fakeBroker) { f.discard = true; f.welcome.Window = 1024 })
	c := dial(b, fb, client.Options{})
	p := c.NewProducer("bench", client.ProducerOptions{Compression: compression})
	failed := drain(p)
	record := client.Record{Key: []byte("key"), Payload: payload}
	ctx := context.Background()
	b.SetBytes(int64(len(payload)))
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
