package session

import (
	"context"
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
)

// BenchmarkSparseStream measures the streaming tier through a sparse
// subject filter, the shape of the streams issue's F-sparse row: 200,000
// stored 256 B records, one in 100 matching, read from the start by a
// client.Stream with the filter until it has traversed every one. The
// filtered stretches come back as gaps. records/s counts records
// traversed (delivered or skipped), the unit JetStream's filtered
// consumer is compared in.
func BenchmarkSparseStream(b *testing.B) {
	const total, every = 200_000, 100
	chunks, err := arena.NewLazySlab(arena.NewBudget(), "output chunks", "--test", loop.OutputChunkSize, 256)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = chunks.Close() })
	addr, _ := testBrokerOn(b, testConfig{}, loop.Config{OutputBuffers: chunks})
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "bench", Window: 4096})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	producer := c.NewProducer("sparse", client.ProducerOptions{Window: 4096, Compression: client.CompressNone})
	failed := make(chan error, 1)
	go func() {
		var first error
		for result := range producer.Results() {
			if result.Err != nil && first == nil {
				first = result.Err
			}
		}
		failed <- first
	}()
	payload := make([]byte, 256)
	for i := range total {
		name := "bench.other"
		if i%every == 0 {
			name = "bench.match"
		}
		if err := producer.Send(ctx, client.Record{Subject: name, Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	if err := producer.Close(); err != nil {
		b.Fatal(err)
	}
	if err := <-failed; err != nil {
		b.Fatal(err)
	}
	b.SetBytes(0)
	b.ResetTimer()
	cpuBefore := processCPU()
	run := 0
	for b.Loop() {
		run++
		reader, err := c.Stream("sparse", fmt.Sprint("reader-", run), client.StreamOptions{Filter: "bench.match"})
		if err != nil {
			b.Fatal(err)
		}
		matched := 0
		for next := uint64(0); next < total; {
			batch, err := reader.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			matched += len(batch.Messages)
			next = batch.Next
		}
		if matched != total/every {
			b.Fatalf("read %d matching records, want %d", matched, total/every)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(processCPU()-cpuBefore)/float64(b.N), "cpu-ns/op")
}
