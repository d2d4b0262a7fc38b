package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

func produceN(t *testing.T, c *client.Client, stream string, n int, size int) {
	t.Helper()
	for i := range n {
		payload := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		record := client.Record{Key: fmt.Appendf(nil, "key-%d", i), Subject: "s.sub", Payload: payload,
			Headers: []client.Header{{Name: "n", Value: fmt.Appendf(nil, "%d", i)}}}
		if _, err := c.Produce(context.Background(), stream, record); err != nil {
			t.Fatal(err)
		}
	}
}

func offsets(messages []client.Message) []uint64 {
	var out []uint64
	for _, m := range messages {
		out = append(out, m.Offset)
	}
	return out
}

func TestFetchAckNack(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	produceN(t, c, "orders", 3, 10)
	res, err := c.Fetch(ctx, "orders", "billing", client.FetchOptions{MaxRecords: 10})
	if err != nil || len(res.Messages) != 3 || res.Reason != "caught_up" {
		t.Fatalf("Fetch: %+v %v", res, err)
	}
	m := res.Messages[1]
	if m.Stream != "orders" || m.Offset != 1 || m.Attempt != 1 || m.Redelivered || string(m.Key) != "key-1" ||
		m.Subject != "s.sub" || string(m.Payload) != "bbbbbbbbbb" || len(m.Headers) != 1 ||
		m.Headers[0].Name != "n" || string(m.Headers[0].Value) != "1" || time.Since(m.Timestamp) > time.Minute {
		t.Fatalf("message %+v", m)
	}
	expect := func(got []client.AckStatus, err error, want ...client.AckStatus) {
		t.Helper()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("statuses %v %v, want %v", got, err, want)
		}
	}
	statuses, err := c.Ack(ctx, "orders", "billing", res.Messages[0])
	expect(statuses, err, client.AckOK)
	statuses, err = c.Ack(ctx, "orders", "billing", res.Messages[0])
	expect(statuses, err, client.AckUnknown)
	stale := res.Messages[1]
	stale.Lease += 1000
	statuses, err = c.Ack(ctx, "orders", "billing", stale)
	expect(statuses, err, client.AckStale)
	statuses, err = c.Nack(ctx, "orders", "billing", 0, res.Messages[1], res.Messages[2])
	expect(statuses, err, client.AckOK, client.AckOK)

	again, err := c.Fetch(ctx, "orders", "billing", client.FetchOptions{})
	if err != nil || !slices.Equal(offsets(again.Messages), []uint64{1, 2}) {
		t.Fatalf("Fetch after Nack: %v %v", offsets(again.Messages), err)
	}
	if m := again.Messages[0]; m.Attempt != 2 || !m.Redelivered {
		t.Fatalf("redelivered message %+v", m)
	}
	statuses, err = c.Ack(ctx, "orders", "billing", again.Messages...)
	expect(statuses, err, client.AckOK, client.AckOK)
	if res, err := c.Fetch(ctx, "orders", "billing", client.FetchOptions{}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("Fetch after acking everything: %+v %v", res, err)
	}
	if s := fmt.Sprint(client.AckOK, client.AckStale, client.AckUnknown, client.AckStatus(9)); s != "ok stale unknown status(9)" {
		t.Fatalf("AckStatus strings: %s", s)
	}
}

// TestFetchOwnsBytes fetches far more than the client's read buffer holds,
// so an early message aliasing it would be overwritten by later ones.
func TestFetchOwnsBytes(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	produceN(t, c, "s", 200, 2000)
	first, err := c.Fetch(ctx, "s", "g", client.FetchOptions{MaxRecords: 5})
	if err != nil || len(first.Messages) != 5 {
		t.Fatalf("Fetch: %v", err)
	}
	var kept [][]byte
	for _, m := range first.Messages {
		kept = append(kept, bytes.Clone(m.Payload), bytes.Clone(m.Key), bytes.Clone(m.Headers[0].Value))
	}
	for {
		res, err := c.Fetch(ctx, "s", "g", client.FetchOptions{MaxRecords: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			break
		}
	}
	for i, m := range first.Messages {
		if !bytes.Equal(m.Payload, kept[3*i]) || !bytes.Equal(m.Key, kept[3*i+1]) || !bytes.Equal(m.Headers[0].Value, kept[3*i+2]) {
			t.Fatalf("message %d changed after later fetches: it aliases a client buffer", i)
		}
	}
}

func TestFetchDetectsBadCRC(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	produceN(t, c, "s", 3, 10)
	b.locked(func() { b.corrupt[1] = true })
	res, err := c.Fetch(ctx, "s", "g", client.FetchOptions{})
	var derr *client.DeliveryError
	if !errors.Is(err, client.ErrCorruptDelivery) || !errors.As(err, &derr) || len(derr.Rejected) != 1 {
		t.Fatalf("Fetch with a corrupt record: %v", err)
	}
	bad := derr.Rejected[0].Message
	if bad.Offset != 1 || bad.Payload != nil || bad.Key != nil {
		t.Fatalf("rejected %+v: only coordinates, never the data", bad)
	}
	if !slices.Equal(offsets(res.Messages), []uint64{0, 2}) {
		t.Fatalf("verified messages %v", offsets(res.Messages))
	}
	if statuses, err := c.Nack(ctx, "s", "g", 0, bad); err != nil || statuses[0] != client.AckOK {
		t.Fatalf("Nack of the rejected record: %v %v", statuses, err)
	}
	b.locked(func() { b.corrupt[1] = false })
	res, err = c.Fetch(ctx, "s", "g", client.FetchOptions{})
	if err != nil || !slices.Equal(offsets(res.Messages), []uint64{1}) || string(res.Messages[0].Payload) != "bbbbbbbbbb" {
		t.Fatalf("redelivery of the record: %+v %v", res, err)
	}
}

func TestFetchGap(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	produceN(t, c, "s", 1, 1)
	b.locked(func() {
		b.gaps = []wire.Gap{{From: 10, To: 20, Reason: wire.GapRetention, Detail: "7d retention"}, {From: 30, To: 31, Reason: wire.GapLost}}
	})
	res, err := c.Fetch(context.Background(), "s", "g", client.FetchOptions{})
	want := []client.Gap{{From: 10, To: 20, Reason: "retention", Detail: "7d retention"}, {From: 30, To: 31, Reason: "lost"}}
	if err != nil || !slices.Equal(res.Gaps, want) || len(res.Messages) != 1 {
		t.Fatalf("Fetch: %+v %v", res, err)
	}
}

func TestFetchLongPollAndLimits(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.logs["quiet"] = &fakeLog{} })
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	res, err := c.Fetch(ctx, "quiet", "g", client.FetchOptions{Wait: 30 * time.Millisecond})
	if err != nil || res.Reason != "waited" || len(res.Messages) != 0 {
		t.Fatalf("long poll: %+v %v", res, err)
	}
	produceN(t, c, "s", 5, 1)
	res, err = c.Fetch(ctx, "s", "g", client.FetchOptions{MaxRecords: 2})
	if err != nil || res.Reason != "limit" || len(res.Messages) != 2 {
		t.Fatalf("limited fetch: %+v %v", res, err)
	}
}

func TestFetchServerError(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	_, err := c.Fetch(context.Background(), "missing", "g", client.FetchOptions{})
	if !errors.Is(err, &wire.Error{Code: wire.CodeNotFound}) || c.Err() != nil {
		t.Fatalf("Fetch of a missing stream: %v (connection: %v)", err, c.Err())
	}
}

func TestFetchContextCancel(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.logs["quiet"] = &fakeLog{} })
	c := dial(t, b, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Fetch(ctx, "quiet", "g", client.FetchOptions{Wait: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch: %v", err)
	}
	time.Sleep(150 * time.Millisecond) // the abandoned answer arrives and is dropped
	if _, err := c.Ping(context.Background()); err != nil || c.Err() != nil {
		t.Fatalf("connection after an abandoned Fetch: %v %v", err, c.Err())
	}
}

func TestAckSplitsRequests(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.recordIDs = true })
	c := dial(t, b, client.Options{})
	messages := make([]client.Message, 5000)
	for i := range messages {
		messages[i] = client.Message{Offset: uint64(i), Lease: 1}
	}
	messages[4999].Partition = 1 // a second partition needs its own request
	statuses, err := c.Nack(context.Background(), "s", "g", -1, messages...)
	if err != nil || len(statuses) != 5000 || statuses[0] != client.AckUnknown {
		t.Fatalf("Nack of 5000: %d statuses, %v", len(statuses), err)
	}
	b.locked(func() {
		if len(b.ids) != 3 {
			t.Fatalf("%d requests, want 3 (4096 + 903 on partition 0, 1 on partition 1)", len(b.ids))
		}
	})
	other := client.Message{Stream: "other"}
	if _, err := c.Ack(context.Background(), "s", "g", other); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Ack of another stream's message: %v", err)
	}
	if statuses, err := c.Ack(context.Background(), "s", "g"); err != nil || len(statuses) != 0 {
		t.Fatalf("Ack of nothing: %v %v", statuses, err)
	}
}

// TestLargeRecordRoundTrip sends records larger than the client's 64 KiB
// read buffer, so it must grow for them and shrink back afterwards.
func TestLargeRecordRoundTrip(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 600<<10/16)
	for _, payload := range [][]byte{big, []byte("small"), big[:100<<10]} {
		if _, err := c.Produce(ctx, "s", client.Record{Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range [][]byte{big, []byte("small"), big[:100<<10]} {
		res, err := c.Fetch(ctx, "s", "g", client.FetchOptions{MaxRecords: 1})
		if err != nil || len(res.Messages) != 1 || !bytes.Equal(res.Messages[0].Payload, want) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}
