package session

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// The parity suite: the consumer model served over TCP (every group type,
// redelivery, max-deliver and the dead-letter queue, retention gaps) run
// against a named stream of one partition and of four, consumed with
// wire.PartitionAll. Every answer must name the partition of each record
// and gap, and Acks go to that partition.

// place is one record's address in a stream.
type place struct {
	partition uint32
	offset    uint64
}

func placeOf(d wire.Deliver) place { return place{d.Partition, d.Offset} }

// partitionCounts are the stream shapes the parity suite runs on.
var partitionCounts = []uint32{1, 4}

// createStream makes stream with n partitions through the catalog (as
// StreamAdmin create does). One partition needs no creation: a stream
// exists on first use.
func createStream(t *testing.T, b *broker.Broker, stream string, n uint32) {
	t.Helper()
	if n > 1 {
		createTestStream(t, b, stream, n)
	}
}

// produceAt stores one record in a partition and returns its offset.
func produceAt(t *testing.T, c *rawClient, stream string, partition uint32, key, subject, payload string) uint64 {
	t.Helper()
	body, err := record.AppendBody(nil, record.Body{Key: []byte(key), Subject: []byte(subject), Payload: []byte(payload)})
	if err != nil {
		t.Fatal(err)
	}
	c.send(800, &wire.Produce{Stream: []byte(stream), Partition: partition, BodyCRC: record.Checksum(body), Body: body})
	frame := c.read()
	if frame.Type != wire.TypeProduceAck {
		e, _ := wire.DecodeError(frame.Body)
		t.Fatalf("produce to %s/%d answered %v %+v", stream, partition, frame.Type, e)
	}
	ack, err := wire.DecodeProduceAck(frame.Body)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Offset
}

// spread stores count records round-robin over n partitions, record i
// with key "key-<i mod 5>" in partition (key index) mod n, so each key
// lives in one partition, and returns each record's payload by place.
func spread(t *testing.T, c *rawClient, stream string, n uint32, count int) map[place]string {
	t.Helper()
	stored := map[place]string{}
	for i := range count {
		key := i % 5
		partition := uint32(key) % n
		payload := strconv.Itoa(i)
		offset := produceAt(t, c, stream, partition, fmt.Sprint("key-", key), "", payload)
		stored[place{partition, offset}] = payload
	}
	return stored
}

// ackAt sends an Ack to one partition of a group.
func (c *rawClient) ackAt(id uint32, stream string, partition uint32, group string, op uint8, entries ...wire.AckEntry) []uint8 {
	c.t.Helper()
	c.send(id, &wire.Ack{Stream: []byte(stream), Partition: partition, Group: []byte(group), Op: op, Entries: entries})
	frame := c.read()
	if frame.Type != wire.TypeAckResult {
		e, _ := wire.DecodeError(frame.Body)
		c.t.Fatalf("ack to partition %d answered %v %+v", partition, frame.Type, e)
	}
	result, err := wire.DecodeAckResult(frame.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return slices.Clone(result.Statuses)
}

// ackEach acks every delivery to its own partition, expecting ok.
func (c *rawClient) ackEach(id uint32, stream, group string, op uint8, deliveries []wire.Deliver) {
	c.t.Helper()
	for _, d := range deliveries {
		if got := c.ackAt(id, stream, d.Partition, group, op, wire.AckEntry{Offset: d.Offset, Lease: d.Lease}); got[0] != wire.AckOK {
			c.t.Fatalf("op %d on %d/%d: status %d", op, d.Partition, d.Offset, got[0])
		}
	}
}

// drain consumes until nothing more comes, acking each answer with op
// (none when op is 0xff), and returns every delivery.
func drain(t *testing.T, c *rawClient, m wire.Consume, op uint8) []wire.Deliver {
	t.Helper()
	var all []wire.Deliver
	for id := uint32(100); ; id++ {
		a := c.consume(id, m)
		if a.err != nil {
			t.Fatalf("consume: %+v", a.err)
		}
		if len(a.deliveries) == 0 {
			return all
		}
		all = append(all, a.deliveries...)
		if op != 0xff {
			c.ackEach(id+5000, string(m.Stream), string(m.Group), op, a.deliveries)
		}
	}
}

// checkExactlyOnce fails unless deliveries hold every stored record
// exactly once, each with its own payload.
func checkExactlyOnce(t *testing.T, stored map[place]string, deliveries []wire.Deliver) {
	t.Helper()
	seen := map[place]bool{}
	for _, d := range deliveries {
		p := placeOf(d)
		if seen[p] {
			t.Fatalf("%v delivered twice", p)
		}
		seen[p] = true
		view, err := record.Parse(d.Body)
		if err != nil || string(view.Payload) != stored[p] {
			t.Fatalf("%v carries %q, stored %q (%v)", p, view.Payload, stored[p], err)
		}
	}
	if len(seen) != len(stored) {
		t.Fatalf("%d records delivered, %d stored", len(seen), len(stored))
	}
}

func TestPartitionAllWork(t *testing.T) {
	for _, n := range partitionCounts {
		t.Run(fmt.Sprint(n, "-partitions"), func(t *testing.T) {
			addr, b := testBroker(t, testConfig{})
			c := connect(t, addr)
			createStream(t, b, "orders", n)
			stored := spread(t, c, "orders", n, 40)
			m := wire.Consume{Stream: []byte("orders"), Partition: wire.PartitionAll, Group: []byte("w"), Mode: wire.ModeWork, MaxRecords: 4}
			// Rotation: the first n answers, each filled from the
			// partition it starts at, already reach every partition.
			var got []wire.Deliver
			reached := map[uint32]bool{}
			for id := uint32(1); id <= n; id++ {
				a := c.consume(id, m)
				for _, d := range a.deliveries {
					reached[d.Partition] = true
				}
				c.ackEach(id+50, "orders", "w", wire.AckDone, a.deliveries)
				got = append(got, a.deliveries...)
			}
			if len(reached) != int(n) {
				t.Fatalf("the first %d answers reached partitions %v of %d", n, reached, n)
			}
			rest := drain(t, c, m, wire.AckDone)
			checkExactlyOnce(t, stored, append(got, rest...))
			if again := c.consume(60, m); len(again.deliveries) != 0 {
				t.Fatalf("acked records came back: %v", again.deliveries)
			}
		})
	}
}

func TestPartitionAllRedeliveryAndMaxDeliver(t *testing.T) {
	for _, n := range partitionCounts {
		t.Run(fmt.Sprint(n, "-partitions"), func(t *testing.T) {
			addr, b := testBroker(t, testConfig{engine: broker.Config{MaxDeliver: 2}})
			c := connect(t, addr)
			createStream(t, b, "jobs", n)
			poison := place{n - 1, produceAt(t, c, "jobs", n-1, "poison", "", "bad")}
			m := wire.Consume{Stream: []byte("jobs"), Partition: wire.PartitionAll, Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 10, WaitMs: 2000}
			for attempt := uint32(1); attempt <= 2; attempt++ {
				a := c.consume(attempt, m)
				if len(a.deliveries) != 1 || placeOf(a.deliveries[0]) != poison || a.deliveries[0].Attempt != attempt ||
					(attempt > 1) != (a.deliveries[0].Flags&wire.DeliverRedelivered != 0) {
					t.Fatalf("attempt %d: %+v", attempt, a.deliveries)
				}
				c.ackEach(10+attempt, "jobs", "g", wire.AckNack, a.deliveries)
			}
			m.WaitMs = 300
			if a := c.consume(20, m); len(a.deliveries) != 0 {
				t.Fatalf("delivered a third time: %+v", a.deliveries)
			}
			letters := drainDeadLetters(t, c, "jobs")
			if len(letters) != 1 || letters[0][consumer.HeaderPartition] != fmt.Sprint(poison.partition) ||
				letters[0][consumer.HeaderOffset] != fmt.Sprint(poison.offset) {
				t.Fatalf("dead letters %v, want the record at %v", letters, poison)
			}
		})
	}
}

// drainDeadLetters reads a stream's dead-letter queue and returns each
// letter's headers.
func drainDeadLetters(t *testing.T, c *rawClient, stream string) []map[string]string {
	t.Helper()
	var letters []map[string]string
	for deadline := time.Now().Add(5 * time.Second); len(letters) == 0 && time.Now().Before(deadline); {
		a := c.consume(40, wire.Consume{Stream: []byte(".dlq." + stream), Group: []byte("inspect"), Mode: wire.ModeWork, MaxRecords: 10, WaitMs: 200})
		if a.err != nil {
			t.Fatal(a.err)
		}
		for _, d := range a.deliveries {
			view, err := record.Parse(d.Body)
			if err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{}
			for name, value := range view.Headers() {
				headers[string(name)] = string(value)
			}
			letters = append(letters, headers)
		}
	}
	return letters
}

// TestPartitionAllKeyShared: two members share the keys of every
// partition; each key's records are processed in offset order (a key
// lives in one partition) and every record exactly once.
func TestPartitionAllKeyShared(t *testing.T) {
	for _, n := range partitionCounts {
		t.Run(fmt.Sprint(n, "-partitions"), func(t *testing.T) {
			addr, b := testBroker(t, testConfig{})
			producer := connect(t, addr)
			createStream(t, b, "events", n)
			stored := spread(t, producer, "events", n, 50)
			m := wire.Consume{Stream: []byte("events"), Partition: wire.PartitionAll, Group: []byte("ks"), Mode: wire.ModeKeyShared, MaxRecords: 100, LeaseMs: 60_000}
			members := []*rawClient{connect(t, addr), connect(t, addr)}
			var all []wire.Deliver
			byKey := map[string][]place{}
			for round := uint32(0); len(all) < len(stored) && round < 200; round++ {
				for i, member := range members {
					a := member.consume(10+round*2+uint32(i), m)
					for _, d := range a.deliveries {
						view, _ := record.Parse(d.Body)
						byKey[string(view.Key)] = append(byKey[string(view.Key)], placeOf(d))
					}
					all = append(all, a.deliveries...)
					member.ackEach(5000+round, "events", "ks", wire.AckDone, a.deliveries)
				}
			}
			checkExactlyOnce(t, stored, all)
			for key, places := range byKey {
				for i := 1; i < len(places); i++ {
					if places[i].partition != places[0].partition || places[i].offset < places[i-1].offset {
						t.Fatalf("key %s processed as %v: not one partition in offset order", key, places)
					}
				}
			}
		})
	}
}

func TestPartitionAllBroadcast(t *testing.T) {
	for _, n := range partitionCounts {
		t.Run(fmt.Sprint(n, "-partitions"), func(t *testing.T) {
			addr, b := testBroker(t, testConfig{})
			c := connect(t, addr)
			createStream(t, b, "feed", n)
			stored := spread(t, c, "feed", n, 20)
			m := wire.Consume{Stream: []byte("feed"), Partition: wire.PartitionAll, Group: []byte("b"), Mode: wire.ModeBroadcast, MaxRecords: 100}
			read := drain(t, c, m, 0xff)
			checkExactlyOnce(t, stored, read)
			// Acknowledge each partition's first half, cumulatively.
			kept := map[place]string{}
			for p := range n {
				var offsets []uint64
				for _, d := range read {
					if d.Partition == p {
						offsets = append(offsets, d.Offset)
					}
				}
				if len(offsets) == 0 {
					continue
				}
				slices.Sort(offsets)
				upTo := offsets[len(offsets)/2]
				if got := c.ackAt(70+p, "feed", p, "b", wire.AckCumulative, wire.AckEntry{Offset: upTo}); got[0] != wire.AckOK {
					t.Fatalf("cumulative ack on partition %d: %v", p, got)
				}
				for _, o := range offsets[len(offsets)/2:] {
					kept[place{p, o}] = stored[place{p, o}]
				}
			}
			other := connect(t, addr)
			if busy := other.consume(1, m); busy.err == nil || busy.err.Code != wire.CodeBusy {
				t.Fatalf("a second reader: %+v", busy.err)
			}
			_ = c.conn.Close()
			// The closed reader's partitions are released one by one: a
			// partition still held answers busy until it is.
			var again []wire.Deliver
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
				a := other.consume(2, m)
				if a.err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if len(a.deliveries) == 0 {
					break
				}
				again = append(again, a.deliveries...)
			}
			checkExactlyOnce(t, kept, again)
			for _, d := range again {
				if d.Flags&wire.DeliverRedelivered == 0 {
					t.Fatalf("%v not flagged redelivered", placeOf(d))
				}
			}
		})
	}
}

// TestPartitionAllStreaming: DeliverBatch runs name their partition;
// commits are per partition; a new connection resumes from each.
func TestPartitionAllStreaming(t *testing.T) {
	for _, n := range partitionCounts {
		t.Run(fmt.Sprint(n, "-partitions"), func(t *testing.T) {
			addr, b := testBroker(t, testConfig{})
			c := connect(t, addr)
			createStream(t, b, "tape", n)
			stored := spread(t, c, "tape", n, 40)
			m := wire.Consume{Stream: []byte("tape"), Partition: wire.PartitionAll, Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 7}
			read := drain(t, c, m, 0xff)
			checkExactlyOnce(t, stored, read)
			committed := map[uint32]uint64{}
			kept := map[place]string{}
			for p := range n {
				committed[p] = 2
				if got := c.ackAt(80+p, "tape", p, "s", wire.AckCommit, wire.AckEntry{Offset: 2}); got[0] != wire.AckOK {
					t.Fatalf("commit on partition %d: %v", p, got)
				}
			}
			for pl, payload := range stored {
				if pl.offset >= committed[pl.partition] {
					kept[pl] = payload
				}
			}
			_ = c.conn.Close()
			next := connect(t, addr)
			m.WaitMs = 300 // the first member leaves when the broker sees its connection close
			again := drain(t, next, m, 0xff)
			checkExactlyOnce(t, kept, again)
		})
	}
}

// TestPartitionAllRetentionGap: a partition losing records to retention
// reports its own gap, naming it, and the others read on undisturbed.
func TestPartitionAllRetentionGap(t *testing.T) {
	for _, n := range partitionCounts {
		t.Run(fmt.Sprint(n, "-partitions"), func(t *testing.T) {
			cfg := testConfig{}
			cfg.engine.Storage.SegmentSize = segment.MinSegmentSize
			addr, b := testBroker(t, cfg)
			c := connect(t, addr)
			createStream(t, b, "tape", n)
			last := n - 1
			for range 600 {
				produceAt(t, c, "tape", last, "k", "", "padding-padding-padding")
			}
			modes := []uint8{wire.ModeWork, wire.ModeBroadcast, wire.ModeStreaming}
			for _, mode := range modes { // the groups exist before retention runs
				if _, e := c.openGroup(9, wire.OpenGroup{Stream: []byte("tape"), Partition: wire.PartitionAll, Group: []byte(fmt.Sprint("g", mode)), Mode: mode}); e != nil {
					t.Fatal(e)
				}
			}
			l := testLog(t, b, "tape", last)
			if deleted, err := l.DeleteBefore(l.Committed() - 1); err != nil || deleted == 0 {
				t.Fatalf("DeleteBefore: %d %v", deleted, err)
			}
			first := l.FirstOffset()
			for _, mode := range modes {
				m := wire.Consume{Stream: []byte("tape"), Partition: wire.PartitionAll, Group: []byte(fmt.Sprint("g", mode)), Mode: mode, MaxRecords: 1000}
				a := c.consume(10, m)
				if len(a.gaps) != 1 || a.gaps[0].Partition != last || a.gaps[0].From != 0 || a.gaps[0].To != first || a.gaps[0].Reason != wire.GapRetention {
					t.Fatalf("mode %d: gaps %+v, want [0, %d) of partition %d", mode, a.gaps, first, last)
				}
				if len(a.deliveries) != 600-int(first) || a.deliveries[0].Partition != last {
					t.Fatalf("mode %d: %d records after the gap, want %d", mode, len(a.deliveries), 600-int(first))
				}
			}
		})
	}
}

func TestAckNamesAPartition(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "jobs", 1)
	c.send(1, &wire.Ack{Stream: []byte("jobs"), Partition: wire.PartitionAll, Group: []byte("g"), Op: wire.AckDone, Entries: []wire.AckEntry{{}}})
	expectError(t, c.read(), 1, wire.CodeInvalidRequest)
}

// TestStreamingAssignment: one member of a streaming group reading with
// PartitionAll gets every partition; a second joining splits them; when
// it leaves the first gets them all back. No record is delivered outside
// its reader's assignment, and none committed-past is lost.
func TestStreamingAssignment(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	producer := connect(t, addr)
	createStream(t, b, "tape", 4)
	fill := func(perPartition int) {
		for p := range uint32(4) {
			for range perPartition {
				produceAt(t, producer, "tape", p, "k", "", "x")
			}
		}
	}
	m := wire.Consume{Stream: []byte("tape"), Partition: wire.PartitionAll, Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 1000, WaitMs: 300}
	// read drains a member and checks every record is in its partitions;
	// it commits what it read and returns the count per partition.
	read := func(c *rawClient, allowed ...uint32) map[uint32]int {
		t.Helper()
		got := map[uint32]int{}
		for _, d := range drain(t, c, m, 0xff) {
			if !slices.Contains(allowed, d.Partition) {
				t.Fatalf("record %v delivered outside the assignment %v", placeOf(d), allowed)
			}
			got[d.Partition]++
			c.ackAt(700, "tape", d.Partition, "s", wire.AckCommit, wire.AckEntry{Offset: d.Offset + 1})
		}
		return got
	}
	fill(10)
	a := connect(t, addr)
	if got := read(a, 0, 1, 2, 3); len(got) != 4 || got[0] != 10 || got[3] != 10 {
		t.Fatalf("alone, the first member read %v", got)
	}
	fill(10)
	second := connect(t, addr)
	gotB := read(second, 1, 3) // joined second: the odd partitions
	gotA := read(a, 0, 2)
	if gotB[1] != 10 || gotB[3] != 10 || gotA[0] != 10 || gotA[2] != 10 {
		t.Fatalf("after the split: first %v, second %v", gotA, gotB)
	}
	_ = second.conn.Close()
	fill(5)
	var back map[uint32]int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if back = read(a, 0, 1, 2, 3); len(back) == 4 {
			break
		}
	}
	if back[0] != 5 || back[1] != 5 || back[2] != 5 || back[3] != 5 {
		t.Fatalf("after the second member left, the first read %v, want 5 of each partition", back)
	}
}

// TestPartitionAllLongPollWakesOnAnyPartition: a waiting all-partition
// Consume is answered when a record becomes durable in any partition.
func TestPartitionAllLongPollWakesOnAnyPartition(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	producer, c := connect(t, addr), connect(t, addr)
	for _, mode := range []uint8{wire.ModeWork, wire.ModeStreaming} {
		stream := fmt.Sprint("jobs", mode)
		createStream(t, b, stream, 4)
		m := wire.Consume{Stream: []byte(stream), Partition: wire.PartitionAll, Group: []byte(fmt.Sprint("g", mode)), Mode: mode, MaxRecords: 10, WaitMs: 10_000}
		waiting := waitedAnswer(c, uint32(mode), m)
		time.Sleep(50 * time.Millisecond) // the consume is waiting
		offset := produceAt(t, producer, stream, 3, "k", "", "late")
		select {
		case a := <-waiting:
			if len(a.deliveries) != 1 || placeOf(a.deliveries[0]) != (place{3, offset}) {
				t.Fatalf("mode %d woke with %+v", mode, a.deliveries)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("mode %d: the long poll did not wake for a record in partition 3", mode)
		}
	}
}

// TestPartitionAllLongPollParksNoGoroutinePerPartition: a consumer
// waiting on a stream of many partitions costs one goroutine (its consume
// goroutine), not one or two per partition: memory is a function of
// configuration, not of how many partitions a waiting consumer spans.
func TestPartitionAllLongPollParksNoGoroutinePerPartition(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	const partitions = 256
	createStream(t, b, "wide", partitions)
	producer, c := connect(t, addr), connect(t, addr)
	before := runtime.NumGoroutine()
	m := wire.Consume{Stream: []byte("wide"), Partition: wire.PartitionAll, Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 10, WaitMs: 60_000}
	waiting := waitedAnswer(c, 1, m)
	time.Sleep(100 * time.Millisecond) // the consume is waiting
	if during := runtime.NumGoroutine(); during-before > 8 {
		t.Fatalf("a long poll over %d partitions runs %d more goroutines", partitions, during-before)
	}
	offset := produceAt(t, producer, "wide", 200, "k", "", "late")
	select {
	case a := <-waiting:
		if len(a.deliveries) != 1 || placeOf(a.deliveries[0]) != (place{200, offset}) {
			t.Fatalf("woke with %+v", a.deliveries)
		}
	case <-time.After(30 * time.Second):
		// Not a latency bound: the answer waits until the 256 groups'
		// creations are durable (a checkpoint write each), about a second
		// under the race detector and seconds on a loaded machine. A poll
		// that missed the record would sleep out its 60 s.
		t.Fatal("the long poll did not wake for a record in partition 200")
	}
}
