package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/wire"
)

func dialTxn(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// payloadsOf reads a whole partition through a fresh streaming group.
func payloadsOf(t *testing.T, c *client.Client, stream, group string) []string {
	t.Helper()
	var out []string
	for {
		result, err := c.Fetch(context.Background(), stream, group, client.FetchOptions{Type: client.GroupStreaming, MaxRecords: 100})
		if err != nil {
			t.Fatalf("fetch %s: %v", stream, err)
		}
		if len(result.Messages) == 0 {
			return out
		}
		for _, m := range result.Messages {
			out = append(out, string(m.Payload))
		}
		last := result.Messages[len(result.Messages)-1]
		if _, err := c.Commit(context.Background(), stream, group, last.Partition, last.Offset+1); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTxnOnTheWire(t *testing.T) {
	addr, stop := servePowercut(t, vfs.NewMemFS())
	defer stop()
	ctx := context.Background()
	c := dialTxn(t, addr)
	if _, err := c.Produce(ctx, "a", client.Record{Payload: []byte("plain")}); err != nil {
		t.Fatal(err)
	}
	tx, err := c.BeginTx(ctx, client.TxOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []client.Destination{client.ToPartition("a", 0), client.ToPartition("b", 0), client.ToPartition("a", 0)} {
		ack, err := tx.Publish(ctx, d, client.Record{Payload: []byte(fmt.Sprint("t", i))})
		if err != nil || ack.Offset != uint64(i) {
			t.Fatalf("publish %d: %+v, %v; want index %d", i, ack, err, i)
		}
	}
	if got := payloadsOf(t, c, "a", "before"); !slices.Equal(got, []string{"plain"}) {
		t.Fatalf("before the commit stream a shows %v", got)
	}
	other := dialTxn(t, addr)
	if _, err := (&client.Tx{}).Publish(ctx, client.ToStream("a"), client.Record{}); err == nil {
		t.Fatalf("a zero Tx published")
	}
	if _, err := other.TxOutcome(ctx, tx.ID()); !errors.Is(err, client.ErrTxnUnknown) {
		t.Fatalf("another connection ending an open transaction: %v, want ErrTxnUnknown", err)
	}
	ranges, err := tx.Commit(ctx)
	want := []client.TxRange{{Stream: "a", First: 1, Count: 2}, {Stream: "b", First: 0, Count: 1}}
	if err != nil || !slices.Equal(ranges, want) {
		t.Fatalf("commit: %+v, %v; want %+v", ranges, err, want)
	}
	if again, err := other.TxOutcome(ctx, tx.ID()); err != nil || !slices.Equal(again, want) {
		t.Fatalf("outcome from another connection: %+v, %v", again, err)
	}
	if err := tx.Abort(ctx); !errors.Is(err, client.ErrTxnCommitted) {
		t.Fatalf("abort after the commit: %v, want ErrTxnCommitted", err)
	}
	if got := payloadsOf(t, c, "a", "after"); !slices.Equal(got, []string{"plain", "t0", "t2"}) {
		t.Fatalf("after the commit stream a shows %v", got)
	}
	aborted, err := c.BeginTx(ctx, client.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aborted.Publish(ctx, client.ToStream("b"), client.Record{Payload: []byte("never")}); err != nil {
		t.Fatal(err)
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := aborted.Commit(ctx); !errors.Is(err, client.ErrTxnAborted) {
		t.Fatalf("commit after abort: %v, want ErrTxnAborted", err)
	}
	if _, err := aborted.Publish(ctx, client.ToStream("b"), client.Record{}); !errors.Is(err, client.ErrTxnAborted) {
		t.Fatalf("publish after abort: %v, want ErrTxnAborted", err)
	}
	if got := payloadsOf(t, c, "b", "check"); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("stream b shows %v", got)
	}
}

// TestConsumeTransformProduceAcrossCrashes runs an exactly-once pipeline:
// a streaming group reads stream in, each batch is published transformed
// to stream out in a transaction that also commits the group's position.
// The broker loses power in the middle of a batch (before its commit, or
// while the commit runs) three times. At the end out holds every input
// transformed exactly once, in order, and the group stands at the end.
func TestConsumeTransformProduceAcrossCrashes(t *testing.T) {
	const inputs = 40
	seed := crashtest.Seed(t)
	t.Logf("replay with IRONBUS_SEED=%d", seed)
	random := rand.New(rand.NewPCG(seed, seed^0x7c7))
	image := vfs.NewMemFS()
	addr, stop := servePowercut(t, image)
	c := dialTxn(t, addr)
	ctx := context.Background()
	for i := range inputs {
		if _, err := c.Produce(ctx, "in", client.Record{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for cut := range 4 {
		batches := 2 + random.IntN(2)
		if cut == 3 {
			batches = inputs // the last run drains the input
		}
		for range batches {
			if done := transformBatch(t, c, random, cut < 3); done {
				break
			}
		}
		if cut == 3 {
			break
		}
		// The cut: the last batch's commit may be anywhere in flight.
		image = image.CrashClone(vfs.CrashOptions{Seed: random.Uint64(), KeepUnsynced: random.Float64()})
		_ = c.Close()
		stop()
		addr, stop = servePowercut(t, image)
		c = dialTxn(t, addr)
	}
	defer stop()
	var want []string
	for i := range inputs {
		want = append(want, fmt.Sprint("T", i))
	}
	if got := payloadsOf(t, c, "out", "check"); !slices.Equal(got, want) {
		t.Fatalf("out holds %v\nwant %v", got, want)
	}
	info, err := c.OpenGroup(ctx, "in", "etl", client.GroupOptions{Type: client.GroupStreaming})
	if err != nil || info.Committed != inputs {
		t.Fatalf("group etl at %+v, %v; want %d", info, err, inputs)
	}
}

// transformBatch processes up to 5 records of in. With crashing, it
// returns while the commit may still run (the caller cuts the power). It
// reports whether the input was used up.
func transformBatch(t *testing.T, c *client.Client, random *rand.Rand, crashing bool) bool {
	ctx := context.Background()
	result, err := c.Fetch(ctx, "in", "etl", client.FetchOptions{Type: client.GroupStreaming, MaxRecords: 1 + random.IntN(5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Messages) == 0 {
		return true
	}
	tx, err := c.BeginTx(ctx, client.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range result.Messages {
		if _, err := tx.Publish(ctx, client.ToPartition("out", 0), client.Record{Payload: []byte("T" + string(m.Payload))}); err != nil {
			t.Fatal(err)
		}
	}
	last := result.Messages[len(result.Messages)-1]
	tx.CommitGroup("in", 0, "etl", last.Offset+1)
	if !crashing || random.IntN(3) > 0 {
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return false
	}
	go func() { _, _ = tx.Commit(ctx) }() // the cut comes while it runs, or before it starts
	time.Sleep(time.Duration(random.IntN(8000)) * time.Microsecond)
	return false
}

func TestTxnRecordRefusesAnExpectation(t *testing.T) {
	addr, stop := servePowercut(t, vfs.NewMemFS())
	defer stop()
	c := connect(t, addr)
	c.send(1, &wire.TxnBegin{})
	state, err := wire.DecodeTxnState(c.read().Body)
	if err != nil || state.Outcome != wire.TxnOpen {
		t.Fatalf("TxnBegin: %+v, %v", state, err)
	}
	body, crc := recordBody("x")
	c.send(2, &wire.Produce{Stream: []byte("a"), BodyCRC: crc, Body: body,
		Options: wire.ProduceOptions{Transaction: true, TransactionID: state.ID, HasExpectLastOffset: true}})
	expectError(t, c.read(), 2, wire.CodeInvalidRequest)
	c.send(3, &wire.Produce{Stream: []byte("a"), BodyCRC: crc, Body: body,
		Options: wire.ProduceOptions{Transaction: true, TransactionID: state.ID + 1000}})
	expectError(t, c.read(), 3, wire.CodeTxnUnknown)
	c.send(4, &wire.Produce{Stream: []byte("a"), BodyCRC: crc, Body: body,
		Options: wire.ProduceOptions{Transaction: true, TransactionID: state.ID}})
	frame := c.read()
	ack, err := wire.DecodeProduceAck(frame.Body)
	if err != nil || frame.RequestID != 4 || ack.Flags != wire.AckPending || ack.Offset != 0 {
		t.Fatalf("transactional produce answered %v %+v, %v; want a pending ack of index 0", frame.Type, ack, err)
	}
	c.send(5, &wire.TxnEnd{ID: state.ID, Op: 9})
	expectError(t, c.read(), 5, wire.CodeInvalidRequest)
}
