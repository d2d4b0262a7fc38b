package session

import (
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// produceWith sends one record to orders/0 with the given options.
func produceWith(c *rawClient, id uint32, payload string, options wire.ProduceOptions, flags uint8) {
	c.t.Helper()
	body, crc := recordBody(payload)
	c.send(id, &wire.Produce{Stream: []byte("orders"), Flags: flags, BodyCRC: crc, Body: body, Options: options})
}

func expectAck(t *testing.T, frame wire.Frame, id uint32, offset uint64, flags uint8) {
	t.Helper()
	if frame.Type != wire.TypeProduceAck {
		e, _ := wire.DecodeError(frame.Body)
		t.Fatalf("request %d: want a ProduceAck at %d, got %v %v", id, offset, frame.Type, e)
	}
	ack, err := wire.DecodeProduceAck(frame.Body)
	if err != nil || frame.RequestID != id || ack.Offset != offset || ack.Flags != flags {
		t.Fatalf("request %d: got request %d ack %+v (%v); want offset %d flags %d", id, frame.RequestID, ack, err, offset, flags)
	}
}

func TestExpectLastOffsetIsCheckedAgainstTheAssignedHead(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	none := wire.ProduceOptions{HasExpectLastOffset: true, ExpectLastOffset: wire.ExpectNone}
	produceWith(c, 1, "first", none, 0)
	expectAck(t, c.read(), 1, 0, 0)
	produceWith(c, 2, "not-first", none, 0)
	e := expectError(t, c.read(), 2, wire.CodeExpectationFailed)
	if !e.HasValue || e.Value != 0 {
		t.Fatalf("the refusal must carry the actual last offset 0: %+v", e)
	}
	// Pipelined writers racing on the same expectation: the first wins,
	// the second sees the first's offset although it may not be synced.
	after0 := wire.ProduceOptions{HasExpectLastOffset: true, ExpectLastOffset: 0}
	produceWith(c, 3, "a", after0, 0)
	produceWith(c, 4, "b", after0, 0)
	expectAck(t, c.read(), 3, 1, 0)
	if e := expectError(t, c.read(), 4, wire.CodeExpectationFailed); e.Value != 1 {
		t.Fatalf("actual last offset %d, want 1", e.Value)
	}
	produceWith(c, 5, "c", wire.ProduceOptions{HasExpectLastOffset: true, ExpectLastOffset: 1}, 0)
	expectAck(t, c.read(), 5, 2, 0)
}

func TestNoAckRecordsAreStoredAndNeverAnswered(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	produceWith(c, 1, "acked", wire.ProduceOptions{}, 0)
	produceWith(c, 2, "silent", wire.ProduceOptions{}, wire.ProduceNoAck)
	produceWith(c, 3, "silent too", wire.ProduceOptions{}, wire.ProduceNoAck)
	produceWith(c, 4, "acked", wire.ProduceOptions{}, 0)
	// A silent record refused (a bad checksum) is not answered either.
	body, crc := recordBody("bad")
	c.send(5, &wire.Produce{Stream: []byte("orders"), Flags: wire.ProduceNoAck, BodyCRC: crc + 1, Body: body})
	c.send(6, &wire.Ping{Payload: 9})
	// Three answers and no more: acks of 1 and 4 (the pong may overtake
	// them), then nothing for the silent ones.
	got := map[uint32]wire.Frame{}
	for range 3 {
		frame := c.read()
		got[frame.RequestID] = frame
	}
	expectAck(t, got[1], 1, 0, 0)
	expectAck(t, got[4], 4, 3, 0)
	if got[6].Type != wire.TypePong {
		t.Fatalf("want the pong, got %v", got[6].Type)
	}
	c.send(7, &wire.Ping{Payload: 10})
	if frame := c.read(); frame.RequestID != 7 {
		t.Fatalf("an answer to a silent record arrived: request %d %v", frame.RequestID, frame.Type)
	}
	if end := testLog(t, b, "orders", 0).Committed(); end != 4 {
		t.Fatalf("%d records stored, want 4", end)
	}
	if refused, _ := b.NoAckDropped(); refused != 1 {
		t.Fatalf("%d silent refusals counted, want 1", refused)
	}
}

func TestUnknownCriticalOptionRefusesTheRecordOnly(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody("x")
	frame := []byte{6, 0, 'o', 'r', 'd', 'e', 'r', 's', 0, 0, 0, 0, wire.ProduceHasOptions}
	frame = append(frame, byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24))
	frame = append(frame, 3, 0, 0xBF, 0, 0) // one option: critical tag 0xBF, empty value
	frame = append(frame, body...)
	raw := appendRawFrame(nil, wire.TypeProduce, 1, frame)
	if _, err := c.conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	expectError(t, c.read(), 1, wire.CodeUnsupportedOption)
	produceWith(c, 2, "fine", wire.ProduceOptions{}, 0)
	expectAck(t, c.read(), 2, 0, 0)
	if end := testLog(t, b, "orders", 0).Committed(); end != 1 {
		t.Fatalf("%d records stored, want 1", end)
	}
}

func TestIdempotentRecordOfAProducerNotInitialisedHereIsRefused(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	body, _ := record.AppendBody(nil, record.Body{Payload: []byte("x"), HasProducer: true, ProducerID: 7, Sequence: 0})
	c.send(1, &wire.Produce{Stream: []byte("orders"), BodyCRC: record.Checksum(body), Body: body,
		Options: wire.ProduceOptions{Idempotent: true, Epoch: 1}})
	expectError(t, c.read(), 1, wire.CodeUnknownProducer)
}

// appendRawFrame appends a frame envelope around body, unchecked.
func appendRawFrame(dst []byte, frameType wire.Type, requestID uint32, body []byte) []byte {
	length := uint32(1 + 4 + len(body))
	dst = append(dst, byte(length), byte(length>>8), byte(length>>16), byte(length>>24), byte(frameType))
	dst = append(dst, byte(requestID), byte(requestID>>8), byte(requestID>>16), byte(requestID>>24))
	return append(dst, body...)
}

func TestMessageIDInsideTheWindowIsStoredOnce(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	withID := func(id uint32, msgID, payload string) {
		body, _ := record.AppendBody(nil, record.Body{Payload: []byte(payload),
			Headers: []record.Header{{Name: record.MessageIDHeader, Value: []byte(msgID)}}})
		c.send(id, &wire.Produce{Stream: []byte("orders"), BodyCRC: record.Checksum(body), Body: body})
	}
	withID(1, "order-1", "first")
	withID(2, "order-2", "second")
	withID(3, "order-1", "first again, in the same run")
	expectAck(t, c.read(), 1, 0, 0)
	expectAck(t, c.read(), 2, 1, 0)
	expectAck(t, c.read(), 3, 0, wire.AckDuplicate)
	withID(4, "order-2", "second again, later")
	expectAck(t, c.read(), 4, 1, wire.AckDuplicate)
	if end := testLog(t, b, "orders", 0).NextOffset(); end != 2 {
		t.Fatalf("%d records stored, want 2", end)
	}
}

func TestIdempotentProducerOnTheWire(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	c.send(1, &wire.ProducerInit{Name: []byte("sensor")})
	frame := c.read()
	info, err := wire.DecodeProducerInfo(frame.Body)
	if frame.Type != wire.TypeProducerInfo || err != nil || info.ID == 0 || info.Epoch == 0 {
		t.Fatalf("ProducerInit answered %v %+v %v", frame.Type, info, err)
	}
	send := func(c *rawClient, id uint32, seq uint64, epoch uint32) {
		body, _ := record.AppendBody(nil, record.Body{Payload: []byte("x"), HasProducer: true, ProducerID: info.ID, Sequence: seq})
		c.send(id, &wire.Produce{Stream: []byte("orders"), BodyCRC: record.Checksum(body), Body: body,
			Options: wire.ProduceOptions{Idempotent: true, Epoch: epoch}})
	}
	send(c, 2, 0, info.Epoch)
	send(c, 3, 1, info.Epoch)
	send(c, 4, 1, info.Epoch) // a resend in the same run
	expectAck(t, c.read(), 2, 0, 0)
	expectAck(t, c.read(), 3, 1, 0)
	expectAck(t, c.read(), 4, 1, wire.AckDuplicate)
	send(c, 5, 0, info.Epoch) // a resend later
	expectAck(t, c.read(), 5, 0, wire.AckDuplicate)
	send(c, 6, 5, info.Epoch) // a gap
	if e := expectError(t, c.read(), 6, wire.CodeSequenceGap); !e.HasValue || e.Value != 2 {
		t.Fatalf("the gap must name sequence 2: %+v", e)
	}
	// A new incarnation on another connection fences this one and
	// resumes from the position the broker reports.
	d := dialRaw(t, addr)
	d.handshake()
	d.send(1, &wire.ProducerInit{Name: []byte("sensor")})
	again, err := wire.DecodeProducerInfo(d.read().Body)
	if err != nil || again.ID != info.ID || again.Epoch <= info.Epoch || len(again.Positions) != 1 || again.Positions[0].NextSequence != 2 {
		t.Fatalf("second incarnation: %+v %v", again, err)
	}
	send(c, 7, 2, info.Epoch)
	expectError(t, c.read(), 7, wire.CodeProducerFenced)
	send(d, 2, 2, again.Epoch)
	expectAck(t, d.read(), 2, 2, 0)
	if end := testLog(t, b, "orders", 0).NextOffset(); end != 3 {
		t.Fatalf("%d records stored, want 3", end)
	}
	// A producer id in a body without the producer option is refused.
	body, _ := record.AppendBody(nil, record.Body{Payload: []byte("x"), HasProducer: true, ProducerID: info.ID, Sequence: 3})
	d.send(3, &wire.Produce{Stream: []byte("orders"), BodyCRC: record.Checksum(body), Body: body})
	expectError(t, d.read(), 3, wire.CodeInvalidRequest)
}
