package client_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// collect reads every result until Results is closed.
func collect(p *client.Producer) <-chan []client.Result {
	out := make(chan []client.Result, 1)
	go func() {
		var results []client.Result
		for r := range p.Results() {
			results = append(results, r)
		}
		out <- results
	}()
	return out
}

func TestProducerTenThousandOutOfOrderAcks(t *testing.T) {
	const n = 10_000
	b := startFake(t, func(b *fakeBroker) { b.reverseAcks = true })
	c := dial(t, b, client.Options{})
	p := c.NewProducer("events", client.ProducerOptions{})
	results := collect(p)
	ctx := context.Background()
	for i := range n {
		if err := p.Send(ctx, client.Record{Payload: fmt.Appendf(nil, "record-%d", i)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got := <-results
	if len(got) != n {
		t.Fatalf("%d results", len(got))
	}
	for i, r := range got {
		// The broker assigns offsets in arrival order, so in-order
		// results carry increasing offsets even though acks came reversed.
		if r.Err != nil || r.Sequence != uint64(i) || r.Ack.Offset != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	bodies := b.bodies("events")
	for _, i := range []int{0, 1, n / 2, n - 1} {
		view, err := record.Parse(bodies[i])
		if err != nil || string(view.Payload) != fmt.Sprintf("record-%d", i) {
			t.Fatalf("stored record %d: %q %v", i, view.Payload, err)
		}
	}
	b.locked(func() {
		if b.maxInFlight < 2 {
			t.Fatalf("at most %d produce in flight: not pipelined", b.maxInFlight)
		}
	})
}

func TestProducerRespectsWindows(t *testing.T) {
	for _, tc := range []struct {
		name              string
		server, producer  int
		producers, wantLE int
	}{
		{"server window", 8, 0, 1, 8},
		{"producer window", 8, 3, 1, 3},
		{"shared by producers", 8, 0, 3, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFake(t, func(b *fakeBroker) {
				b.welcome.Window = uint32(tc.server)
				b.ackDelay = time.Millisecond
				b.reverseAcks = true
			})
			c := dial(t, b, client.Options{})
			var wg sync.WaitGroup
			for range tc.producers {
				p := c.NewProducer("s", client.ProducerOptions{Window: tc.producer})
				results := collect(p)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 100 {
						if err := p.Send(context.Background(), client.Record{}); err != nil {
							t.Error(err)
						}
					}
					p.Close()
					<-results
				}()
			}
			wg.Wait()
			b.locked(func() {
				if b.maxInFlight > tc.wantLE || b.maxInFlight < 2 {
					t.Fatalf("max in flight %d, want 2..%d", b.maxInFlight, tc.wantLE)
				}
			})
		})
	}
}

func TestTrySendWindowFull(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.Window = 4 })
	c := dial(t, b, client.Options{})
	p := c.NewProducer("s", client.ProducerOptions{})
	b.hold()
	for i := range 4 {
		if err := p.TrySend(client.Record{}); err != nil {
			t.Fatalf("TrySend %d: %v", i, err)
		}
	}
	if err := p.TrySend(client.Record{}); !errors.Is(err, client.ErrWindowFull) {
		t.Fatalf("TrySend with the window full: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.Send(ctx, client.Record{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send with the window full: %v", err)
	}
	b.release()
	for i := range 4 {
		if r := <-p.Results(); r.Err != nil || r.Sequence != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if err := p.TrySend(client.Record{}); err != nil {
		t.Fatalf("TrySend after acks: %v", err)
	}
	if r := <-p.Results(); r.Sequence != 4 || r.Ack.Offset != 4 {
		t.Fatalf("result after refusals: %+v (refused sends must not take a sequence)", r)
	}
}

func TestProducerErrorsInOrder(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) {
		b.reverseAcks = true
		b.produceErr = func(n uint64) *wire.Error {
			if n%5 == 0 {
				return wire.NewError(wire.CodeBusy, "busy %d", n)
			}
			return nil
		}
	})
	c := dial(t, b, client.Options{})
	// Unstamped, each refusal fails one record (TestIdempotentRefusal...
	// covers the stamped case).
	p := c.NewProducer("s", client.ProducerOptions{Idempotence: client.IdempotenceOff})
	results := collect(p)
	for range 100 {
		if err := p.Send(context.Background(), client.Record{}); err != nil {
			t.Fatal(err)
		}
	}
	err := p.Flush(context.Background())
	if !errors.Is(err, &wire.Error{Code: wire.CodeBusy}) {
		t.Fatalf("Flush after failures: %v", err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatalf("second Flush reports the failures again: %v", err)
	}
	p.Close()
	for i, r := range <-results {
		wantErr := (i+1)%5 == 0
		if r.Sequence != uint64(i) || (r.Err != nil) != wantErr {
			t.Fatalf("result %d: %+v", i, r)
		}
		if wantErr && !errors.Is(r.Err, &wire.Error{Code: wire.CodeBusy}) {
			t.Fatalf("result %d: %v", i, r.Err)
		}
	}
}

func TestFlushWithoutReadingResults(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.Window = 16 })
	c := dial(t, b, client.Options{})
	p := c.NewProducer("s", client.ProducerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for round := range 2 { // the results channel holds one window, the ring another
		for range 16 {
			if err := p.Send(ctx, client.Record{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatalf("Flush %d with nobody reading Results: %v", round, err)
		}
	}
	if err := p.TrySend(client.Record{}); !errors.Is(err, client.ErrWindowFull) {
		t.Fatalf("TrySend with two windows of results unread: %v", err)
	}
	results := collect(p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got := <-results
	for i, r := range got {
		if r.Err != nil || r.Sequence != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if len(got) != 32 {
		t.Fatalf("%d results", len(got))
	}
	if err := p.Send(ctx, client.Record{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

func TestProducerFlushContext(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	p := c.NewProducer("s", client.ProducerOptions{})
	b.hold()
	if err := p.Send(context.Background(), client.Record{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with an ack held back: %v", err)
	}
	b.release()
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// drain reads results without allocating and counts failures; the
// returned channel yields the count once Results is closed.
func drain(p *client.Producer) <-chan int {
	out := make(chan int, 1)
	go func() {
		failed := 0
		for r := range p.Results() {
			if r.Err != nil {
				failed++
			}
		}
		out <- failed
	}()
	return out
}

func TestProducerSendDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, d := range []client.Destination{client.ToStream("bench"), client.ToPartition("bench", 1), client.BySubject()} {
		t.Run(d.String(), func(t *testing.T) { producerSendAllocs(t, d) })
	}
}

// producerSendAllocs measures a steady-state Send to d, subject
// validation included.
func producerSendAllocs(t *testing.T, d client.Destination) {
	b := startFake(t, func(b *fakeBroker) {
		b.discard = true
		b.welcome.Window = 1024
		b.partitions = map[string]uint32{"bench": 2}
		b.bindings = map[string]string{"bench.>": "bench"}
	})
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(d, client.ProducerOptions{})
	failed := drain(p)
	record := client.Record{Key: []byte("key"), Subject: "bench.subject", Payload: make([]byte, 100),
		Headers: []client.Header{{Name: "h", Value: []byte("v")}}}
	ctx := context.Background()
	send := func() {
		if err := p.Send(ctx, record); err != nil {
			t.Fatal(err)
		}
	}
	for range 20_000 { // warm up: buffers and tables reach their steady size
		send()
	}
	p.Flush(ctx)
	const runs = 50_000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	allocs := testing.AllocsPerRun(runs, send)
	runtime.ReadMemStats(&after)
	p.Close()
	if n := <-failed; n != 0 {
		t.Fatalf("%d sends failed", n)
	}
	exact := float64(after.Mallocs-before.Mallocs) / runs
	t.Logf("allocations per Send, client + fake server + results reader: %v (exactly %.5f)", allocs, exact)
	if allocs != 0 || exact > 0.01 {
		t.Fatalf("%v (%.5f) allocations per Send in steady state, want 0", allocs, exact)
	}
}
