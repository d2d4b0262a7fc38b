package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// TestServedSubjectsEndToEnd runs the streams data path against a real
// in-process broker: routed produce by key, no_route, an every-partition
// filtered Stream with per-partition commits, and a wildcard
// subscription spanning two streams.
func TestServedSubjectsEndToEnd(t *testing.T) {
	c := servedClient(t)
	ctx := testContext(t)
	for _, s := range []struct {
		name       string
		partitions uint32
	}{{"orders", 3}, {"invoices", 1}} {
		if _, err := c.CreateStream(ctx, s.name, client.StreamSettings{Partitions: s.partitions}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Bind(ctx, s.name+".>", s.name); err != nil {
			t.Fatal(err)
		}
	}
	producer := c.NewProducerTo(client.BySubject(), client.ProducerOptions{})
	for i := range 30 {
		region := []string{"eu", "us", "apac"}[i%3]
		for _, stream := range []string{"orders", "invoices"} {
			key := fmt.Appendf(nil, "c-%d", i)
			if err := producer.Send(ctx, client.Record{Key: key, Subject: stream + "." + region}); err != nil {
				t.Fatal(err)
			}
		}
	}
	go producer.Close()
	for result := range producer.Results() {
		if result.Err != nil {
			t.Fatal(result.Err)
		}
	}
	if _, err := c.ProduceTo(ctx, client.BySubject(), client.Record{Subject: "refunds.eu"}); !errors.Is(err, &wire.Error{Code: wire.CodeNoRoute}) {
		t.Fatalf("unbound subject: %v", err)
	}

	stream, err := c.Stream("orders", "eu-tail", client.StreamOptions{Partition: client.AllPartitions, Filter: "orders.eu"})
	if err != nil {
		t.Fatal(err)
	}
	var eu int
	for total := uint64(0); total < 30; {
		batch, err := stream.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		eu += len(batch.Messages)
		total = 0
		for _, p := range stream.Positions() {
			total += p.Offset
		}
	}
	if eu != 10 {
		t.Fatalf("%d eu orders, want 10", eu)
	}
	if err := stream.CommitPositions(ctx); err != nil {
		t.Fatal(err)
	}

	spanCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var streams []string
	handler := func(_ context.Context, m client.Message) error {
		streams = append(streams, m.Stream)
		if len(streams) == 20 {
			cancel()
		}
		return nil
	}
	err = c.ConsumeSubject(spanCtx, "*.eu", "eu-desk", handler, client.ConsumeOptions{Wait: 20 * time.Millisecond})
	slices.Sort(streams)
	if !errors.Is(err, context.Canceled) || len(streams) != 20 || streams[0] != "invoices" || streams[19] != "orders" {
		t.Fatalf("ConsumeSubject: %v after %v", err, streams)
	}
}
