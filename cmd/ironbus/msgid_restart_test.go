//go:build unix

package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// The message-id window of the real broker survives kill -9 and a clean
// restart, and keeps the ids of purged records: a republish of an id
// inside the window is answered as a duplicate with the first copy's
// offset and stores nothing, whatever happened to the process or the
// records in between.
func TestMessageIDWindowSurvivesKill9AndPurge(t *testing.T) {
	const stream = "ids"
	addr := freeLoopbackAddr(t)
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", addr, "--segment-bytes", "1MiB")
	c := dialIDs(t, addr)
	if _, err := c.CreateStream(context.Background(), stream, client.StreamSettings{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	first := publishIDs(t, c, stream, "a", 40)

	broker.Kill()
	broker = broker.Restart()
	c = dialIDs(t, addr)
	expectDuplicates(t, c, stream, "a", first, "after kill -9")
	second := publishIDs(t, c, stream, "b", 40) // stored after the restart, not yet in a sealed generation

	if _, err := c.PurgeStream(context.Background(), stream); err != nil {
		t.Fatal(err)
	}
	broker.Kill()
	broker = broker.Restart()
	c = dialIDs(t, addr)
	expectDuplicates(t, c, stream, "a", first, "after purge and kill -9")
	expectDuplicates(t, c, stream, "b", second, "after purge and kill -9")
	third := publishIDs(t, c, stream, "c", 10)
	if third[0] <= second[len(second)-1] {
		t.Errorf("a new id after the purge was stored at %d, not after %d", third[0], second[len(second)-1])
	}

	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("clean stop exited %d:\n%s", code, broker.Logs())
	}
	broker = broker.Restart()
	c = dialIDs(t, addr)
	expectDuplicates(t, c, stream, "a", first, "after a clean restart")
	expectDuplicates(t, c, stream, "b", second, "after a clean restart")
	expectDuplicates(t, c, stream, "c", third, "after a clean restart")
}

func dialIDs(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// publishIDs publishes ids prefix-0 … prefix-(count-1) once each and
// returns their offsets.
func publishIDs(t *testing.T, c *client.Client, stream, prefix string, count int) []uint64 {
	t.Helper()
	offsets := make([]uint64, count)
	for i := range offsets {
		id := fmt.Sprintf("%s-%d", prefix, i)
		ack, err := c.Produce(context.Background(), stream, client.Record{MessageID: id, Payload: []byte("first " + id)})
		if err != nil {
			t.Fatalf("publishing %s: %v", id, err)
		}
		if ack.Duplicate {
			t.Fatalf("%s: the first publish was answered as a duplicate of %d", id, ack.Offset)
		}
		offsets[i] = ack.Offset
	}
	return offsets
}

// expectDuplicates republishes the ids publishIDs published with another
// payload and fails t unless each is a duplicate at its original offset
// and the partition's end did not move.
func expectDuplicates(t *testing.T, c *client.Client, stream, prefix string, offsets []uint64, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := partitionEnd(t, ctx, c, stream)
	for i, offset := range offsets {
		id := fmt.Sprintf("%s-%d", prefix, i)
		ack, err := c.Produce(ctx, stream, client.Record{MessageID: id, Payload: []byte("again " + id)})
		switch {
		case err != nil:
			t.Errorf("%s: republishing %s: %v", when, id, err)
		case !ack.Duplicate:
			t.Errorf("%s: %s (first at %d) stored again at %d", when, id, offset, ack.Offset)
		case ack.OffsetUnknown || ack.Offset != offset:
			t.Errorf("%s: %s answered as a duplicate of %d (offset unknown: %v), first stored at %d",
				when, id, ack.Offset, ack.OffsetUnknown, offset)
		}
	}
	if after := partitionEnd(t, ctx, c, stream); after != before {
		t.Errorf("%s: republishing duplicates moved the end from %d to %d", when, before, after)
	}
}

func partitionEnd(t *testing.T, ctx context.Context, c *client.Client, stream string) uint64 {
	t.Helper()
	state, err := c.StreamInfo(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Partitions) != 1 {
		t.Fatalf("stream %s has %d partitions, want 1", stream, len(state.Partitions))
	}
	return state.Partitions[0].End
}
