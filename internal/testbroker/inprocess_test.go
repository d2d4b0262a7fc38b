package testbroker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/testbroker"
)

// TestStartServesAndRestartKeepsTheData: a started broker answers on its
// address, and a restart on the same data directory serves what was
// acknowledged before.
func TestStartServesAndRestartKeepsTheData(t *testing.T) {
	b := testbroker.Start(t, testbroker.Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := c.Produce(ctx, "orders", client.Record{Payload: []byte("kept")})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	restarted := b.Restart()
	if !strings.Contains(b.Log().String(), "stopped cleanly") {
		t.Fatalf("the first broker's log does not end cleanly:\n%s", b.Log())
	}
	c, err = client.Dial(ctx, restarted.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	batch, err := c.Fetch(ctx, "orders", "reader", client.FetchOptions{Type: client.GroupStreaming})
	if err != nil || len(batch.Messages) != 1 || batch.Messages[0].Offset != ack.Offset || string(batch.Messages[0].Payload) != "kept" {
		t.Fatalf("after the restart: %+v, %v", batch.Messages, err)
	}
	restarted.Stop()
	restarted.Stop() // a second Stop does nothing
}
