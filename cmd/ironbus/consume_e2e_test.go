package main

import (
	"context"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// End-to-end consumer scenarios against the real binary.

func dialConsumer(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServeRedeliversADeadConsumersLeasesAtOnce: a consumer holding 1,000
// leases of a minute dies (its connection closes); another consumer of the
// group gets all 1,000 within seconds, not after the minute.
func TestServeRedeliversADeadConsumersLeasesAtOnce(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	if acked := produceUntil(t, broker.Addr(), 1000, 256, 0, nil); len(acked) != 1000 {
		t.Fatalf("%d of 1,000 records acknowledged", len(acked))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doomed := dialConsumer(t, broker.Addr())
	held, err := doomed.Fetch(ctx, "orders", "workers", client.FetchOptions{MaxRecords: 1000, Lease: time.Minute})
	if err != nil || len(held.Messages) != 1000 {
		t.Fatalf("the first consumer leased %d records: %v", len(held.Messages), err)
	}
	survivor := dialConsumer(t, broker.Addr())
	if early, _ := survivor.Fetch(ctx, "orders", "workers", client.FetchOptions{}); len(early.Messages) != 0 {
		t.Fatalf("%d leased records went to a second consumer while their holder lived", len(early.Messages))
	}
	doomed.Close()
	died := time.Now()
	got := map[uint64]bool{}
	for len(got) < 1000 && time.Since(died) < 10*time.Second {
		result, err := survivor.Fetch(ctx, "orders", "workers", client.FetchOptions{MaxRecords: 1000, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range result.Messages {
			if !m.Redelivered || m.Attempt != 2 {
				t.Fatalf("offset %d: attempt %d, redelivered %v", m.Offset, m.Attempt, m.Redelivered)
			}
			got[m.Offset] = true
		}
		if _, err := survivor.Ack(ctx, "orders", "workers", result.Messages...); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1000 {
		t.Fatalf("%d of 1,000 leases came back within 10 s of the consumer's death", len(got))
	}
	t.Logf("all 1,000 redelivered %v after the consumer died", time.Since(died))
}

// TestServeRestartKeepsDeliveryCounts: a record nacked three times, then
// the broker is killed and restarted: it is delivered twice more (attempts
// 4 and 5, max-deliver being 5) and then lands in the dead-letter queue,
// once, with its attempts.
func TestServeRestartKeepsDeliveryCounts(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	produceUntil(t, broker.Addr(), 1, 1, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nackAttempt := func(c *client.Client, want uint32) {
		t.Helper()
		result, err := c.Fetch(ctx, "orders", "workers", client.FetchOptions{Wait: 5 * time.Second})
		if err != nil || len(result.Messages) != 1 || result.Messages[0].Attempt != want {
			t.Fatalf("want attempt %d, got %+v (%v)", want, result.Messages, err)
		}
		if _, err := c.Nack(ctx, "orders", "workers", 0, result.Messages...); err != nil {
			t.Fatal(err)
		}
	}
	first := dialConsumer(t, broker.Addr())
	for attempt := uint32(1); attempt <= 3; attempt++ {
		nackAttempt(first, attempt)
	}
	time.Sleep(600 * time.Millisecond) // past the checkpoint interval
	broker.Kill()

	restarted := broker.Restart()
	second := dialConsumer(t, restarted.Addr())
	nackAttempt(second, 4)
	nackAttempt(second, 5)
	if result, _ := second.Fetch(ctx, "orders", "workers", client.FetchOptions{Wait: 500 * time.Millisecond}); len(result.Messages) != 0 {
		t.Fatalf("delivered past max-deliver: %+v", result.Messages)
	}
	var letters []client.Message
	for deadline := time.Now().Add(5 * time.Second); len(letters) == 0 && time.Now().Before(deadline); {
		result, err := second.Fetch(ctx, ".dlq.orders", "inspect", client.FetchOptions{Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		letters = append(letters, result.Messages...)
	}
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want 1", len(letters))
	}
	headers := map[string]string{}
	for _, h := range letters[0].Headers {
		headers[h.Name] = string(h.Value)
	}
	if headers["ironbus-dlq-attempts"] != "5" || headers["ironbus-dlq-reason"] != "max-deliver" || string(letters[0].Payload) != "m-0" {
		t.Fatalf("dead letter %q with headers %v", letters[0].Payload, headers)
	}
}
