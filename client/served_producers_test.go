package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/server"
	"github.com/ironbus/ironbus/wire"
)

// Tests of idempotent producing against a real in-process broker.

// servesProducers asks the broker at addr for a ProducerInit over a raw
// connection: true when it answers ProducerInfo.
func servesProducers(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	hello := wire.Hello{MinVersion: wire.ProtocolVersion, MaxVersion: wire.ProtocolVersion,
		Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame, Window: 1}
	out := wire.Append(nil, 0, &hello)
	out = wire.Append(out, 1, &wire.ProducerInit{Name: []byte("probe")})
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	chunk := make([]byte, 4096)
	for frames := 0; frames < 2; {
		f, size, err := wire.ParseFrame(buf, wire.DefaultMaxFrame)
		if errors.Is(err, wire.ErrIncomplete) {
			n, err := conn.Read(chunk)
			if err != nil {
				return false
			}
			buf = append(buf, chunk[:n]...)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if frames++; frames == 2 {
			return f.Type == wire.TypeProducerInfo
		}
		buf = buf[size:]
	}
	return false
}

// TestIdempotentProducerAcrossABrokerRestart stops the broker (gracefully:
// it refuses what it has not stored) under a pipelined producer and
// starts it again on the same address and data: every record is stored
// once, in order, and none fails.
func TestIdempotentProducerAcrossABrokerRestart(t *testing.T) {
	dir := t.TempDir()
	start := func(addr string) *server.Server {
		cfg := server.DefaultConfig()
		cfg.DataDir, cfg.Addr, cfg.HealthAddr = dir, addr, server.HealthOff
		srv, err := server.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 { // the old listener's port may take a moment to free
			if err = srv.Start(context.Background()); err == nil {
				return srv
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal(err)
		return nil
	}
	stop := func(srv *server.Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
	}
	srv := start("127.0.0.1:0")
	addr := srv.Addr()
	if !servesProducers(t, addr) {
		stop(srv)
		t.Skip("this broker does not serve ProducerInit")
	}
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducerTo(client.ToPartition("restart", 0), client.ProducerOptions{})
	results := collect(p)
	ctx := testContext(t)
	const n = 3000
	restarted := make(chan struct{})
	for i := range n {
		if i == n/3 {
			go func() {
				defer close(restarted)
				stop(srv)
				srv = start(addr)
			}()
		}
		if err := p.Send(ctx, client.Record{Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	p.Close()
	<-restarted
	defer stop(srv)
	for i, r := range <-results {
		if r.Err != nil || r.Sequence != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	check, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	for next := 0; next < n; {
		batch, err := check.Fetch(ctx, "restart", "check", client.FetchOptions{MaxRecords: 1000, Wait: time.Second})
		if err != nil || len(batch.Messages) == 0 {
			t.Fatalf("after %d records: %v, %d messages", next, err, len(batch.Messages))
		}
		for _, m := range batch.Messages {
			if string(m.Payload) != fmt.Sprint(next) {
				t.Fatalf("offset %d holds record %q, want %d: duplicated, lost or reordered", m.Offset, m.Payload, next)
			}
			next++
		}
		if _, err := check.Ack(ctx, "restart", "check", batch.Messages...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPublishingOptionsServed checks stamped produces, conditional
// appends, message ids, atomic batches and fire-and-forget records
// against the real broker.
func TestPublishingOptionsServed(t *testing.T) {
	addr, stop := startServedBroker()
	defer stop()
	if !servesProducers(t, addr) {
		t.Skip("this broker does not serve ProducerInit")
	}
	ctx := testContext(t)
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		if ack, err := c.Produce(ctx, "opts", client.Record{Payload: []byte("plain")}); err != nil || ack.Offset != uint64(i) {
			t.Fatalf("Produce %d: %+v %v", i, ack, err)
		}
	}
	_, err = c.Produce(ctx, "opts", client.Record{ExpectLastOffset: client.ExpectOffset(0)})
	var mismatch *client.ExpectationError
	if !errors.As(err, &mismatch) || !mismatch.HasActual || mismatch.Actual != 2 {
		t.Fatalf("a stale expectation: %v", err)
	}
	if ack, err := c.Produce(ctx, "opts", client.Record{ExpectLastOffset: client.ExpectOffset(2)}); err != nil || ack.Offset != 3 {
		t.Fatalf("a met expectation: %+v %v", ack, err)
	}
	first, err := c.Produce(ctx, "opts", client.Record{MessageID: "order-7"})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.Produce(ctx, "opts", client.Record{MessageID: "order-7"}); err != nil || !again.Duplicate || again.Offset != first.Offset {
		t.Fatalf("a message id again: %+v %v", again, err)
	}
	acks, err := c.PublishBatch(ctx, client.ToStream("opts"), []client.Record{{Payload: []byte("b1")}, {Payload: []byte("b2")}})
	if err != nil || len(acks) != 2 || acks[1].Offset != acks[0].Offset+1 {
		t.Fatalf("a batch: %+v %v", acks, err)
	}
	refused := []client.Record{{ExpectLastOffset: client.ExpectNone()}, {Payload: []byte("never")}}
	if _, err := c.PublishBatch(ctx, client.ToStream("opts"), refused); !errors.Is(err, &wire.Error{Code: wire.CodeBatchIncomplete}) {
		t.Fatalf("a refused batch: %v", err)
	}
	for range 3 {
		if err := c.PublishAsync(ctx, client.ToStream("opts"), client.Record{Payload: []byte("async")}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"plain", "plain", "plain", "", "", "b1", "b2", "async", "async", "async"}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		batch, err := c.Fetch(ctx, "opts", "check", client.FetchOptions{MaxRecords: 100, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range batch.Messages {
			got = append(got, string(m.Payload))
		}
		c.Ack(ctx, "opts", "check", batch.Messages...)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}
