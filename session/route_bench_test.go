package session

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// BenchmarkRoutedProduce measures what the issue bounds: publishing by
// subject with 1 binding against 10,000 bound subjects, the records
// cycling over every bound subject (so the per-connection route cache,
// 256 subjects, misses nearly always at 10,000 and the trie is walked).
// The whole produce path runs: a real TCP connection, pipelined frames,
// durable acks. Compare the records/s of the sub-benchmarks from one run
// (-count 5, medians); the target is a cost of at most 5 %.
func BenchmarkRoutedProduce(b *testing.B) {
	cases := []struct {
		name               string
		bindings, subjects int
	}{
		{"bindings=1", 1, 1},
		{"bindings=10000", 10_000, 10_000},
		// The two halves of the difference: many bindings with one hot
		// subject (the route cache hits), and one wildcard binding with
		// many subjects (every record misses the cache, the trie is tiny).
		{"hot-subject", 10_000, 1},
		{"wildcard", 0, 10_000},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { benchmarkRoutedProduce(b, c.bindings, c.subjects) })
	}
}

// benchmarkRoutedProduce publishes records cycling over subjects distinct
// subjects, with that many literal bindings, or one wildcard binding
// (orders.>) when bindings is 0.
func benchmarkRoutedProduce(b *testing.B, bindings, subjects int) {
	addr, engine := testBroker(b, testConfig{})
	createTestStream(b, engine, "orders", 1)
	// The bindings go in with one catalog write: binding 10,000 subjects
	// one durable catalog write at a time would take minutes.
	names := make([]string, max(bindings, subjects))
	for i := range names {
		names[i] = fmt.Sprintf("orders.region%d.created", i)
	}
	table := []broker.Binding{{Pattern: "orders.>", Stream: "orders"}}
	if bindings > 0 {
		table = table[:0]
		for _, name := range names[:bindings] {
			table = append(table, broker.Binding{Pattern: name, Stream: "orders"})
		}
	}
	if _, err := engine.BindMany(table); err != nil {
		b.Fatal(err)
	}
	c := connect(b, addr)
	const perRound = 1000
	rounds := make([][]byte, 0, 16)
	for round := range cap(rounds) {
		var frames []byte
		for i := range perRound {
			name := names[(round*perRound+i)%subjects]
			body, err := record.AppendBody(nil, record.Body{Subject: []byte(name), Payload: make([]byte, 256)})
			if err != nil {
				b.Fatal(err)
			}
			frames = wire.Append(frames, uint32(i+1), &wire.Produce{Flags: wire.ProduceRouteBySubject, BodyCRC: record.Checksum(body), Body: body})
		}
		rounds = append(rounds, frames)
	}
	buffer := make([]byte, 1<<20)
	b.SetBytes(256)
	b.ResetTimer()
	cpuBefore := processCPU()
	for sent := 0; sent < b.N; sent += perRound {
		c.pipelinedRound(rounds[(sent/perRound)%len(rounds)], perRound, buffer)
	}
	b.StopTimer()
	done := (b.N + perRound - 1) / perRound * perRound
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(processCPU()-cpuBefore)/float64(done), "cpu-ns/record")
}

// pipelinedRound writes a run of Produce frames at once and reads until
// every one is acknowledged; any other answer fails the test.
func (c *rawClient) pipelinedRound(frames []byte, count int, buffer []byte) {
	if _, err := c.conn.Write(frames); err != nil {
		c.t.Fatal(err)
	}
	acks, start, end := 0, 0, 0
	for acks < count {
		n, err := c.conn.Read(buffer[end:])
		if err != nil {
			c.t.Fatal(err)
		}
		end += n
		for {
			frame, used, err := wire.ParseFrame(buffer[start:end], wire.DefaultMaxFrame)
			if err != nil {
				break
			}
			if frame.Type != wire.TypeProduceAck {
				e, _ := wire.DecodeError(frame.Body)
				c.t.Fatalf("got %v %+v", frame.Type, e)
			}
			acks++
			start += used
		}
		copy(buffer, buffer[start:end])
		end -= start
		start = 0
	}
}
