package session

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// TestKeySharedOrderWhenAMemberDies: two consumers share ten keys; one
// dies holding leases. The survivor gets every record, each key's in
// offset order, the dead one's first in line, with no wait for a lease.
func TestKeySharedOrderWhenAMemberDies(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	producer := connect(t, addr)
	var keys, payloads []string
	for i := range 50 {
		keys = append(keys, fmt.Sprint("key-", i%10))
		payloads = append(payloads, fmt.Sprint(i))
	}
	produceKeyed(t, producer, "events", keys, payloads)
	consume := wire.Consume{Stream: []byte("events"), Group: []byte("ks"), Mode: wire.ModeKeyShared, MaxRecords: 100, LeaseMs: 60_000}
	doomed, survivor := connect(t, addr), connect(t, addr)
	held := doomed.consume(1, consume) // alone: the head of every key
	first := survivor.consume(1, consume)
	if len(held.deliveries) == 0 {
		t.Fatal("the first member holds nothing: the test proves nothing")
	}
	_ = doomed.conn.Close()
	byKey := map[string][]uint64{}
	processed := map[uint64]bool{}
	pending := first.deliveries
	deadline := time.Now().Add(10 * time.Second)
	for id := uint32(10); len(processed) < 50 && time.Now().Before(deadline); id += 2 {
		for _, d := range pending {
			view, _ := record.Parse(d.Body)
			byKey[string(view.Key)] = append(byKey[string(view.Key)], d.Offset)
			processed[d.Offset] = true
		}
		if len(pending) > 0 {
			survivor.ackOp(id, "events", "ks", wire.AckDone, 0, entriesOf(pending)...)
		}
		consume.WaitMs = 1000
		pending = survivor.consume(id+1, consume).deliveries
	}
	if len(processed) != 50 {
		t.Fatalf("the survivor processed %d of 50 records", len(processed))
	}
	for key, offsets := range byKey {
		if !slices.IsSorted(offsets) {
			t.Errorf("key %s processed out of order: %v", key, offsets)
		}
	}
}

func TestBroadcastCumulativeAck(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "feed", 10)
	consume := wire.Consume{Stream: []byte("feed"), Group: []byte("b"), Mode: wire.ModeBroadcast, MaxRecords: 100}
	a := c.consume(10, consume)
	if len(a.deliveries) != 10 || a.deliveries[0].Lease != 0 {
		t.Fatalf("broadcast read %v (lease %d)", offsetsOf(a.deliveries), a.deliveries[0].Lease)
	}
	other := connect(t, addr)
	if busy := other.consume(1, consume); busy.err == nil || busy.err.Code != wire.CodeBusy || !busy.err.Retryable {
		t.Fatalf("a second reader: %+v", busy.err)
	}
	statuses, _ := c.ackOp(11, "feed", "b", wire.AckCumulative, 0, wire.AckEntry{Offset: 5}, wire.AckEntry{Offset: 3}, wire.AckEntry{Offset: 11})
	if !slices.Equal(statuses, []uint8{wire.AckOK, wire.AckOK, wire.AckOutOfRange}) {
		t.Fatalf("cumulative acks: %v", statuses)
	}
	if _, e := c.ackOp(12, "feed", "b", wire.AckDone, 0, wire.AckEntry{Offset: 6}); e == nil || e.Code != wire.CodeGroupModeMismatch {
		t.Fatalf("a lease ack on a broadcast group: %+v", e)
	}
	_ = c.conn.Close()
	var again answer
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if again = other.consume(2, consume); again.err == nil {
			break
		}
	}
	if got := offsetsOf(again.deliveries); !slices.Equal(got, []uint64{5, 6, 7, 8, 9}) || again.deliveries[0].Flags&wire.DeliverRedelivered == 0 {
		t.Fatalf("the next reader got %v (err %v), want 5-9 flagged redelivered", got, again.err)
	}
}

func TestStreamingReadAndCommit(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "log", 10)
	consume := wire.Consume{Stream: []byte("log"), Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 4}
	if got := offsetsOf(c.consume(10, consume).deliveries); !slices.Equal(got, []uint64{0, 1, 2, 3}) {
		t.Fatalf("first read %v", got)
	}
	if got := offsetsOf(c.consume(11, consume).deliveries); !slices.Equal(got, []uint64{4, 5, 6, 7}) {
		t.Fatalf("second read %v", got)
	}
	statuses, _ := c.ackOp(12, "log", "s", wire.AckCommit, 0, wire.AckEntry{Offset: 6}, wire.AckEntry{Offset: 99})
	if !slices.Equal(statuses, []uint8{wire.AckOK, wire.AckOutOfRange}) {
		t.Fatalf("commits: %v", statuses)
	}
	_ = c.conn.Close()
	next := connect(t, addr)
	if got := offsetsOf(next.consume(1, consume).deliveries); !slices.Equal(got, []uint64{6, 7, 8, 9}) {
		t.Fatalf("a new connection read %v, want from the committed 6", got)
	}
	info, e := next.openGroup(2, wire.OpenGroup{Stream: []byte("log"), Group: []byte("s"), Mode: wire.ModeStreaming})
	if e != nil || info.Committed != 6 || info.Mode != wire.ModeStreaming {
		t.Fatalf("group info %+v %v", info, e)
	}
}

func TestStartPositions(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "s", 5)
	time.Sleep(30 * time.Millisecond)
	middle := time.Now()
	time.Sleep(30 * time.Millisecond)
	produceN(t, c, "s", 5)
	cases := []struct {
		group string
		kind  uint8
		value uint64
		first uint64
	}{
		{"earliest", wire.StartEarliest, 0, 0},
		{"latest", wire.StartLatest, 0, 10},
		{"offset", wire.StartOffset, 7, 7},
		{"time", wire.StartTime, uint64(middle.UnixMilli()), 5},
	}
	for _, tc := range cases {
		info, e := c.openGroup(20, wire.OpenGroup{Stream: []byte("s"), Group: []byte(tc.group), Mode: wire.ModeWork, StartKind: tc.kind, StartValue: tc.value})
		if e != nil || info.Committed != tc.first {
			t.Errorf("%s: committed %d (%v), want %d", tc.group, info.Committed, e, tc.first)
		}
	}
	produceN(t, c, "s", 1)
	for _, tc := range cases {
		a := c.consume(30, wire.Consume{Stream: []byte("s"), Group: []byte(tc.group), Mode: wire.ModeWork, MaxRecords: 1})
		if len(a.deliveries) != 1 || a.deliveries[0].Offset != tc.first {
			t.Errorf("%s: first delivery %v, want offset %d", tc.group, offsetsOf(a.deliveries), tc.first)
		}
	}
	// The start applies at creation only: reopening keeps the cursor.
	info, _ := c.openGroup(40, wire.OpenGroup{Stream: []byte("s"), Group: []byte("latest"), Mode: wire.ModeWork, StartKind: wire.StartEarliest})
	if info.Committed != 10 {
		t.Errorf("reopening moved the cursor to %d", info.Committed)
	}
}

// waitedAnswer sends a long-polling Consume and returns a channel that
// gets its answer.
func waitedAnswer(c *rawClient, id uint32, m wire.Consume) <-chan answer {
	out := make(chan answer, 1)
	go func() { out <- c.consume(id, m) }()
	return out
}

func TestLongPollWakesOnDurableRecord(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c, producer := connect(t, addr), connect(t, addr)
	produceN(t, producer, "jobs", 1)
	c.consume(1, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1})
	waiting := waitedAnswer(c, 2, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1, WaitMs: 10_000})
	time.Sleep(50 * time.Millisecond) // the consume is waiting
	produceN(t, producer, "jobs", 1)
	acked := time.Now()
	select {
	case a := <-waiting:
		if len(a.deliveries) != 1 {
			t.Fatalf("woke with %d records", len(a.deliveries))
		}
		t.Logf("answered %v after the record became durable", time.Since(acked))
	case <-time.After(time.Second):
		t.Fatal("the long poll did not wake within a second of a durable record")
	}
}

// TestLongPollWakesOnNackAndAck: with one credit, a waiting consumer gets
// the record at once when the holder nacks it, and the next one at once
// when it is acked.
func TestLongPollWakesOnNackAndAck(t *testing.T) {
	addr, _ := testBroker(t, testConfig{engine: broker.Config{MaxInFlight: 1}})
	holder, waiter := connect(t, addr), connect(t, addr)
	produceN(t, holder, "jobs", 2)
	consume := wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1, LeaseMs: 60_000}
	held := holder.consume(10, consume).deliveries
	consume.WaitMs = 10_000
	waiting := waitedAnswer(waiter, 1, consume)
	time.Sleep(50 * time.Millisecond)
	holder.ackOp(11, "jobs", "g", wire.AckNack, 0, entriesOf(held)...)
	nacked := time.Now()
	var got answer
	select {
	case got = <-waiting:
		t.Logf("nack to delivery: %v", time.Since(nacked))
	case <-time.After(time.Second):
		t.Fatal("the waiting consumer did not get the nacked record within a second")
	}
	if len(got.deliveries) != 1 || got.deliveries[0].Offset != 0 {
		t.Fatalf("after the nack: %v", offsetsOf(got.deliveries))
	}
	waiting = waitedAnswer(holder, 12, consume)
	time.Sleep(50 * time.Millisecond)
	waiter.ackOp(2, "jobs", "g", wire.AckDone, 0, entriesOf(got.deliveries)...)
	acked := time.Now()
	select {
	case got = <-waiting:
		t.Logf("ack to delivery: %v", time.Since(acked))
	case <-time.After(time.Second):
		t.Fatal("the waiting consumer did not get the next record within a second of the ack freeing the credit")
	}
	if len(got.deliveries) != 1 || got.deliveries[0].Offset != 1 {
		t.Fatalf("after the ack: %v", offsetsOf(got.deliveries))
	}
}
