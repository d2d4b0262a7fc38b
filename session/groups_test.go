package session

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// Tests of the consumer model as served over TCP: every group type, start
// positions, the ack ops, the dead-letter queue and long-poll wakeups.

// answer is the answer to one Consume.
type answer struct {
	deliveries []wire.Deliver
	gaps       []wire.Gap
	batches    int // DeliverBatch frames; their records are in deliveries
	delivers   int // Deliver frames
	end        wire.ConsumeEnd
	err        *wire.Error
}

// consume sends a Consume and reads its whole answer; no other request
// may be in flight on the connection.
func (c *rawClient) consume(id uint32, m wire.Consume) answer {
	c.t.Helper()
	c.send(id, &m)
	var a answer
	for {
		frame := c.read()
		if frame.RequestID != id {
			c.t.Fatalf("frame %v for request %d while reading the answer to %d", frame.Type, frame.RequestID, id)
		}
		switch frame.Type {
		case wire.TypeDeliver:
			d, err := wire.DecodeDeliver(frame.Body)
			if err != nil {
				c.t.Fatal(err)
			}
			d.Body = append([]byte(nil), d.Body...)
			a.deliveries = append(a.deliveries, d)
			a.delivers++
		case wire.TypeDeliverBatch:
			a.deliveries = append(a.deliveries, batchRecords(c.t, frame.Body)...)
			a.batches++
		case wire.TypeGap:
			g, err := wire.DecodeGap(frame.Body)
			if err != nil {
				c.t.Fatal(err)
			}
			a.gaps = append(a.gaps, g)
		case wire.TypeConsumeEnd:
			end, err := wire.DecodeConsumeEnd(frame.Body)
			if err != nil {
				c.t.Fatal(err)
			}
			a.end = end
			return a
		case wire.TypeError:
			e, err := wire.DecodeError(frame.Body)
			if err != nil {
				c.t.Fatal(err)
			}
			a.err = e
			return a
		default:
			c.t.Fatalf("unexpected %v in the answer to a Consume", frame.Type)
		}
	}
}

// ackOp sends an Ack and returns its statuses, or the error answering it.
func (c *rawClient) ackOp(id uint32, stream, group string, op uint8, delayMs uint32, entries ...wire.AckEntry) ([]uint8, *wire.Error) {
	c.t.Helper()
	c.send(id, &wire.Ack{Stream: []byte(stream), Group: []byte(group), Op: op, DelayMs: delayMs, Entries: entries})
	frame := c.read()
	if frame.Type == wire.TypeError {
		e, _ := wire.DecodeError(frame.Body)
		return nil, e
	}
	result, err := wire.DecodeAckResult(frame.Body)
	if err != nil || frame.Type != wire.TypeAckResult {
		c.t.Fatalf("ack answered %v: %v", frame.Type, err)
	}
	return append([]uint8(nil), result.Statuses...), nil
}

// openGroup sends an OpenGroup and returns GroupInfo or the error.
func (c *rawClient) openGroup(id uint32, m wire.OpenGroup) (wire.GroupInfo, *wire.Error) {
	c.t.Helper()
	c.send(id, &m)
	frame := c.read()
	if frame.Type == wire.TypeError {
		e, _ := wire.DecodeError(frame.Body)
		return wire.GroupInfo{}, e
	}
	info, err := wire.DecodeGroupInfo(frame.Body)
	if err != nil || frame.Type != wire.TypeGroupInfo {
		c.t.Fatalf("OpenGroup answered %v: %v", frame.Type, err)
	}
	return info, nil
}

// connect dials and shakes hands.
func connect(t testing.TB, addr string) *rawClient {
	t.Helper()
	c := dialRaw(t, addr)
	c.handshake()
	return c
}

// produceKeyed stores records with the given keys and payloads, waiting
// for each ack.
func produceKeyed(t *testing.T, c *rawClient, stream string, keys, payloads []string) {
	t.Helper()
	for i := range payloads {
		body, err := record.AppendBody(nil, record.Body{Key: []byte(keys[i]), Payload: []byte(payloads[i])})
		if err != nil {
			t.Fatal(err)
		}
		c.send(uint32(i+1), &wire.Produce{Stream: []byte(stream), BodyCRC: record.Checksum(body), Body: body})
		if frame := c.read(); frame.Type != wire.TypeProduceAck {
			t.Fatalf("produce answered %v", frame.Type)
		}
	}
}

func produceN(t *testing.T, c *rawClient, stream string, n int) {
	t.Helper()
	keys, payloads := make([]string, n), make([]string, n)
	for i := range n {
		keys[i], payloads[i] = "k", fmt.Sprint("m", i)
	}
	produceKeyed(t, c, stream, keys, payloads)
}

func offsetsOf(deliveries []wire.Deliver) []uint64 {
	var out []uint64
	for _, d := range deliveries {
		out = append(out, d.Offset)
	}
	return out
}

func entriesOf(deliveries []wire.Deliver) []wire.AckEntry {
	var out []wire.AckEntry
	for _, d := range deliveries {
		out = append(out, wire.AckEntry{Offset: d.Offset, Lease: d.Lease})
	}
	return out
}

func TestGroupTypeMismatchNamesBothTypes(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "jobs", 1)
	if a := c.consume(10, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1}); a.err != nil {
		t.Fatal(a.err)
	}
	a := c.consume(11, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeKeyShared, MaxRecords: 1})
	if a.err == nil || a.err.Code != wire.CodeGroupModeMismatch || !strings.Contains(a.err.Message, "work") || !strings.Contains(a.err.Message, "key-shared") {
		t.Fatalf("a key-shared Consume of a work group: %+v", a.err)
	}
	if _, e := c.openGroup(12, wire.OpenGroup{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeBroadcast}); e == nil || e.Code != wire.CodeGroupModeMismatch {
		t.Fatalf("OpenGroup broadcast of a work group: %+v", e)
	}
	if _, e := c.ackOp(13, "jobs", "g", wire.AckCommit, 0, wire.AckEntry{Offset: 1}); e == nil || e.Code != wire.CodeGroupModeMismatch {
		t.Fatalf("a commit on a work group: %+v", e)
	}
	if a := c.consume(14, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: 9}); a.err == nil || a.err.Code != wire.CodeUnsupportedMode {
		t.Fatalf("mode 9: %+v", a.err)
	}
	if _, e := c.ackOp(15, "jobs", "g", 8, 0); e == nil || e.Code != wire.CodeInvalidRequest {
		t.Fatalf("ack op 8: %+v", e)
	}
}

func TestExtendTermRangeAndExpired(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "jobs", 8)
	a := c.consume(10, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 8, LeaseMs: 300})
	if len(a.deliveries) != 8 {
		t.Fatalf("leased %v", offsetsOf(a.deliveries))
	}
	d := a.deliveries
	statuses, _ := c.ackOp(11, "jobs", "g", wire.AckExtend, 10_000, entriesOf(d[:2])...)
	if !slices.Equal(statuses, []uint8{wire.AckOK, wire.AckOK}) {
		t.Fatalf("extend: %v", statuses)
	}
	statuses, _ = c.ackOp(12, "jobs", "g", wire.AckTerm, 0, entriesOf(d[2:3])...)
	if !slices.Equal(statuses, []uint8{wire.AckOK}) {
		t.Fatalf("term: %v", statuses)
	}
	statuses, _ = c.ackOp(13, "jobs", "g", wire.AckRange, 0, wire.AckEntry{Offset: 3, Lease: 6}, wire.AckEntry{Offset: 100, Lease: 200})
	if !slices.Equal(statuses, []uint8{wire.AckOK, wire.AckUnknown}) {
		t.Fatalf("range: %v", statuses)
	}
	time.Sleep(500 * time.Millisecond) // offsets 6 and 7 lapse; 0 and 1 were extended
	statuses, _ = c.ackOp(14, "jobs", "g", wire.AckDone, 0, entriesOf(d[5:])...)
	if !slices.Equal(statuses, []uint8{wire.AckUnknown, wire.AckExpired, wire.AckExpired}) {
		t.Fatalf("done after the lease: %v (want unknown for the range-acked 5, expired for 6 and 7)", statuses)
	}
	other := connect(t, addr)
	again := other.consume(20, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 10})
	if got := offsetsOf(again.deliveries); !slices.Equal(got, []uint64{6, 7}) {
		t.Fatalf("another consumer got %v, want the lapsed 6 and 7 only", got)
	}
	if again.deliveries[0].Attempt != 2 || again.deliveries[0].Flags&wire.DeliverRedelivered == 0 {
		t.Fatalf("redelivery %+v: want attempt 2 and the redelivered flag", again.deliveries[0])
	}
	statuses, _ = c.ackOp(15, "jobs", "g", wire.AckDone, 0, entriesOf(d[:2])...)
	if !slices.Equal(statuses, []uint8{wire.AckOK, wire.AckOK}) {
		t.Fatalf("done on the extended leases: %v", statuses)
	}
}

func TestMaxDeliverMovesOneRecordToTheDeadLetterQueue(t *testing.T) {
	addr, _ := testBroker(t, testConfig{engine: broker.Config{MaxDeliver: 3}})
	c := connect(t, addr)
	produceKeyed(t, c, "jobs", []string{"poison"}, []string{"bad"})
	for attempt := uint32(1); attempt <= 3; attempt++ {
		a := c.consume(uint32(10+attempt), wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1, WaitMs: 2000})
		if len(a.deliveries) != 1 || a.deliveries[0].Attempt != attempt {
			t.Fatalf("attempt %d: %+v", attempt, a.deliveries)
		}
		c.ackOp(20+attempt, "jobs", "g", wire.AckNack, 0, entriesOf(a.deliveries)...)
	}
	if a := c.consume(30, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1, WaitMs: 300}); len(a.deliveries) != 0 {
		t.Fatalf("delivered a fourth time: %+v", a.deliveries)
	}
	reader := connect(t, addr)
	var letters []wire.Deliver
	deadline := time.Now().Add(5 * time.Second)
	for len(letters) == 0 && time.Now().Before(deadline) {
		a := reader.consume(40, wire.Consume{Stream: []byte(".dlq.jobs"), Group: []byte("inspect"), Mode: wire.ModeWork, MaxRecords: 10, WaitMs: 200})
		if a.err != nil {
			t.Fatal(a.err)
		}
		letters = append(letters, a.deliveries...)
	}
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want exactly one", len(letters))
	}
	view, err := record.Parse(letters[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{}
	for name, value := range view.Headers() {
		headers[string(name)] = string(value)
	}
	want := map[string]string{"ironbus-dlq-group": "g", "ironbus-dlq-stream": "jobs", "ironbus-dlq-offset": "0",
		"ironbus-dlq-attempts": "3", "ironbus-dlq-reason": "max-deliver"}
	for name, value := range want {
		if headers[name] != value {
			t.Errorf("header %s = %q, want %q (all: %v)", name, headers[name], value, headers)
		}
	}
	if string(view.Key) != "poison" || string(view.Payload) != "bad" {
		t.Errorf("dead letter key %q payload %q", view.Key, view.Payload)
	}
	body, crc := recordBody("x")
	reader.send(50, &wire.Produce{Stream: []byte(".dlq.jobs"), BodyCRC: crc, Body: body})
	expectError(t, reader.read(), 50, wire.CodeInvalidName)
}

func TestRejectMovesAtOnce(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceN(t, c, "jobs", 2)
	a := c.consume(10, wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1})
	statuses, e := c.ackOp(11, "jobs", "g", wire.AckReject, 0, entriesOf(a.deliveries)...)
	if e != nil || !slices.Equal(statuses, []uint8{wire.AckOK}) {
		t.Fatalf("reject: %v %v", statuses, e)
	}
	dlq := c.consume(12, wire.Consume{Stream: []byte(".dlq.jobs"), Group: []byte("inspect"), Mode: wire.ModeWork, MaxRecords: 10})
	if len(dlq.deliveries) != 1 {
		t.Fatalf("%d dead letters after a reject", len(dlq.deliveries))
	}
}
