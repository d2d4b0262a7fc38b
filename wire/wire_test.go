package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestRoundTripEveryMessage(t *testing.T) {
	messages := []struct {
		m      Message
		decode func([]byte) (any, error)
	}{
		{&Hello{MinVersion: 1, MaxVersion: 1, Capabilities: Capabilities, MaxFrame: 1 << 20, Window: 64, ClientName: "test", AuthMaterial: []byte{}},
			func(b []byte) (any, error) { m, err := DecodeHello(b); return &m, err }},
		{&Welcome{Version: 1, Capabilities: 3, MaxFrame: 1 << 20, Window: 4096, MaxRecordBytes: 16 << 20, IdleTimeoutMs: 60000, ServerVersion: "x"},
			func(b []byte) (any, error) { m, err := DecodeWelcome(b); return &m, err }},
		{&Produce{Stream: []byte("orders"), Partition: 2, BodyCRC: 7, Body: []byte("body")},
			func(b []byte) (any, error) { m, err := DecodeProduce(b); return &m, err }},
		{&ProduceAck{Partition: 2, Offset: 99},
			func(b []byte) (any, error) { m, err := DecodeProduceAck(b); return &m, err }},
		{&Consume{Stream: []byte("s"), Group: []byte("g"), Mode: ModeWork, MaxRecords: 10, MaxBytes: 1000, WaitMs: 5, LeaseMs: 30000},
			func(b []byte) (any, error) { m, err := DecodeConsume(b); return &m, err }},
		{&Deliver{Partition: 1, Offset: 5, Lease: 9, Attempt: 2, Flags: DeliverRedelivered, Timestamp: -3, BodyCRC: 4, Body: []byte("x")},
			func(b []byte) (any, error) { m, err := DecodeDeliver(b); return &m, err }},
		{&ConsumeEnd{Delivered: 3, Reason: EndCaughtUp},
			func(b []byte) (any, error) { m, err := DecodeConsumeEnd(b); return &m, err }},
		{&Ack{Stream: []byte("s"), Group: []byte("g"), Op: AckNack, DelayMs: 10, Entries: []AckEntry{{1, 2}, {3, 4}}},
			func(b []byte) (any, error) { m, err := DecodeAck(b, nil); return &m, err }},
		{&AckResult{Statuses: []uint8{AckOK, AckStale}},
			func(b []byte) (any, error) { m, err := DecodeAckResult(b); return &m, err }},
		{&Gap{Partition: 1, From: 4, To: 9, Reason: GapLost, Detail: "corrupt"},
			func(b []byte) (any, error) { m, err := DecodeGap(b); return &m, err }},
		{&Error{Code: CodeNoSpace, Retryable: true, RetryAfter: 250 * time.Millisecond, Message: "disk full"},
			func(b []byte) (any, error) { return DecodeError(b) }},
		{&LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 3},
			func(b []byte) (any, error) { m, err := DecodeLeaderTransfer(b); return &m, err }},
		{&LeaderTransferred{Stream: []byte("orders"), Partition: 2, From: 1, Leader: 3, Term: 9, ElapsedUs: 28000},
			func(b []byte) (any, error) { m, err := DecodeLeaderTransferred(b); return &m, err }},
	}
	for _, tc := range messages {
		buf := Append(nil, 42, tc.m)
		frame, n, err := ParseFrame(buf, DefaultMaxFrame)
		if err != nil || n != len(buf) || frame.Type != tc.m.Type() || frame.RequestID != 42 {
			t.Fatalf("%T: parse %v n=%d frame=%+v", tc.m, err, n, frame)
		}
		got, err := tc.decode(frame.Body)
		if err != nil {
			t.Fatalf("%T: decode: %v", tc.m, err)
		}
		if !reflect.DeepEqual(got, tc.m) {
			t.Fatalf("%T: round trip\n got %+v\nwant %+v", tc.m, got, tc.m)
		}
		// Every strict prefix of the body must fail, never decode short.
		for cut := 0; cut < len(frame.Body); cut++ {
			if _, err := tc.decode(frame.Body[:cut]); err == nil && !trailingRest(tc.m) {
				t.Fatalf("%T: a %d-byte prefix decoded", tc.m, cut)
			}
		}
	}
}

// trailingRest marks messages whose last field is "the rest of the body":
// a prefix that cuts only that field is a shorter, valid message.
func trailingRest(m Message) bool {
	switch m.(type) {
	case *Produce, *Deliver, *AckResult:
		return true
	}
	return false
}

func TestParseFrameLimits(t *testing.T) {
	frame := AppendFrame(nil, TypePing, 1, make([]byte, 8))
	for cut := 0; cut < len(frame); cut++ {
		if _, need, err := ParseFrame(frame[:cut], DefaultMaxFrame); !errors.Is(err, ErrIncomplete) || need <= cut {
			t.Fatalf("prefix %d: %v need %d", cut, err, need)
		}
	}
	big := AppendFrame(nil, TypeProduce, 1, make([]byte, 100))
	if _, _, err := ParseFrame(big, 50); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize frame: %v", err)
	}
	if _, _, err := ParseFrame([]byte{1, 0, 0, 0, 5, 0, 0, 0, 0}, DefaultMaxFrame); !errors.Is(err, ErrMalformed) {
		t.Fatalf("length below minimum: %v", err)
	}
	two := append(bytes.Clone(frame), frame...)
	f, n, err := ParseFrame(two, DefaultMaxFrame)
	if err != nil || n != len(frame) || f.Type != TypePing {
		t.Fatalf("first of two frames: %v %d", err, n)
	}
}

func TestErrorIsMatchesCode(t *testing.T) {
	err := error(NewError(CodeNoSpace, "full"))
	if !errors.Is(err, &Error{Code: CodeNoSpace}) || errors.Is(err, &Error{Code: CodeBusy}) {
		t.Fatal("errors.Is on codes")
	}
	if !NewError(CodeBusy, "x").Retryable || NewError(CodeMalformed, "x").Retryable || !NewError(CodeMalformed, "x").Closes {
		t.Fatal("code defaults")
	}
}

// TestPartitionForKeyIsStable pins the key hash: it is protocol, and a
// change would move every key of every multi-partition stream.
func TestPartitionForKeyIsStable(t *testing.T) {
	cases := []struct {
		key        string
		partitions uint32
	}{{"", 8}, {"order-1", 8}, {"order-2", 8}, {"customer-42", 3}, {"x", 1}, {"x", 0}}
	want := []uint32{2, 6, 4, 0, 0, 0}
	for i, c := range cases {
		p := PartitionForKey([]byte(c.key), c.partitions)
		if c.partitions > 0 && p >= c.partitions || c.partitions == 0 && p != 0 {
			t.Fatalf("PartitionForKey(%q, %d) = %d, out of range", c.key, c.partitions, p)
		}
		if p != want[i] {
			t.Errorf("PartitionForKey(%q, %d) = %d, pinned at %d", c.key, c.partitions, p, want[i])
		}
	}
}
