package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/subject"
	"github.com/ironbus/ironbus/wire"
)

// multiPartition configures a fake broker with stream "orders" of four
// partitions and the binding "orders.>" → "orders".
func multiPartition(b *fakeBroker) {
	b.partitions = map[string]uint32{"orders": 4}
	b.bindings = map[string]string{"orders.>": "orders"}
}

// TestSubjectsAreValidatedBeforeSending: a record with a subject that
// could inject protocol (whitespace, empty tokens, wildcards) is refused
// by Produce and Send with ErrInvalidSubject, and nothing reaches the
// broker; a routed record needs a subject.
func TestSubjectsAreValidatedBeforeSending(t *testing.T) {
	b := startFake(t, multiPartition)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	invalid := []string{"orders..eu", "orders.eu ", "orders.\r\nPUB x", ".orders", "orders.", "orders.*", "orders.>"}
	producer := c.NewProducerTo(client.BySubject(), client.ProducerOptions{})
	defer producer.Close()
	for _, bad := range invalid {
		if _, err := c.ProduceTo(ctx, client.ToStream("orders"), client.Record{Subject: bad}); !errors.Is(err, client.ErrInvalidSubject) || !errors.Is(err, subject.ErrInvalidSubject) {
			t.Errorf("Produce with subject %q: %v, want ErrInvalidSubject", bad, err)
		}
		if err := producer.Send(ctx, client.Record{Subject: bad}); !errors.Is(err, client.ErrInvalidSubject) {
			t.Errorf("Send with subject %q: %v, want ErrInvalidSubject", bad, err)
		}
	}
	if _, err := c.ProduceTo(ctx, client.BySubject(), client.Record{Payload: []byte("x")}); !errors.Is(err, client.ErrInvalidSubject) {
		t.Errorf("a routed record without a subject: %v", err)
	}
	b.locked(func() {
		if b.produced != 0 {
			t.Errorf("%d produces reached the broker", b.produced)
		}
	})
}

// TestRouteBySubjectAndPartitionByKey: a routed record lands in the bound
// stream, in the partition its key hashes to (the same as
// wire.PartitionForKey), and the Ack names it; an unbound subject is
// no_route; a named partition is kept.
func TestRouteBySubjectAndPartitionByKey(t *testing.T) {
	b := startFake(t, multiPartition)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for i := range 20 {
		key := fmt.Appendf(nil, "customer-%d", i)
		ack, err := c.ProduceTo(ctx, client.BySubject(), client.Record{Key: key, Subject: "orders.eu.created"})
		if err != nil {
			t.Fatal(err)
		}
		if want := wire.PartitionForKey(key, 4); ack.Partition != want {
			t.Fatalf("key %s: partition %d, want %d", key, ack.Partition, want)
		}
	}
	_, err := c.ProduceTo(ctx, client.BySubject(), client.Record{Subject: "invoices.eu"})
	if !errors.Is(err, &wire.Error{Code: wire.CodeNoRoute}) {
		t.Fatalf("unbound subject: %v, want no_route", err)
	}
	ack, err := c.ProduceTo(ctx, client.ToPartition("orders", 3), client.Record{Key: []byte("k"), Subject: "orders.us"})
	if err != nil || ack.Partition != 3 {
		t.Fatalf("named partition: %+v %v", ack, err)
	}
	if _, err := c.ProduceTo(ctx, client.ToPartition("orders", wire.MaxPartitions), client.Record{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("partition past the maximum: %v", err)
	}
}

// TestRoutedProducerPipelines: a subject-routed Producer keeps its
// window and its Results report each record's partition.
func TestRoutedProducerPipelines(t *testing.T) {
	b := startFake(t, multiPartition)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	producer := c.NewProducerTo(client.BySubject(), client.ProducerOptions{Window: 8})
	go func() {
		for i := range 100 {
			if err := producer.Send(ctx, client.Record{Key: fmt.Appendf(nil, "k%d", i), Subject: "orders.x"}); err != nil {
				t.Error(err)
			}
		}
		producer.Close()
	}()
	seen := map[uint32]int{}
	for result := range producer.Results() {
		if result.Err != nil {
			t.Fatal(result.Err)
		}
		seen[result.Ack.Partition]++
	}
	if len(seen) != 4 {
		t.Fatalf("100 keys over 4 partitions landed in %v", seen)
	}
}

// TestAllPartitionsAcksSplitPerPartition: a work Fetch of every partition
// returns messages naming their partition, and one Ack call settles them
// with one Ack frame per partition, statuses in the caller's order.
func TestAllPartitionsAcksSplitPerPartition(t *testing.T) {
	b := startFake(t, multiPartition)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for i := range 40 {
		if _, err := c.Produce(ctx, "orders", client.Record{Key: fmt.Appendf(nil, "k%d", i), Subject: "orders.a"}); err != nil {
			t.Fatal(err)
		}
	}
	result, err := c.Fetch(ctx, "orders", "g", client.FetchOptions{Partition: client.AllPartitions, MaxRecords: 100})
	if err != nil || len(result.Messages) != 40 {
		t.Fatalf("fetch: %d messages, %v", len(result.Messages), err)
	}
	partitions := map[uint32]bool{}
	for _, m := range result.Messages {
		partitions[m.Partition] = true
	}
	// Interleave the partitions: the client must still group them.
	messages := slices.Clone(result.Messages)
	slices.SortFunc(messages, func(x, y client.Message) int { return int(x.Offset) - int(y.Offset) })
	statuses, err := c.Ack(ctx, "orders", "g", messages...)
	if err != nil || len(statuses) != 40 {
		t.Fatalf("ack: %v %v", statuses, err)
	}
	for i, s := range statuses {
		if s != client.AckOK {
			t.Fatalf("status %d: %v", i, s)
		}
	}
	b.locked(func() {
		if len(b.ackFrames) != len(partitions) {
			t.Errorf("%d Ack frames for %d partitions: %+v", len(b.ackFrames), len(partitions), b.ackFrames)
		}
	})
	if again, _ := c.Ack(ctx, "orders", "g", messages[0]); again[0] != client.AckUnknown {
		t.Fatalf("acked twice: %v", again)
	}
}

// TestFilteredFetchReportsFilteredGaps: a filter is sent with the
// Consume; the records it skips come back as coalesced gaps with reason
// GapFiltered.
func TestFilteredFetchReportsFilteredGaps(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	subjects := []string{"a.x", "a.x", "b.y", "b.y", "b.y", "a.z", "b.y"}
	for _, s := range subjects {
		if _, err := c.Produce(ctx, "mixed", client.Record{Subject: s}); err != nil {
			t.Fatal(err)
		}
	}
	result, err := c.Fetch(ctx, "mixed", "g", client.FetchOptions{Filter: "a.*"})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsets(result.Messages); !slices.Equal(got, []uint64{0, 1, 5}) {
		t.Fatalf("delivered %v", got)
	}
	want := []client.Gap{{From: 2, To: 5, Reason: client.GapFiltered}, {From: 6, To: 7, Reason: client.GapFiltered}}
	if !slices.Equal(result.Gaps, want) {
		t.Fatalf("gaps %+v, want %+v", result.Gaps, want)
	}
	if _, err := c.Fetch(ctx, "mixed", "g", client.FetchOptions{Filter: "a..b"}); !errors.Is(err, client.ErrInvalidSubject) {
		t.Fatalf("bad filter: %v", err)
	}
}

// TestStreamOfEveryPartition: a Stream with AllPartitions and a filter
// keeps a position per partition (advanced by filtered gaps too) and
// CommitPositions commits each partition once.
func TestStreamOfEveryPartition(t *testing.T) {
	b := startFake(t, multiPartition)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for partition := range uint32(3) {
		for i := range 5 {
			subject := "orders.other"
			if i%2 == 0 {
				subject = "orders.wanted"
			}
			if _, err := c.ProduceTo(ctx, client.ToPartition("orders", partition), client.Record{Subject: subject}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stream, err := c.Stream("orders", "tail", client.StreamOptions{Partition: client.AllPartitions, Filter: "orders.wanted"})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := stream.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Messages) != 9 || batch.Next != 0 {
		t.Fatalf("%d messages (want 9), next %d", len(batch.Messages), batch.Next)
	}
	for _, m := range batch.Messages {
		if m.Subject != "orders.wanted" || m.Stream != "orders" {
			t.Fatalf("message %+v", m)
		}
	}
	want := []client.PartitionOffset{{Partition: 0, Offset: 5}, {Partition: 1, Offset: 5}, {Partition: 2, Offset: 5}}
	if !slices.Equal(batch.Positions, want) || !slices.Equal(stream.Positions(), want) {
		t.Fatalf("positions %v / %v, want %v", batch.Positions, stream.Positions(), want)
	}
	if err := stream.Commit(ctx, 5); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Commit on every partition: %v", err)
	}
	if err := stream.CommitPositions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stream.CommitPositions(ctx); err != nil { // nothing moved: nothing sent
		t.Fatal(err)
	}
	b.locked(func() {
		if len(b.ackFrames) != 3 || b.commits["orders"] != 5 || b.commits["orders#2"] != 5 {
			t.Errorf("commits %v in %d frames", b.commits, len(b.ackFrames))
		}
	})
}

// TestConsumeStreamsSpansStreams: one serialized handler consumes a
// filtered group on two streams (one of them partitioned); every
// matching record arrives once, naming its stream and partition, in
// offset order within each stream partition.
func TestConsumeStreamsSpansStreams(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 2} })
	c := dial(t, b, client.Options{})
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	want := 0
	for i := range 30 {
		region := []string{"eu", "us", "apac"}[i%3]
		for _, stream := range []string{"orders", "invoices"} {
			record := client.Record{Key: fmt.Appendf(nil, "k%d", i), Subject: stream + "." + region}
			if _, err := c.Produce(ctx, stream, record); err != nil {
				t.Fatal(err)
			}
			if region == "eu" {
				want++
			}
		}
	}
	var running atomic.Int32
	last := map[string]uint64{}
	seen := 0
	handler := func(_ context.Context, m client.Message) error {
		if running.Add(1) != 1 {
			t.Error("handler called concurrently")
		}
		defer running.Add(-1)
		if !strings.HasSuffix(m.Subject, ".eu") || !strings.HasPrefix(m.Subject, m.Stream+".") {
			t.Errorf("message %s/%d@%d with subject %q", m.Stream, m.Partition, m.Offset, m.Subject)
		}
		where := fmt.Sprintf("%s/%d", m.Stream, m.Partition)
		if previous, ok := last[where]; ok && m.Offset <= previous {
			t.Errorf("%s: offset %d after %d", where, m.Offset, previous)
		}
		last[where] = m.Offset
		if seen++; seen == want {
			cancel()
		}
		return nil
	}
	opts := client.ConsumeOptions{Partition: client.AllPartitions, Filter: "*.eu", Wait: 10 * time.Millisecond}
	err := c.ConsumeStreams(ctx, []string{"orders", "invoices"}, "g", handler, opts)
	if !errors.Is(err, context.Canceled) || seen != want {
		t.Fatalf("ConsumeStreams: %v after %d of %d", err, seen, want)
	}
	if _, ok := last["orders/1"]; !ok {
		t.Errorf("nothing from partition 1 of orders: %v", last)
	}
	b.locked(func() {
		if !slices.Equal(b.groupFilters, []string{"*.eu", "*.eu"}) {
			t.Errorf("OpenGroup filters %q", b.groupFilters)
		}
	})
}
