package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// storedPayloads returns the payloads of a fake log, in offset order.
func storedPayloads(t *testing.T, b *fakeBroker, log string) []string {
	t.Helper()
	var out []string
	for i, body := range b.bodies(log) {
		view, err := record.Parse(body)
		if err != nil {
			t.Fatalf("stored record %d: %v", i, err)
		}
		out = append(out, string(view.Payload))
	}
	return out
}

// sendNumbered sends n records whose payloads are their numbers and
// returns every Result once the producer is closed.
func sendNumbered(t *testing.T, p *client.Producer, n int, key []byte) []client.Result {
	t.Helper()
	results := collect(p)
	ctx := testContext(t)
	for i := range n {
		if err := p.Send(ctx, client.Record{Key: key, Payload: []byte(strconv.Itoa(i)), Headers: []client.Header{{Name: "h", Value: []byte("v")}}}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	p.Close()
	return <-results
}

// checkExactlyOnce checks that the log holds 0..n-1 once each, in order.
func checkExactlyOnce(t *testing.T, stored []string, n int, skip map[int]bool) {
	t.Helper()
	want := 0
	for offset, payload := range stored {
		for skip[want] {
			want++
		}
		if payload != strconv.Itoa(want) {
			t.Fatalf("offset %d holds record %s, want %d (duplicate or reordered)", offset, payload, want)
		}
		want++
	}
	for skip[want] {
		want++
	}
	if want != n {
		t.Fatalf("%d records stored, want %d", len(stored), n-len(skip))
	}
}

func TestProducerStampsRecordsAndSequencesDensely(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 4} })
	c := dial(t, b, client.Options{})
	p := c.NewProducer("orders", client.ProducerOptions{})
	key := []byte("customer-42")
	results := sendNumbered(t, p, 20, key)
	partition := wire.PartitionForKey(key, 4)
	for i, r := range results {
		if r.Err != nil || r.Ack.Partition != partition || r.Ack.Offset != uint64(i) || r.Ack.Duplicate {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	for i, body := range b.bodies(fmt.Sprintf("orders#%d", partition)) {
		view, _ := record.Parse(body)
		if !view.HasProducer || view.Sequence != uint64(i) || view.ProducerID != 7 {
			t.Fatalf("record %d: producer %v id %d sequence %d", i, view.HasProducer, view.ProducerID, view.Sequence)
		}
	}
}

func TestProducerReconnectsAndResendsWithoutDuplicates(t *testing.T) {
	const n = 300
	b := startFake(t, func(b *fakeBroker) {
		b.welcome.Window = 32
		b.reverseAcks = true
		// Every 70th record is stored and its connection dropped before
		// its read batch is acknowledged: the acks of stored records are lost.
		b.dropAfter = func(produced uint64) bool { return produced%70 == 0 }
	})
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{})
	results := sendNumbered(t, p, n, nil)
	if len(results) != n {
		t.Fatalf("%d results", len(results))
	}
	duplicates := 0
	for i, r := range results {
		if r.Err != nil || r.Sequence != uint64(i) || r.Ack.Offset != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
		if r.Ack.Duplicate {
			duplicates++
		}
	}
	checkExactlyOnce(t, storedPayloads(t, b, "s"), n, nil)
	b.locked(func() {
		if b.accepted < 3 || b.producers.inits != b.accepted {
			t.Fatalf("%d connections, %d ProducerInits: want a reconnect and an init per drop", b.accepted, b.producers.inits)
		}
		if duplicates == 0 || b.producers.dups != duplicates {
			t.Fatalf("%d duplicate results, %d duplicates answered: resends of stored records must come back as duplicates", duplicates, b.producers.dups)
		}
	})
	if c.Err() == nil {
		t.Fatal("the Client itself never reconnects: its connection must stay failed")
	}
}

func TestProducerRepairsTheGapOfARefusedRecord(t *testing.T) {
	const n = 100
	refused := map[int]bool{}
	b := startFake(t, func(b *fakeBroker) {
		b.welcome.Window = 16
		b.produceErr = func(produced uint64) *wire.Error {
			if produced == 10 || produced == 41 {
				return wire.NewError(wire.CodeBusy, "busy")
			}
			return nil
		}
	})
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{})
	results := sendNumbered(t, p, n, nil)
	for i, r := range results {
		if r.Err != nil {
			if !errors.Is(r.Err, &wire.Error{Code: wire.CodeBusy}) {
				t.Fatalf("result %d: %v", i, r.Err)
			}
			refused[i] = true
		}
	}
	if len(refused) != 2 {
		t.Fatalf("%d refused records, want the 2 the broker refused", len(refused))
	}
	checkExactlyOnce(t, storedPayloads(t, b, "s"), n, refused)
	for i, body := range b.bodies("s") {
		if view, _ := record.Parse(body); view.Sequence != uint64(i) {
			t.Fatalf("record at %d has sequence %d: sequences must stay dense", i, view.Sequence)
		}
	}
}

func TestProducerFencedByANewerIncarnation(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	old := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{Name: "writer"})
	if err := old.Send(ctx, client.Record{Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if r := <-old.Results(); r.Err != nil {
		t.Fatal(r.Err)
	}
	newer := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{Name: "writer"})
	if err := newer.Send(ctx, client.Record{Payload: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if r := <-newer.Results(); r.Err != nil || r.Ack.Offset != 1 {
		t.Fatalf("the newer incarnation: %+v", r)
	}
	if err := old.Send(ctx, client.Record{Payload: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	r := <-old.Results()
	if !errors.Is(r.Err, client.ErrProducerFenced) || !errors.Is(r.Err, &wire.Error{Code: wire.CodeProducerFenced}) {
		t.Fatalf("the fenced incarnation's record: %+v", r)
	}
	eventually(t, "the fenced producer refuses Send", func() bool {
		return errors.Is(old.Send(ctx, client.Record{}), client.ErrProducerFenced)
	})
	if got := storedPayloads(t, b, "s"); len(got) != 2 {
		t.Fatalf("stored %q", got)
	}
}

func TestProducerWithAStableNameResumesItsSequences(t *testing.T) {
	b := startFake(t, nil)
	for round := range 2 {
		c := dial(t, b, client.Options{})
		p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{Name: "billing"})
		for i, r := range sendNumbered(t, p, 5, nil) {
			if r.Err != nil || r.Ack.Duplicate {
				t.Fatalf("round %d result %d: %+v", round, i, r)
			}
		}
		c.Close()
	}
	for i, body := range b.bodies("s") {
		if view, _ := record.Parse(body); view.Sequence != uint64(i) {
			t.Fatalf("record %d has sequence %d: a restart must continue the sequence", i, view.Sequence)
		}
	}
}

func TestProducerReportsStalePositionsLoudly(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	first := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{Name: "billing"})
	sendNumbered(t, first, 3, nil)
	b.locked(func() { b.noPositions = true })
	restarted := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{Name: "billing"})
	for i, r := range sendNumbered(t, restarted, 3, nil) {
		if !errors.Is(r.Err, client.ErrSequenceGap) {
			t.Fatalf("result %d after stale positions: %+v: a new record must never pass for a stored one", i, r)
		}
	}
}

func TestProducerWithoutAKnownPartitionSendsUnstamped(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.partitions = map[string]uint32{"metrics": 3} })
	c := dial(t, b, client.Options{})
	p := c.NewProducer("metrics", client.ProducerOptions{})
	for _, r := range sendNumbered(t, p, 3, nil) { // keyless to 3 partitions: the broker picks
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, body := range b.bodies("metrics") {
		if view, _ := record.Parse(body); view.HasProducer {
			t.Fatal("a keyless record to a multi-partition stream was stamped")
		}
	}
}

func TestIdempotenceOffAndBrokersWithoutProducers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(*fakeBroker)
		opts      client.ProducerOptions
	}{
		{"off", nil, client.ProducerOptions{Idempotence: client.IdempotenceOff}},
		{"ProducerInit not served", func(b *fakeBroker) { b.noProducers = true }, client.ProducerOptions{}},
		{"no producers capability", func(b *fakeBroker) { b.welcome.Capabilities &^= wire.CapProducers }, client.ProducerOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFake(t, tc.configure)
			c := dial(t, b, client.Options{})
			p := c.NewProducerTo(client.ToPartition("s", 0), tc.opts)
			for _, r := range sendNumbered(t, p, 3, nil) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			for _, body := range b.bodies("s") {
				if view, _ := record.Parse(body); view.HasProducer {
					t.Fatal("stamped")
				}
			}
		})
	}
}

func TestProduceIsIdempotentAndRepairsItsSequence(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) {
		b.produceErr = func(produced uint64) *wire.Error {
			if produced == 3 {
				return wire.NewError(wire.CodeBusy, "busy")
			}
			return nil
		}
	})
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for i := range 6 {
		_, err := c.Produce(ctx, "s", client.Record{Payload: []byte(strconv.Itoa(i))})
		if (err != nil) != (i == 2) {
			t.Fatalf("Produce %d: %v", i, err)
		}
	}
	// A refused conditional append leaves no gap either.
	if _, err := c.Produce(ctx, "s", client.Record{ExpectLastOffset: client.ExpectOffset(99)}); err == nil {
		t.Fatal("expectation met")
	}
	if _, err := c.Produce(ctx, "s", client.Record{Payload: []byte("6")}); err != nil {
		t.Fatal(err)
	}
	for i, body := range b.bodies("s") {
		if view, _ := record.Parse(body); !view.HasProducer || view.Sequence != uint64(i) {
			t.Fatalf("record %d: stamped %v sequence %d", i, view.HasProducer, view.Sequence)
		}
	}
	b.locked(func() {
		if b.producers.inits != 1 {
			t.Fatalf("%d ProducerInits for one Client", b.producers.inits)
		}
	})
}

func TestConditionalAppends(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	if _, err := c.Produce(ctx, "s", client.Record{Subject: "a", ExpectLastOffset: client.ExpectNone()}); err != nil {
		t.Fatalf("expect none on an empty partition: %v", err)
	}
	if _, err := c.Produce(ctx, "s", client.Record{Subject: "b", ExpectLastOffset: client.ExpectOffset(0), ExpectLastSubjectOffset: client.ExpectNone()}); err != nil {
		t.Fatalf("expect 0: %v", err)
	}
	_, err := c.Produce(ctx, "s", client.Record{Subject: "a", ExpectLastOffset: client.ExpectOffset(0)})
	var expectation *client.ExpectationError
	if !errors.As(err, &expectation) || !expectation.HasActual || expectation.Actual != 1 ||
		!errors.Is(err, &wire.Error{Code: wire.CodeExpectationFailed}) {
		t.Fatalf("a stale expectation: %v", err)
	}
	_, err = c.Produce(ctx, "s", client.Record{Subject: "c", ExpectLastSubjectOffset: client.ExpectOffset(3)})
	if !errors.As(err, &expectation) || expectation.HasActual {
		t.Fatalf("a subject without records: %v", err)
	}
	if _, err := c.Produce(ctx, "s", client.Record{ExpectLastSubjectOffset: client.ExpectNone()}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a subject expectation without a subject: %v", err)
	}
	if n := len(b.bodies("s")); n != 2 {
		t.Fatalf("%d records stored", n)
	}
}

func TestMessageIDDeduplicates(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{Idempotence: client.IdempotenceOff})
	ctx := testContext(t)
	first, err := c.Produce(ctx, "s", client.Record{MessageID: "order-1", Payload: []byte("x")})
	if err != nil || first.Duplicate {
		t.Fatalf("%+v %v", first, err)
	}
	if _, err := c.Produce(ctx, "s", client.Record{Payload: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	again, err := c.Produce(ctx, "s", client.Record{MessageID: "order-1", Payload: []byte("x")})
	if err != nil || !again.Duplicate || again.Offset != first.Offset {
		t.Fatalf("the same message id again: %+v %v", again, err)
	}
	if n := len(b.bodies("s")); n != 2 {
		t.Fatalf("%d records stored", n)
	}
	for _, r := range []client.Record{
		{MessageID: string(make([]byte, client.MaxMessageIDBytes+1))},
		{MessageID: "a", Headers: []client.Header{{Name: client.MessageIDHeader, Value: []byte("b")}}},
	} {
		if _, err := c.Produce(ctx, "s", r); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("%v", err)
		}
	}
}

func TestPublishBatch(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.Window = 8 })
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	batch := []client.Record{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}}
	acks, err := c.PublishBatch(ctx, client.ToStream("s"), batch)
	if err != nil || len(acks) != 3 {
		t.Fatalf("%v %v", acks, err)
	}
	for i, ack := range acks {
		if ack.Offset != uint64(i) {
			t.Fatalf("ack %d: %+v", i, ack)
		}
	}
	batch[0].ExpectLastOffset = client.ExpectNone() // false now: the batch is refused
	if acks, err := c.PublishBatch(ctx, client.ToStream("s"), batch); !errors.Is(err, &wire.Error{Code: wire.CodeBatchIncomplete}) || acks != nil {
		t.Fatalf("a batch with a false expectation: %v %v", acks, err)
	}
	if _, err := c.PublishBatch(ctx, client.ToStream("s"), make([]client.Record, 9)); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a batch over the window: %v", err)
	}
	if got := storedPayloads(t, b, "s"); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("stored %q", got)
	}
}

func TestPublishBatchGoesToOnePartition(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 8} })
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	var apart [2][]byte // two keys of different partitions
	for i := 0; apart[1] == nil; i++ {
		key := fmt.Appendf(nil, "key-%d", i)
		switch {
		case apart[0] == nil:
			apart[0] = key
		case wire.PartitionForKey(key, 8) != wire.PartitionForKey(apart[0], 8):
			apart[1] = key
		}
	}
	if _, err := c.PublishBatch(ctx, client.ToStream("orders"), []client.Record{{Key: apart[0]}, {Key: apart[1]}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a batch over two partitions: %v", err)
	}
	acks, err := c.PublishBatch(ctx, client.ToStream("orders"), []client.Record{{Key: apart[0]}, {Key: apart[0]}})
	if err != nil || acks[0].Partition != wire.PartitionForKey(apart[0], 8) || acks[1].Offset != 1 {
		t.Fatalf("a batch of one key: %+v %v", acks, err)
	}
}

func TestPublishAsync(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for i := range 10 {
		if err := c.PublishAsync(ctx, client.ToStream("telemetry"), client.Record{Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if c.AsyncSent() != 10 {
		t.Fatalf("AsyncSent %d", c.AsyncSent())
	}
	if _, err := c.Ping(ctx); err != nil { // the pings follows the records on the wire
		t.Fatal(err)
	}
	checkExactlyOnce(t, storedPayloads(t, b, "telemetry"), 10, nil)
	b.locked(func() {
		if b.noAcks != 10 || b.inFlight != 0 {
			t.Fatalf("%d fire-and-forget records, %d in flight", b.noAcks, b.inFlight)
		}
	})
}

func TestPublishNeedsTheProducersCapability(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.Capabilities &^= wire.CapProducers })
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	if err := c.PublishAsync(ctx, client.ToStream("s"), client.Record{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := c.PublishBatch(ctx, client.ToStream("s"), []client.Record{{}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "s", client.Record{ExpectLastOffset: client.ExpectNone()}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestProducerReconnectsAcrossPartitions(t *testing.T) {
	const n, partitions = 400, 3
	b := startFake(t, func(b *fakeBroker) {
		b.welcome.Window = 24
		b.reverseAcks = true
		b.partitions = map[string]uint32{"s": partitions}
		b.dropAfter = func(produced uint64) bool { return produced%37 == 0 }
	})
	c := dial(t, b, client.Options{})
	p := c.NewProducer("s", client.ProducerOptions{})
	results := collect(p)
	ctx := testContext(t)
	keys := [][]byte{[]byte("k0"), []byte("k1"), []byte("k2"), []byte("k3")}
	for i := range n {
		key := keys[i%len(keys)]
		if err := p.Send(ctx, client.Record{Key: key, Payload: fmt.Appendf(nil, "%s/%d", key, i)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	p.Close()
	for i, r := range <-results {
		if r.Err != nil || r.Sequence != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	seen := map[string]int{} // key → the last record number seen, per key in order
	total := 0
	for partition := range uint32(partitions) {
		for _, payload := range storedPayloads(t, b, logKey([]byte("s"), partition)) {
			var key string
			var number int
			fmt.Sscanf(payload, "k%1s/%d", &key, &number)
			if last, ok := seen[key]; ok && number != last+len(keys) {
				t.Fatalf("key k%s: record %d after %d (duplicate, loss or reorder)", key, number, last)
			}
			seen[key] = number
			total++
		}
	}
	if total != n {
		t.Fatalf("%d records stored, want %d", total, n)
	}
}

func TestProducerGivesUpReconnecting(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{ReconnectTimeout: 200 * time.Millisecond})
	ctx := testContext(t)
	b.hold()
	if err := p.Send(ctx, client.Record{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the record at the broker", func() (ok bool) { b.locked(func() { ok = b.produced == 1 }); return })
	b.stop()
	r := <-p.Results()
	if !errors.Is(r.Err, client.ErrConnectionLost) {
		t.Fatalf("the record held when the broker went away: %+v", r)
	}
	if err := p.Send(ctx, client.Record{}); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Send after giving up: %v", err)
	}
	if err := p.Close(); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Close reports the failed record: %v", err)
	}
}

func TestProducerCarriesOnWhenTheBrokerForgetsIt(t *testing.T) {
	const n = 120
	b := startFake(t, func(b *fakeBroker) {
		b.welcome.Window = 16
		b.forget = func(produced uint64) bool { return produced == 30 }
	})
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{})
	for i, r := range sendNumbered(t, p, n, nil) {
		if r.Err != nil || r.Ack.Duplicate {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	checkExactlyOnce(t, storedPayloads(t, b, "s"), n, nil)
	b.locked(func() {
		if b.producers.inits != 2 {
			t.Fatalf("%d ProducerInits: the producer must announce itself again", b.producers.inits)
		}
	})
}

func TestConcurrentProducesRepairEachOthersGaps(t *testing.T) {
	const goroutines, each = 4, 50
	b := startFake(t, func(b *fakeBroker) {
		b.produceErr = func(produced uint64) *wire.Error {
			if produced%17 == 0 {
				return wire.NewError(wire.CodeBusy, "busy")
			}
			return nil
		}
	})
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	errs := make(chan error, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := c.Produce(ctx, "s", client.Record{Payload: []byte("x")})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	stored := 0
	for err := range errs {
		switch {
		case err == nil:
			stored++
		case !errors.Is(err, &wire.Error{Code: wire.CodeBusy}):
			t.Fatalf("Produce: %v (only the broker's own refusals may surface)", err)
		}
	}
	bodies := b.bodies("s")
	if len(bodies) != stored {
		t.Fatalf("%d stored, %d acked", len(bodies), stored)
	}
	for i, body := range bodies {
		if view, _ := record.Parse(body); view.Sequence != uint64(i) {
			t.Fatalf("record %d has sequence %d", i, view.Sequence)
		}
	}
}

func TestStampedProduceDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := startFake(t, func(b *fakeBroker) { b.discard = true })
	c := dial(t, b, client.Options{})
	record := client.Record{Key: []byte("key"), Payload: make([]byte, 100)}
	ctx := context.Background()
	produce := func() {
		if ack, err := c.ProduceTo(ctx, client.ToPartition("bench", 0), record); err != nil || ack.Duplicate {
			t.Fatal(ack, err)
		}
	}
	for range 1000 {
		produce()
	}
	if allocs := testing.AllocsPerRun(2000, produce); allocs != 0 {
		t.Fatalf("%v allocations per stamped Produce", allocs)
	}
}

// TestProducerChaos mixes dropped connections, refusals and reordered
// acks on several partitions: every record is acked once or refused by
// the broker, each acked one is stored exactly once, and each key's
// records are stored in send order.
func TestProducerChaos(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			const n, partitions = 500, 3
			random := rand.New(rand.NewPCG(seed, 27))
			var mu sync.Mutex
			chance := func(percent int) bool {
				mu.Lock()
				defer mu.Unlock()
				return random.IntN(100) < percent
			}
			b := startFake(t, func(b *fakeBroker) {
				b.welcome.Window = 20
				b.reverseAcks = seed%2 == 0
				b.partitions = map[string]uint32{"s": partitions}
				b.dropAfter = func(uint64) bool { return chance(2) }
				b.produceErr = func(uint64) *wire.Error {
					switch {
					case chance(2):
						return wire.NewError(wire.CodeBusy, "busy")
					case chance(1):
						return wire.NewError(wire.CodeFrozen, "frozen")
					}
					return nil
				}
				b.forget = func(uint64) bool { return chance(1) }
			})
			c := dial(t, b, client.Options{})
			p := c.NewProducer("s", client.ProducerOptions{Window: 12})
			results := collect(p)
			ctx := testContext(t)
			for i := range n {
				key := fmt.Sprintf("k%d", i%5)
				if err := p.Send(ctx, client.Record{Key: []byte(key), Payload: fmt.Appendf(nil, "%s/%d", key, i)}); err != nil {
					t.Fatalf("Send %d: %v", i, err)
				}
			}
			p.Close()
			acked, unknown := map[string]bool{}, map[string]bool{}
			for i, r := range <-results {
				switch {
				case r.Err == nil:
					acked[fmt.Sprintf("k%d/%d", i%5, i)] = true
				case errors.Is(r.Err, client.ErrProducerExpired), errors.Is(r.Err, client.ErrConnectionLost):
					// A resent record the broker forgot, or refused without a
					// word on the copy sent before: stored or not, nobody knows.
					unknown[fmt.Sprintf("k%d/%d", i%5, i)] = true
				case !errors.Is(r.Err, &wire.Error{Code: wire.CodeBusy}) && !errors.Is(r.Err, &wire.Error{Code: wire.CodeFrozen}):
					t.Fatalf("result %d: %v", i, r.Err)
				}
			}
			stored, last := map[string]bool{}, map[string]int{}
			for partition := range uint32(partitions) {
				generation := 0 // counts the times the broker forgot the producer here
				previous := uint64(0)
				storedIn := map[string]int{}
				for i, body := range b.bodies(logKey([]byte("s"), partition)) {
					view, _ := record.Parse(body)
					payload := string(view.Payload)
					if i > 0 && view.Sequence <= previous {
						generation++ // numbering restarted: the broker forgot
					}
					previous = view.Sequence
					var key string
					var number int
					fmt.Sscanf(payload, "k%1s/%d", &key, &number)
					if g, again := storedIn[payload]; again && g == generation {
						t.Fatalf("%s stored twice", payload)
					} else if again {
						// Stored again after the broker forgot the producer
						// between the copies: dedup was lost, as documented.
						last[key] = number - 1
					}
					if previous, ok := last[key]; ok && number <= previous {
						t.Fatalf("key k%s: %d stored after %d", key, number, previous)
					}
					stored[payload], last[key], storedIn[payload] = true, number, generation
				}
			}
			for payload := range stored {
				if !acked[payload] && !unknown[payload] {
					t.Fatalf("%s stored, but its result says it was not", payload)
				}
			}
			for payload := range acked {
				if !stored[payload] {
					t.Fatalf("%s acked, not stored", payload)
				}
			}
		})
	}
}

func TestIdempotentProducerStopsWithItsClosedClient(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{})
	ctx := testContext(t)
	if err := p.Send(ctx, client.Record{}); err != nil {
		t.Fatal(err)
	}
	if r := <-p.Results(); r.Err != nil {
		t.Fatal(r.Err)
	}
	b.hold()
	if err := p.Send(ctx, client.Record{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the record at the broker", func() (ok bool) { b.locked(func() { ok = b.produced == 2 }); return })
	c.Close()
	if r := <-p.Results(); !errors.Is(r.Err, client.ErrClosed) {
		t.Fatalf("a record pending when its Client was closed: %+v", r)
	}
	if err := p.Send(ctx, client.Record{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Send after the Client was closed: %v", err)
	}
	b.locked(func() {
		if b.accepted != 1 {
			t.Fatalf("%d connections: a closed Client is not a failure to repair", b.accepted)
		}
	})
}

func TestConditionalRecordGoesToItsComputedPartition(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.partitions = map[string]uint32{"ledger": 4} })
	c := dial(t, b, client.Options{Idempotence: client.IdempotenceOff})
	key := []byte("account-9")
	ack, err := c.Produce(testContext(t), "ledger", client.Record{Key: key, ExpectLastOffset: client.ExpectNone()})
	if err != nil || ack.Partition != wire.PartitionForKey(key, 4) {
		t.Fatalf("%+v %v", ack, err)
	}
	for _, body := range b.bodies(logKey([]byte("ledger"), ack.Partition)) {
		if view, _ := record.Parse(body); view.HasProducer {
			t.Fatal("stamped with idempotence off")
		}
	}
}

// TestProducerResendsAfterABrokerShutsDown: a broker that refuses records
// with a closing Error (shutting_down) and closes the connection loses
// nothing of an idempotent producer: the refused records and those lost
// with the connection (whose errors wrap that closing Error) are resent.
func TestProducerResendsAfterABrokerShutsDown(t *testing.T) {
	const n = 200
	b := startFake(t, func(b *fakeBroker) {
		b.welcome.Window = 32
		b.produceErr = func(produced uint64) *wire.Error {
			if produced == 50 {
				return wire.NewError(wire.CodeShuttingDown, "draining")
			}
			return nil
		}
	})
	c := dial(t, b, client.Options{})
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{})
	for i, r := range sendNumbered(t, p, n, nil) {
		if r.Err != nil {
			t.Fatalf("result %d: %v", i, r.Err)
		}
	}
	checkExactlyOnce(t, storedPayloads(t, b, "s"), n, nil)
}
