package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// TestReplicatedReadsCrossSegments: records of a replicated partition
// stay readable past the first segment's roll, on every node.
func TestReplicatedReadsCrossSegments(t *testing.T) {
	configs := clusterConfigs(t, 3)
	var addrs []string
	for _, cfg := range configs {
		cfg.SegmentBytes = 1 << 20
		addrs = append(addrs, start(t, cfg).Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var c *client.Client
	for {
		var err error
		c, err = client.Dial(ctx, strings.Join(addrs, ","), client.Options{})
		if err == nil {
			if _, err = c.CreateStream(ctx, "rolls", client.StreamSettings{Partitions: 1, Replicas: 3}); err == nil {
				break
			}
			c.Close()
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	producer := c.NewProducerTo(client.ToPartition("rolls", 0), client.ProducerOptions{})
	const total = 30000
	go func() {
		for i := range total {
			if err := producer.Send(ctx, client.Record{Payload: []byte(fmt.Sprintf("record-%06d-%s", i, strings.Repeat("x", 60)))}); err != nil {
				return
			}
		}
	}()
	for i := range total {
		r := <-producer.Results()
		if r.Err != nil || r.Ack.Offset != uint64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	for _, addr := range addrs {
		reader, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		next := uint64(0)
		for next < total {
			result, err := reader.Fetch(ctx, "rolls", "check", client.FetchOptions{Partition: 0, MaxRecords: 5000, Lease: time.Hour, Wait: time.Second})
			if err != nil {
				t.Fatalf("%s: fetch at %d: %v", addr, next, err)
			}
			if len(result.Messages) == 0 {
				t.Fatalf("%s: the partition ends at %d of %d records", addr, next, total)
			}
			for _, m := range result.Messages {
				if m.Offset != next {
					t.Fatalf("%s: offset %d, want %d", addr, m.Offset, next)
				}
				next++
			}
			// A group holds a bounded number of unacknowledged leases.
			if _, err := reader.Ack(ctx, "rolls", "check", result.Messages...); err != nil {
				t.Fatal(err)
			}
		}
		reader.Close()
	}
}
