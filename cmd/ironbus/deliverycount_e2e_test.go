package main

import (
	"context"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// TestServeRestartKeepsAFirstDelivery: a record delivered once and never
// settled, then the broker is killed after a checkpoint interval and
// restarted: it comes back as attempt 2, not 1 again.
func TestServeRestartKeepsAFirstDelivery(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The group exists and is checkpointed before the record comes, so
	// only the delivery itself can make its count durable.
	consumer := dialConsumer(t, broker.Addr())
	if _, err := consumer.CreateStream(ctx, "orders", client.StreamSettings{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := consumer.OpenGroup(ctx, "orders", "workers", client.GroupOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	produceUntil(t, broker.Addr(), 1, 1, 0, nil)
	fetch := func(c *client.Client) client.Message {
		t.Helper()
		result, err := c.Fetch(ctx, "orders", "workers", client.FetchOptions{Wait: 5 * time.Second})
		if err != nil || len(result.Messages) != 1 {
			t.Fatalf("fetch: %+v (%v)", result.Messages, err)
		}
		return result.Messages[0]
	}
	if first := fetch(consumer); first.Attempt != 1 {
		t.Fatalf("first delivery is attempt %d", first.Attempt)
	}
	time.Sleep(600 * time.Millisecond) // past the checkpoint interval (200 ms)
	broker.Kill()

	restarted := broker.Restart()
	if again := fetch(dialConsumer(t, restarted.Addr())); again.Attempt != 2 || !again.Redelivered {
		t.Fatalf("after a restart the record came back as attempt %d (redelivered %v), want 2", again.Attempt, again.Redelivered)
	}
}
