package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// Tests of the consumer model against a real in-process broker.

func servedClient(t *testing.T) *client.Client {
	t.Helper()
	addr, stop := startServedBroker()
	t.Cleanup(stop)
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func produceMany(t *testing.T, c *client.Client, stream string, n int) {
	t.Helper()
	for range n {
		if _, err := c.Produce(context.Background(), stream, client.Record{Payload: []byte("job")}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConsumeExtendsTheLeaseOfALongHandler(t *testing.T) {
	c := servedClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	produceMany(t, c, "jobs", 1)
	var lost atomic.Int32
	stolen := make(chan int, 1)
	handler := func(ctx context.Context, m client.Message) error {
		time.Sleep(900 * time.Millisecond) // three leases long
		result, err := c.Fetch(ctx, "jobs", "workers", client.FetchOptions{})
		if err != nil {
			t.Error(err)
		}
		stolen <- len(result.Messages)
		cancel()
		return nil
	}
	err := c.Consume(ctx, "jobs", "workers", handler, client.ConsumeOptions{Lease: 300 * time.Millisecond,
		OnLostLease: func(client.Message, client.AckStatus) { lost.Add(1) }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume returned %v", err)
	}
	if n := <-stolen; n != 0 {
		t.Fatalf("another fetch got %d records while the handler held its lease", n)
	}
	if lost.Load() != 0 {
		t.Fatal("the handler's lease was lost despite the extensions")
	}
}

func TestConsumeRetriesAndSurfacesTheGroupType(t *testing.T) {
	c := servedClient(t)
	produceMany(t, c, "jobs", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var attempts []uint32
	err := c.Consume(ctx, "jobs", "g", func(ctx context.Context, m client.Message) error {
		attempts = append(attempts, m.Attempt)
		if m.Attempt < 3 {
			return client.RetryAfter(10*time.Millisecond, errors.New("not yet"))
		}
		cancel()
		return nil
	}, client.ConsumeOptions{})
	if !errors.Is(err, context.Canceled) || len(attempts) != 3 {
		t.Fatalf("Consume: %v after attempts %v", err, attempts)
	}
	err = c.Consume(context.Background(), "jobs", "g", nil, client.ConsumeOptions{Type: client.GroupKeyShared})
	if !errors.Is(err, &wire.Error{Code: wire.CodeGroupModeMismatch}) {
		t.Fatalf("a key-shared Consume of a work group: %v", err)
	}
}

func TestTermAckRangeAndCommit(t *testing.T) {
	c := servedClient(t)
	ctx := context.Background()
	produceMany(t, c, "jobs", 6)
	result, err := c.Fetch(ctx, "jobs", "g", client.FetchOptions{MaxRecords: 6})
	if err != nil || len(result.Messages) != 6 {
		t.Fatalf("fetch: %d %v", len(result.Messages), err)
	}
	if statuses, err := c.Term(ctx, "jobs", "g", result.Messages[0]); err != nil || statuses[0] != client.AckOK {
		t.Fatalf("term: %v %v", statuses, err)
	}
	if status, err := c.AckRange(ctx, "jobs", "g", 0, 1, 6); err != nil || status != client.AckOK {
		t.Fatalf("ack range: %v %v", status, err)
	}
	if statuses, _ := c.Ack(ctx, "jobs", "g", result.Messages[3]); statuses[0] != client.AckUnknown {
		t.Fatalf("ack after the range: %v", statuses)
	}
	if statuses, _ := c.Extend(ctx, "jobs", "g", time.Minute, result.Messages[3]); statuses[0] != client.AckUnknown {
		t.Fatalf("extend after the range: %v", statuses)
	}
	info, err := c.OpenGroup(ctx, "jobs", "tail", client.GroupOptions{Type: client.GroupStreaming, Start: client.StartPosition{Kind: client.StartOffset, Offset: 4}})
	if err != nil || info.Committed != 4 {
		t.Fatalf("open streaming group: %+v %v", info, err)
	}
	read, err := c.Fetch(ctx, "jobs", "tail", client.FetchOptions{Type: client.GroupStreaming})
	if err != nil || len(read.Messages) != 2 || read.Messages[0].Offset != 4 {
		t.Fatalf("streaming read: %+v %v", read.Messages, err)
	}
	if status, err := c.Commit(ctx, "jobs", "tail", 0, 6); err != nil || status != client.AckOK {
		t.Fatalf("commit: %v %v", status, err)
	}
	if status, _ := c.Commit(ctx, "jobs", "tail", 0, 60); status != client.AckOutOfRange {
		t.Fatalf("commit past the end: %v", status)
	}
}

// Awaited produces write their own frames when nothing else is queued,
// and queue behind the flusher otherwise: with eight awaiting goroutines
// and a pipelined producer sharing one connection, every frame still
// arrives whole (the broker would close the connection on a torn one) and
// every record is acknowledged once.
func TestAwaitedAndPipelinedShareAConnection(t *testing.T) {
	c := servedClient(t)
	ctx := context.Background()
	const awaiting, each, pipelined = 8, 150, 3000
	errs := make(chan error, awaiting+1)
	offsets := make(chan uint64, awaiting*each+pipelined)
	for range awaiting {
		go func() {
			for range each {
				ack, err := c.Produce(ctx, "shared", client.Record{Payload: []byte("awaited")})
				if err != nil {
					errs <- err
					return
				}
				offsets <- ack.Offset
			}
			errs <- nil
		}()
	}
	go func() {
		producer := c.NewProducer("shared", client.ProducerOptions{Window: 256})
		done := make(chan error, 1)
		go func() {
			var first error
			for result := range producer.Results() {
				if result.Err != nil && first == nil {
					first = result.Err
				}
				if result.Err == nil {
					offsets <- result.Ack.Offset
				}
			}
			done <- first
		}()
		for range pipelined {
			if err := producer.Send(ctx, client.Record{Payload: []byte("pipelined")}); err != nil {
				errs <- err
				return
			}
		}
		errs <- errors.Join(producer.Close(), <-done)
	}()
	for range awaiting + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if acked := distinctOffsets(t, offsets); acked != awaiting*each+pipelined {
		t.Fatalf("%d records acknowledged, want %d", acked, awaiting*each+pipelined)
	}
}
