package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// TestReadersTakeTurns: awaited produces, pings and a pipelined producer
// share one connection, so the socket passes between callers reading
// their own answers and the read loop. Every call gets its own answer.
func TestReadersTakeTurns(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	const perCaller, sent = 300, 3000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	offsets := make(chan uint64, 4*perCaller)
	for range 4 {
		wg.Go(func() {
			for range perCaller {
				ack, err := c.Produce(ctx, "s", client.Record{Payload: []byte("awaited")})
				if err != nil {
					errs <- err
					return
				}
				offsets <- ack.Offset
			}
		})
	}
	wg.Go(func() {
		for range perCaller {
			if _, err := c.Ping(ctx); err != nil {
				errs <- err
				return
			}
		}
	})
	p := c.NewProducer("s", client.ProducerOptions{})
	wg.Go(func() {
		for range sent {
			if err := p.Send(ctx, client.Record{Payload: []byte("pipelined")}); err != nil {
				errs <- err
				return
			}
		}
		if err := p.Flush(ctx); err != nil {
			errs <- err
		}
	})
	results := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range p.Results() {
			if r.Err != nil {
				errs <- r.Err
			}
			results++
		}
	}()
	wg.Wait()
	p.Close()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	acked := distinctOffsets(t, offsets)
	if acked != 4*perCaller || results != sent {
		t.Fatalf("%d awaited acks, %d producer results", acked, results)
	}
}

// TestIdleConnectionNoticesDrop: after awaited calls that read their own
// answers, nobody is waiting; the read loop still takes the quiet socket
// and notices the server going away, without any further call.
func TestIdleConnectionNoticesDrop(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for range 3 {
		if _, err := c.Produce(ctx, "s", client.Record{}); err != nil {
			t.Fatal(err)
		}
	}
	b.dropAll()
	eventually(t, "the idle connection to notice the drop", func() bool { return c.Err() != nil })
	if err := c.Err(); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Err: %v", err)
	}
}

// TestInterruptedReadLeavesConnectionUsable: a caller reading its own
// answer when its context ends stops reading at once; the socket's read
// deadline is cleared before anyone reads again, and the late answer
// still frees its place in the window.
func TestInterruptedReadLeavesConnectionUsable(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.Window = 1 })
	c := dial(t, b, client.Options{})
	for round := range 5 {
		b.hold()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		start := time.Now()
		_, err := c.Produce(ctx, "s", client.Record{})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("round %d: Produce: %v", round, err)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Fatalf("round %d: Produce returned %v after its context ended", round, waited)
		}
		b.release()
		// The window holds one produce: this one proceeds only once the
		// abandoned one's ack has been read.
		if _, err := c.Produce(testContext(t), "s", client.Record{}); err != nil || c.Err() != nil {
			t.Fatalf("round %d: Produce after an interrupted read: %v (connection: %v)", round, err, c.Err())
		}
	}
}

// distinctOffsets drains offsets (closing it) and fails the test if any
// offset was acknowledged twice; it returns how many there were.
func distinctOffsets(t *testing.T, offsets chan uint64) int {
	t.Helper()
	close(offsets)
	seen := map[uint64]bool{}
	for offset := range offsets {
		if seen[offset] {
			t.Fatalf("offset %d acknowledged twice", offset)
		}
		seen[offset] = true
	}
	return len(seen)
}
