package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/client"
)

// TestStreamVerifiesEveryFrame: a DeliverBatch whose record frame fails
// its CRC is an error naming the offset, never a message; the intact
// batch decodes into messages aliasing the stream's buffer.
func TestStreamVerifiesEveryFrame(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	produceN(t, c, "s", 3, 10)
	stream, err := c.Stream("s", "tail", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := stream.Next(ctx)
	if err != nil || !slices.Equal(offsets(batch.Messages), []uint64{0, 1, 2}) || batch.Next != 3 {
		t.Fatalf("intact batch: %v next %d, %v", offsets(batch.Messages), batch.Next, err)
	}
	if string(batch.Messages[1].Payload) != "bbbbbbbbbb" {
		t.Fatalf("payload %q", batch.Messages[1].Payload)
	}
	b.locked(func() { b.corrupt[1] = true })
	batch, err = stream.Next(ctx)
	var corrupt *client.CorruptBatchError
	if !errors.Is(err, client.ErrCorruptDelivery) || !errors.As(err, &corrupt) || corrupt.Offset != 1 || len(batch.Messages) != 0 {
		t.Fatalf("a corrupt frame: %d messages, error %v", len(batch.Messages), err)
	}
	// The same corruption through Fetch: the others arrive, the bad one
	// is rejected by offset.
	res, err := c.Fetch(ctx, "s", "tail", client.FetchOptions{Type: client.GroupStreaming})
	var derr *client.DeliveryError
	if !errors.As(err, &derr) || len(derr.Rejected) != 1 || derr.Rejected[0].Message.Offset != 1 || !slices.Equal(offsets(res.Messages), []uint64{0, 2}) {
		t.Fatalf("Fetch of a corrupt batch: %v %v", offsets(res.Messages), err)
	}
}
