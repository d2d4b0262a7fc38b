package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Fuzz targets for the frame codec. The wire package is the first code to
// touch bytes from an untrusted peer, so the targets check more than "no
// panic":
//
//   - FuzzParseFrame: a frame is found only inside the input, re-encodes to
//     exactly the bytes it came from, and a stream cut into two reads at any
//     offset yields the same frames as the whole stream (a reader that
//     mishandles a short read is the classic framing bug).
//   - FuzzDecodeMessages: every body decoder, chosen by the frame type byte.
//     An accepted body re-encodes to the same bytes (version 1 bodies are
//     canonical: one message, one encoding), a strict prefix or one extra
//     byte never decodes as the same message, and failures are ErrMalformed.
//
// Run one with: go test -run='^$' -fuzz='^FuzzParseFrame$' -fuzztime=60s ./wire

var littleEndian = binary.LittleEndian

// seedMessages returns a valid instance of every message, including the
// edge shapes (empty names, maximum values, zero entries) that the fuzzer
// would take long to build from scratch.
func seedMessages() []wire.Message {
	return []wire.Message{
		&wire.Hello{MinVersion: 1, MaxVersion: 1, Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame, Window: 64, ClientName: "seed-client", AuthMaterial: []byte{}},
		&wire.Hello{MinVersion: 1, MaxVersion: math.MaxUint16, Capabilities: math.MaxUint64, MaxFrame: wire.MinMaxFrame, AuthMechanism: 1, AuthMaterial: []byte("token")},
		&wire.Welcome{Version: 1, Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame, Window: 256, MaxRecordBytes: 16 << 20, IdleTimeoutMs: 60000, ServerVersion: "ironbus 0.1"},
		&wire.Ping{Payload: 0x0102030405060708},
		&wire.Pong{Payload: math.MaxUint64},
		&wire.Produce{Stream: []byte("default"), Partition: 0, BodyCRC: 0xdeadbeef, Body: []byte("\x01\x00\x00\x00record")},
		&wire.Produce{Stream: []byte{}, Partition: math.MaxUint32, Flags: 0, Body: []byte{}},
		&wire.ProduceAck{Partition: 3, Offset: 1 << 40},
		&wire.ProduceAck{Partition: 0, Offset: 9, Flags: wire.AckDuplicate},
		&wire.Produce{Stream: []byte("orders"), Partition: 2, BodyCRC: 7, Body: []byte("body"), Options: wire.ProduceOptions{
			Idempotent: true, Epoch: 3, HasExpectLastOffset: true, ExpectLastOffset: wire.ExpectNone,
			HasExpectLastSubjectOffset: true, ExpectLastSubjectOffset: 12, Batch: true, BatchID: 5, BatchFlags: wire.BatchCommit}},
		&wire.Produce{Stream: []byte("t"), Flags: wire.ProduceNoAck, Body: []byte("x")},
		&wire.ProducerInit{Name: []byte("sensor-7")},
		&wire.TxnBegin{TimeoutMs: 60000},
		&wire.TxnEnd{ID: 1 << 60, Op: wire.TxnCommit, GroupCommits: []wire.TxnGroupCommit{{Stream: []byte("in"), Partition: 2, Group: []byte("etl"), Offset: 41}}},
		&wire.TxnState{ID: 9, Outcome: wire.TxnCommitted, Ranges: []wire.TxnRange{{Stream: []byte("out"), Partition: 0, First: 100, Count: 10}}},
		&wire.Produce{Stream: []byte("out"), Body: []byte("b"), Options: wire.ProduceOptions{Transaction: true, TransactionID: 77}},
		&wire.ProduceAck{Partition: 1, Offset: 3, Flags: wire.AckPending},
		&wire.StreamAdmin{Op: wire.StreamOpCreate, Stream: []byte("state"), Settings: wire.StreamCompact | wire.StreamDedupWindowSet, DeleteRetentionMs: 86400000},
		&wire.StreamList{Extended: true, Streams: []wire.StreamState{{Name: []byte("state"), Settings: wire.StreamCompact, DedupWindowMs: 120000,
			Partitions: []wire.StreamPartition{{First: 1, End: 2, Bytes: 3}}}}},
		&wire.ProducerInfo{ID: 1, Epoch: 2, Positions: []wire.ProducerPosition{{Stream: []byte("orders"), Partition: 1, NextSequence: 99}}},
		&wire.ProducerInfo{ID: math.MaxUint64, Epoch: 1},
		&wire.StreamCompacted{Stream: []byte("latest"), Partitions: []wire.CompactedPartition{{RecordsRemoved: 9, TombstonesRemoved: 1, RecordsKept: 3, BytesBefore: 1 << 20, BytesAfter: 4096, Segments: 2, Passes: 1}}},
		&wire.Error{Code: wire.CodeSequenceGap, Message: "gap", HasValue: true, Value: 17},
		&wire.Error{Code: wire.CodeNotLeader, Retryable: true, Message: "not the leader", HasValue: true, Value: 2, Leader: "127.0.0.1:7002"},
		&wire.Error{Code: wire.CodeNotLeader, Retryable: true, Message: "leader unknown address", Leader: "[::1]:7003"},
		&wire.ClusterInfo{Flags: wire.ClusterInfoPartitions, Stream: []byte("orders")},
		&wire.StreamAdmin{Op: wire.StreamOpCreate, Stream: []byte("orders"), Partitions: 4, Settings: wire.StreamReplicated, Replicas: 3},
		&wire.StreamList{Extended: true, Streams: []wire.StreamState{{Name: []byte("orders"), Settings: wire.StreamReplicated, Replicas: 3,
			Partitions: []wire.StreamPartition{{First: 0, End: 9, Bytes: 100}}}}},
		&wire.ClusterState{ClusterID: []byte("edge"), Node: 1, MetaLeader: 2,
			Nodes: []wire.ClusterNode{{ID: 1, Incarnation: 7, ClientAddr: []byte("127.0.0.1:7001"), ClusterAddr: []byte("127.0.0.1:8001"), State: wire.NodeUp},
				{ID: 2, Incarnation: 9, ClientAddr: []byte{}, ClusterAddr: []byte("h:8002"), State: wire.NodeUnknown, LastSeenMs: wire.NeverSeen}},
			Partitions: []wire.ClusterPartition{{Stream: []byte("orders"), Partition: 3, Group: 1 << 40, Leader: 2, Term: 5, Commit: 100, Watermark: 4000,
				Replicas: []wire.ClusterReplica{{Node: 1, Incarnation: 7, Role: wire.RoleVoter, Match: 99}, {Node: 3, Incarnation: 1, Role: wire.RoleLearner, Flags: wire.ReplicaDamaged}}}}},
		&wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 3},
		&wire.LeaderTransfer{Stream: []byte{}, Partition: math.MaxUint32, To: 0},
		&wire.LeaderTransferred{Stream: []byte("orders"), Partition: 2, From: 1, Leader: 3, Term: 7, ElapsedUs: 28000},
		&wire.LeaderTransferred{Stream: []byte{}, Partition: 0, From: 3, Leader: 3, Term: math.MaxUint64, ElapsedUs: math.MaxUint32},
		&wire.Consume{Stream: []byte("orders"), Partition: 1, Group: []byte("billing"), Mode: wire.ModeWork, Flags: wire.ConsumeNoWait, MaxRecords: 100, MaxBytes: 1 << 20, WaitMs: 0, LeaseMs: 30000},
		&wire.Deliver{Partition: 1, Offset: 7, Lease: 99, Attempt: 1, Timestamp: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), BodyCRC: 5, Body: []byte("payload")},
		&wire.Deliver{Partition: 0, Offset: math.MaxUint64, Lease: 1, Attempt: 9, Flags: wire.DeliverRedelivered, Timestamp: -1, Body: []byte{}},
		&wire.ConsumeEnd{Delivered: 2, Reason: wire.EndCaughtUp},
		&wire.Ack{Stream: []byte("orders"), Partition: 1, Group: []byte("billing"), Op: wire.AckDone, Entries: []wire.AckEntry{{Offset: 7, Lease: 99}, {Offset: 8, Lease: 100}}},
		&wire.Ack{Stream: []byte("s"), Group: []byte("g"), Op: wire.AckNack, DelayMs: wire.NackDefaultDelay, Entries: []wire.AckEntry{}},
		&wire.AckResult{Statuses: []uint8{wire.AckOK, wire.AckStale, wire.AckUnknown}},
		&wire.AckResult{Statuses: []uint8{}},
		&wire.Gap{Partition: 1, From: 10, To: 20, Reason: wire.GapRetention, Detail: "retention"},
		&wire.Gap{Partition: 0, From: 5, To: 5, Reason: wire.GapLost},
		&wire.Error{Code: wire.CodeBusy, Retryable: true, RetryAfter: 250 * time.Millisecond, Message: "window full"},
		&wire.Error{Code: wire.CodeMalformed, Closes: true, Message: ""},
		&wire.Ack{Stream: []byte("jobs"), Group: []byte("g"), Op: wire.AckExtend, DelayMs: 60000, Entries: []wire.AckEntry{{Offset: 3, Lease: 4}}},
		&wire.Ack{Stream: []byte("jobs"), Group: []byte("g"), Op: wire.AckRange, Entries: []wire.AckEntry{{Offset: 10, Lease: 1010}}},
		&wire.Ack{Stream: []byte("feed"), Group: []byte("b"), Op: wire.AckCumulative, Entries: []wire.AckEntry{{Offset: 77}}},
		&wire.Ack{Stream: []byte("feed"), Group: []byte("s"), Op: wire.AckCommit, Entries: []wire.AckEntry{{Offset: math.MaxUint64}}},
		&wire.AckResult{Statuses: []uint8{wire.AckExpired, wire.AckCapped, wire.AckOutOfRange}},
		&wire.Consume{Stream: []byte("feed"), Group: []byte("b"), Mode: wire.ModeBroadcast, MaxRecords: 1},
		&wire.OpenGroup{Stream: []byte("orders"), Partition: 0, Group: []byte("billing"), Mode: wire.ModeKeyShared, StartKind: wire.StartTime, StartValue: 1735787045000},
		&wire.OpenGroup{Stream: []byte{}, Group: []byte{}, Mode: wire.ModeStreaming, StartKind: wire.StartOffset, StartValue: math.MaxUint64},
		&wire.GroupInfo{Mode: wire.ModeWork, Committed: 42},
		&wire.DeliverBatch{Partition: 2, First: 10, Next: 12, Count: 2, Frames: []byte("IR\x01\x00stored frames")},
		&wire.DeliverBatch{Partition: 0, First: 5, Next: 5, Count: 0, Frames: []byte{}},
		&wire.GroupAdmin{Op: wire.GroupOpList, Stream: []byte("orders"), Group: []byte{}},
		&wire.GroupAdmin{Op: wire.GroupOpReset, Stream: []byte("orders"), Partition: 2, Group: []byte("billing"), TargetKind: wire.StartTime, TargetValue: 1735787045000},
		&wire.GroupList{Groups: []wire.GroupState{}},
		&wire.GroupList{Groups: []wire.GroupState{
			{Stream: []byte("orders"), Group: []byte("billing"), Mode: wire.ModeWork, Committed: 3, AckedAhead: 2, Unsettled: 1, MostDeliveries: 4, PendingMoves: 1, LogEnd: 9, Members: 2, Leased: 1},
			{Stream: []byte{}, Partition: math.MaxUint32, Group: []byte{}, Mode: wire.ModeStreaming, Committed: math.MaxUint64, LogEnd: math.MaxUint64}}},
		&wire.DeadLetterAdmin{Op: wire.DeadLetterOpRedrive, Stream: []byte("orders"), Max: 100},
		&wire.DeadLetterAdmin{Op: wire.DeadLetterOpList, Stream: []byte{}},
		&wire.DeadLetterState{Republished: 3, Skipped: 1, Queues: []wire.DeadLetterQueue{{Stream: []byte("orders"), First: 0, End: 4, Redriven: 4}}},
		&wire.DeadLetterState{Queues: []wire.DeadLetterQueue{}},
		&wire.Consume{Stream: []byte("orders"), Partition: wire.PartitionAll, Group: []byte("eu"), Mode: wire.ModeWork, MaxRecords: 10, Filter: []byte("orders.*.eu")},
		&wire.OpenGroup{Stream: []byte("orders"), Partition: wire.PartitionAll, Group: []byte("eu"), Mode: wire.ModeWork, Filter: []byte("orders.>")},
		&wire.Produce{Flags: wire.ProduceRouteBySubject, Partition: wire.PartitionAny, Body: []byte("record")},
		&wire.Gap{Partition: 3, From: 10, To: 99, Reason: wire.GapFiltered},
		&wire.StreamAdmin{Op: wire.StreamOpCreate, Stream: []byte("orders"), Pattern: []byte{}, Partitions: 8, MaxBytes: 1 << 30, MaxAgeMs: 86400000, MaxRecords: math.MaxUint64},
		&wire.StreamAdmin{Op: wire.StreamOpBind, Flags: wire.StreamForce, Stream: []byte("orders"), Pattern: []byte("orders.>")},
		&wire.StreamList{Streams: []wire.StreamState{}, Bindings: []wire.StreamBinding{}},
		&wire.StreamList{Streams: []wire.StreamState{{Name: []byte("orders"), CreatedMs: 1735787045000, Groups: 2,
			Partitions: []wire.StreamPartition{{First: 0, End: 10, Bytes: 4096}, {First: 3, End: math.MaxUint64}}}},
			Bindings: []wire.StreamBinding{{Pattern: []byte("orders.>"), Stream: []byte("orders")}}},
	}
}

// errorClass names the sentinel an error wraps, so outcomes of different
// parses can be compared without comparing messages.
func errorClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, wire.ErrIncomplete):
		return "incomplete"
	case errors.Is(err, wire.ErrFrameTooLarge):
		return "frame too large"
	case errors.Is(err, wire.ErrMalformed):
		return "malformed"
	case errors.Is(err, wire.ErrUnknownType):
		return "unknown type"
	}
	return "unclassified: " + err.Error()
}

// parsedFrame is where a frame was found in the stream and what its header
// said; its body is data[Start+HeaderSize : End].
type parsedFrame struct {
	Type       wire.Type
	RequestID  uint32
	Start, End int
}

// streamOutcome is everything a connection reader learns from a stream.
type streamOutcome struct {
	Frames   []parsedFrame
	Fatal    string // error class that made the reader give up; "" when none
	Leftover int    // bytes of an incomplete frame still buffered at the end
}

// readStream runs the loop a connection reader runs over data arriving in
// reads that end at readEnds (then at the end of data): take frames from
// what has arrived until ErrIncomplete, keep the rest for the next read. A
// fatal error ends the stream, because nothing after a bad length field can
// be trusted.
//
// The receive buffer is the arrived part of data itself, with its capacity
// clipped, rather than a copy: the bytes are the same, a parser that peeked
// past what has arrived panics instead of reading the future, and a split
// at every offset stays cheap enough to fuzz (copying made each input cost
// quadratic time and stalled the minimizer for a minute at a time).
func readStream(t *testing.T, data []byte, readEnds []int, maxFrame uint32) streamOutcome {
	t.Helper()
	var outcome streamOutcome
	start := 0
	for _, received := range append(readEnds, len(data)) {
		for {
			buffer := data[start:received:received]
			frame, n, err := wire.ParseFrame(buffer, maxFrame)
			if errors.Is(err, wire.ErrIncomplete) {
				if n <= len(buffer) {
					t.Fatalf("incomplete with %d bytes buffered, yet the frame needs only %d", len(buffer), n)
				}
				break
			}
			if err != nil {
				outcome.Fatal = errorClass(err)
				return outcome
			}
			if n < wire.HeaderSize || n > len(buffer) || len(frame.Body) != n-wire.HeaderSize ||
				len(frame.Body) > 0 && &frame.Body[0] != &buffer[wire.HeaderSize] {
				t.Fatalf("frame at %d spans %d of %d buffered bytes, body of %d not where the header ends", start, n, len(buffer), len(frame.Body))
			}
			outcome.Frames = append(outcome.Frames, parsedFrame{frame.Type, frame.RequestID, start, start + n})
			start += n
		}
	}
	outcome.Leftover = len(data) - start
	return outcome
}

// splitOffsets is every offset of the input for inputs up to 16 KiB. Above
// that, where every offset would cost seconds per input and starve the
// fuzzer, it is the first and last 4 KiB plus every frame boundary and the
// header after it: a split can only matter inside a header or at a
// boundary.
func splitOffsets(data []byte, frames []parsedFrame) []int {
	const everyOffsetUpTo = 16 << 10
	if len(data) <= everyOffsetUpTo {
		offsets := make([]int, len(data)+1)
		for i := range offsets {
			offsets[i] = i
		}
		return offsets
	}
	var offsets []int
	for i := 0; i <= 4096; i++ {
		offsets = append(offsets, i, len(data)-i)
	}
	for _, frame := range frames {
		for at := frame.Start - 1; at <= frame.Start+wire.HeaderSize+1 && at <= len(data); at++ {
			offsets = append(offsets, max(at, 0))
		}
	}
	return offsets
}

func FuzzParseFrame(f *testing.F) {
	var stream []byte
	for i, m := range seedMessages() {
		frame := wire.Append(nil, uint32(i+1), m)
		f.Add(frame, uint32(wire.DefaultMaxFrame))
		stream = append(stream, frame...)
	}
	f.Add(stream, uint32(wire.DefaultMaxFrame))
	f.Add(stream[:len(stream)-3], uint32(wire.DefaultMaxFrame))            // ends inside a body
	f.Add(stream, uint32(64))                                              // some frames exceed the limit
	f.Add([]byte{4, 0, 0, 0, 3, 1, 0, 0, 0}, uint32(wire.DefaultMaxFrame)) // length below the minimum
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 3, 1, 0, 0, 0}, uint32(math.MaxUint32))
	f.Add(wire.AppendFrame(nil, wire.Type(200), 7, []byte("future")), uint32(wire.DefaultMaxFrame))
	f.Add([]byte{}, uint32(wire.DefaultMaxFrame))

	f.Fuzz(func(t *testing.T, data []byte, maxFrame uint32) {
		frame, n, err := wire.ParseFrame(data, maxFrame)
		switch errorClass(err) {
		case "ok":
			if n < wire.HeaderSize || n > len(data) {
				t.Fatalf("frame spans %d bytes of a %d-byte input", n, len(data))
			}
			length := littleEndian.Uint32(data)
			if uint64(length)+4 != uint64(n) || length > maxFrame {
				t.Fatalf("length field %d, limit %d, but the frame spans %d bytes", length, maxFrame, n)
			}
			if len(frame.Body) != n-wire.HeaderSize || cap(frame.Body) != len(frame.Body) {
				t.Fatalf("body len %d cap %d, want both %d: an append to it must not overwrite the next frame",
					len(frame.Body), cap(frame.Body), n-wire.HeaderSize)
			}
			if len(frame.Body) > 0 && &frame.Body[0] != &data[wire.HeaderSize] {
				t.Fatal("body does not alias the input right after the header")
			}
			if again := wire.AppendFrame(nil, frame.Type, frame.RequestID, frame.Body); !bytes.Equal(again, data[:n]) {
				t.Fatalf("re-encoded frame differs\n got %x\nwant %x", again, data[:n])
			}
		case "incomplete":
			// The length field is judged as soon as its 4 bytes are in (a
			// peer that sent a bad one may send nothing more); before that
			// the parser asks for a whole header.
			want := uint64(wire.HeaderSize)
			if len(data) >= 4 {
				want = uint64(littleEndian.Uint32(data)) + 4
			}
			if n < 0 || uint64(n) != want || n <= len(data) {
				t.Fatalf("incomplete %d-byte input: needs %d, want %d (and more than it has)", len(data), n, want)
			}
		case "frame too large":
			// A frame that fits the limit is too large only when this
			// platform's int cannot hold its size (32-bit, limit near 4 GiB).
			if length := littleEndian.Uint32(data); length <= maxFrame && uint64(length)+4 <= math.MaxInt {
				t.Fatalf("length %d within the limit %d refused as too large", littleEndian.Uint32(data), maxFrame)
			}
		case "malformed":
			if littleEndian.Uint32(data) >= 5 {
				t.Fatalf("length %d refused as malformed: %v", littleEndian.Uint32(data), err)
			}
		default:
			t.Fatalf("ParseFrame returned an error of no known class: %v", err)
		}

		whole := readStream(t, data, nil, maxFrame)
		for i, frame := range whole.Frames {
			if i > 0 && frame.Start != whole.Frames[i-1].End {
				t.Fatalf("frame %d starts at %d, the one before it ended at %d", i, frame.Start, whole.Frames[i-1].End)
			}
		}
		for _, split := range splitOffsets(data, whole.Frames) {
			got := readStream(t, data, []int{split}, maxFrame)
			if !sameOutcome(got, whole) {
				t.Fatalf("split at %d of %d: %s\nwhole stream: %s", split, len(data), describe(got), describe(whole))
			}
		}
	})
}

func sameOutcome(a, b streamOutcome) bool {
	if a.Fatal != b.Fatal || a.Leftover != b.Leftover || len(a.Frames) != len(b.Frames) {
		return false
	}
	for i := range a.Frames {
		if a.Frames[i] != b.Frames[i] {
			return false
		}
	}
	return true
}

func describe(outcome streamOutcome) string {
	return fmt.Sprintf("%d frames %+v, fatal %q, leftover %d", len(outcome.Frames), outcome.Frames, outcome.Fatal, outcome.Leftover)
}

// decodeBody runs the decoder of frame type t on body and returns the
// message as a Message, so the caller can re-encode it. entries is the
// slice DecodeAck reuses. known is false for a type no decoder handles.
func decodeBody(t wire.Type, body []byte, entries []wire.AckEntry) (m wire.Message, known bool, err error) {
	switch t {
	case wire.TypeHello:
		decoded, err := wire.DecodeHello(body)
		return &decoded, true, err
	case wire.TypeWelcome:
		decoded, err := wire.DecodeWelcome(body)
		return &decoded, true, err
	case wire.TypePing:
		payload, err := wire.DecodePing(body)
		return &wire.Ping{Payload: payload}, true, err
	case wire.TypePong:
		payload, err := wire.DecodePing(body)
		return &wire.Pong{Payload: payload}, true, err
	case wire.TypeProduce:
		decoded, err := wire.DecodeProduce(body)
		return &decoded, true, err
	case wire.TypeProduceAck:
		decoded, err := wire.DecodeProduceAck(body)
		return &decoded, true, err
	case wire.TypeConsume:
		decoded, err := wire.DecodeConsume(body)
		return &decoded, true, err
	case wire.TypeDeliver:
		decoded, err := wire.DecodeDeliver(body)
		return &decoded, true, err
	case wire.TypeConsumeEnd:
		decoded, err := wire.DecodeConsumeEnd(body)
		return &decoded, true, err
	case wire.TypeAck:
		decoded, err := wire.DecodeAck(body, entries)
		return &decoded, true, err
	case wire.TypeAckResult:
		decoded, err := wire.DecodeAckResult(body)
		return &decoded, true, err
	case wire.TypeGap:
		decoded, err := wire.DecodeGap(body)
		return &decoded, true, err
	case wire.TypeError:
		decoded, err := wire.DecodeError(body)
		return decoded, true, err
	case wire.TypeOpenGroup:
		decoded, err := wire.DecodeOpenGroup(body)
		return &decoded, true, err
	case wire.TypeGroupInfo:
		decoded, err := wire.DecodeGroupInfo(body)
		return &decoded, true, err
	case wire.TypeDeliverBatch:
		decoded, err := wire.DecodeDeliverBatch(body)
		return &decoded, true, err
	case wire.TypeProducerInit:
		decoded, err := wire.DecodeProducerInit(body)
		return &decoded, true, err
	case wire.TypeProducerInfo:
		decoded, err := wire.DecodeProducerInfo(body)
		return &decoded, true, err
	case wire.TypeTxnBegin:
		decoded, err := wire.DecodeTxnBegin(body)
		return &decoded, true, err
	case wire.TypeTxnEnd:
		decoded, err := wire.DecodeTxnEnd(body)
		return &decoded, true, err
	case wire.TypeTxnState:
		decoded, err := wire.DecodeTxnState(body)
		return &decoded, true, err
	case wire.TypeStreamCompacted:
		decoded, err := wire.DecodeStreamCompacted(body)
		return &decoded, true, err
	case wire.TypeClusterInfo:
		decoded, err := wire.DecodeClusterInfo(body)
		return &decoded, true, err
	case wire.TypeClusterState:
		decoded, err := wire.DecodeClusterState(body)
		return &decoded, true, err
	case wire.TypeLeaderTransfer:
		decoded, err := wire.DecodeLeaderTransfer(body)
		return &decoded, true, err
	case wire.TypeLeaderTransferred:
		decoded, err := wire.DecodeLeaderTransferred(body)
		return &decoded, true, err
	case wire.TypeGroupAdmin:
		decoded, err := wire.DecodeGroupAdmin(body)
		return &decoded, true, err
	case wire.TypeGroupList:
		decoded, err := wire.DecodeGroupList(body)
		return &decoded, true, err
	case wire.TypeDeadLetterAdmin:
		decoded, err := wire.DecodeDeadLetterAdmin(body)
		return &decoded, true, err
	case wire.TypeDeadLetterState:
		decoded, err := wire.DecodeDeadLetterState(body)
		return &decoded, true, err
	case wire.TypeStreamAdmin:
		decoded, err := wire.DecodeStreamAdmin(body)
		return &decoded, true, err
	case wire.TypeStreamList:
		decoded, err := wire.DecodeStreamList(body)
		return &decoded, true, err
	}
	return nil, false, nil
}

// optionalTail is the length of a message's optional trailing field (a
// subject filter older peers do not send), 0 when absent: the body
// without it is the same message with the field empty.
func optionalTail(m wire.Message) int {
	switch m := m.(type) {
	case *wire.Consume:
		if len(m.Filter) > 0 {
			return 2 + len(m.Filter)
		}
	case *wire.OpenGroup:
		if len(m.Filter) > 0 {
			return 2 + len(m.Filter)
		}
	case *wire.ProduceAck:
		if m.Flags != 0 {
			return 1
		}
	case *wire.StreamAdmin:
		if m.Settings&wire.StreamReplicated != 0 {
			return wire.StreamSettingsSize + 1
		}
		if m.Settings != 0 || m.DedupWindowMs != 0 || m.DeleteRetentionMs != 0 {
			return wire.StreamSettingsSize
		}
	}
	return 0
}

// openEnded reports whether the last field of t's body is "the rest of the
// body" (the record body of Produce and Deliver): a prefix that cuts only
// into that field is a valid, shorter message.
func openEnded(t wire.Type) bool { return t == wire.TypeProduce || t == wire.TypeDeliver }

// recordBody returns the open-ended last field of m.
func recordBody(m wire.Message) []byte {
	switch m := m.(type) {
	case *wire.Produce:
		return m.Body
	case *wire.Deliver:
		return m.Body
	}
	return nil
}

// prefixLengths is every strict prefix length of a body up to 256 bytes.
// Longer bodies are long because of a variable field, and every cut inside
// one behaves alike, so they get a sample: the first and last 64 lengths
// (every fixed field and length prefix, and the end of the last field), the
// neighbourhood of the fixed fields' end and the eighths. Every length of a
// long body made each input quadratic and let the minimizer stall the
// fuzzer for its full minute.
func prefixLengths(total, fixedEnd int) []int {
	if total <= 256 {
		lengths := make([]int, total)
		for i := range lengths {
			lengths[i] = i
		}
		return lengths
	}
	var lengths []int
	for n := 0; n < 64; n++ {
		lengths = append(lengths, n, total-1-n)
	}
	for n := fixedEnd - 2; n <= fixedEnd+2; n++ {
		if n >= 0 && n < total {
			lengths = append(lengths, n)
		}
	}
	for i := 1; i < 8; i++ {
		lengths = append(lengths, total*i/8)
	}
	return lengths
}

// checkInvariants fails when an accepted message breaks a rule its decoder
// promises to enforce.
func checkInvariants(t *testing.T, m wire.Message) {
	t.Helper()
	switch m := m.(type) {
	case *wire.Hello:
		if m.MinVersion == 0 || m.MinVersion > m.MaxVersion {
			t.Fatalf("Hello accepted with version range %d..%d", m.MinVersion, m.MaxVersion)
		}
	case *wire.DeliverBatch:
		if m.Count > 0 && (m.Next-m.First < uint64(m.Count) || len(m.Frames) == 0) {
			t.Fatalf("DeliverBatch accepted with %d records over offsets %d..%d in %d bytes", m.Count, m.First, m.Next, len(m.Frames))
		}
	case *wire.Gap:
		if m.To < m.From {
			t.Fatalf("Gap accepted with to %d below from %d", m.To, m.From)
		}
	case *wire.Ack:
		if len(m.Entries) > wire.MaxAckEntries {
			t.Fatalf("Ack accepted with %d entries", len(m.Entries))
		}
	case *wire.OpenGroup:
		if m.StartKind > wire.StartTime {
			t.Fatalf("OpenGroup accepted with start kind %d", m.StartKind)
		}
	case *wire.GroupAdmin:
		if m.TargetKind > wire.StartTime {
			t.Fatalf("GroupAdmin accepted with target kind %d", m.TargetKind)
		}
	}
}

func FuzzDecodeMessages(f *testing.F) {
	for _, m := range seedMessages() {
		f.Add(byte(m.Type()), m.AppendBody(nil))
	}
	// Broken shapes: a client name length past the end of the body, Acks
	// whose count promises entries that are not there (at and over the
	// limit), an inverted Hello version range, a body for an unknown type.
	hello := (&wire.Hello{MinVersion: 1, MaxVersion: 1}).AppendBody(nil)
	f.Add(byte(wire.TypeHello), append(hello[:20:20], 0xff, 0xff, 'x'))
	f.Add(byte(wire.TypeAck), []byte{1, 0, 's', 0, 0, 0, 0, 1, 0, 'g', 0, 0, 0, 0, 0, 0x00, 0x10})
	f.Add(byte(wire.TypeAck), []byte{1, 0, 's', 0, 0, 0, 0, 1, 0, 'g', 0, 0, 0, 0, 0, 0x01, 0x10})
	f.Add(byte(wire.TypeHello), (&wire.Hello{MinVersion: 2, MaxVersion: 1}).AppendBody(nil))
	f.Add(byte(200), []byte("future body"))
	f.Add(byte(wire.TypeDeliverBatch), (&wire.DeliverBatch{First: 9, Next: 3, Count: 1, Frames: []byte("x")}).AppendBody(nil))
	f.Add(byte(wire.TypeDeliverBatch), (&wire.DeliverBatch{First: 1, Next: 2, Count: 1}).AppendBody(nil))
	f.Add(byte(wire.TypeOpenGroup), (&wire.OpenGroup{Stream: []byte("s"), Group: []byte("g"), Mode: 1, StartKind: 9}).AppendBody(nil))
	// Admin shapes: a reset target kind past time, and lists whose count
	// promises more entries than the body holds.
	f.Add(byte(wire.TypeGroupAdmin), (&wire.GroupAdmin{Op: wire.GroupOpReset, Stream: []byte("s"), Group: []byte("g"), TargetKind: 7}).AppendBody(nil))
	f.Add(byte(wire.TypeGroupList), []byte{0xff, 0xff, 0xff, 0x0f, 1, 0, 's'})
	f.Add(byte(wire.TypeDeadLetterState), append(make([]byte, 16), 0x00, 0x00, 0x01, 0x00))

	f.Fuzz(func(t *testing.T, typeByte byte, body []byte) {
		frameType := wire.Type(typeByte)
		// A small entries slice, so both paths of DecodeAck run: reusing
		// the caller's capacity and growing past it.
		entries := make([]wire.AckEntry, 0, 4)
		m, known, err := decodeBody(frameType, body, entries)
		if !known {
			if frameType.Known() {
				t.Fatalf("type %v is known but no decoder handled it", frameType)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, wire.ErrUnsupportedOption) {
				t.Fatalf("%v: error of no known class: %v", frameType, err)
			}
			return
		}
		if m.Type() != frameType {
			t.Fatalf("decoding a %v body gave a %v message", frameType, m.Type())
		}
		checkInvariants(t, m)

		// Canonical: the message re-encodes to exactly the body it came
		// from, both on its own and inside a frame.
		if again := m.AppendBody(nil); !bytes.Equal(again, body) {
			t.Fatalf("%v body is not canonical: decoded %#v\n got %x\nwant %x", frameType, m, again, body)
		}
		framed := wire.Append([]byte("prefix"), 42, m)
		frame, n, err := wire.ParseFrame(framed[len("prefix"):], math.MaxUint32)
		if err != nil || n != len(framed)-len("prefix") || frame.Type != frameType || frame.RequestID != 42 || !bytes.Equal(frame.Body, body) {
			t.Fatalf("%v: Append then ParseFrame: %v, %d bytes, %+v", frameType, err, n, frame)
		}

		if ack, ok := m.(*wire.ProduceAck); ok && ack.Flags == 0 {
			// The broker's allocation-free ack path must write the same
			// frame as the generic encoder.
			direct := wire.AppendProduceAck([]byte("prefix"), 42, ack.Partition, ack.Offset)
			if !bytes.Equal(direct, framed) {
				t.Fatalf("AppendProduceAck wrote %x, Append wrote %x", direct, framed)
			}
		}
		if ack, ok := m.(*wire.Ack); ok {
			// The entries must live in the caller's slice when it is big
			// enough (that is what makes acks allocation-free), and the
			// result must not depend on which slice was passed.
			if len(ack.Entries) > 0 && len(ack.Entries) <= cap(entries) && &ack.Entries[0] != &entries[:1][0] {
				t.Fatal("DecodeAck did not reuse the entries slice it was given")
			}
			fresh, err := wire.DecodeAck(body, nil)
			if err != nil || len(fresh.Entries) != len(ack.Entries) {
				t.Fatalf("DecodeAck with nil entries: %v, %d entries, want %d", err, len(fresh.Entries), len(ack.Entries))
			}
			for i := range fresh.Entries {
				if fresh.Entries[i] != ack.Entries[i] {
					t.Fatalf("entry %d: %+v with nil entries, %+v with a buffer", i, fresh.Entries[i], ack.Entries[i])
				}
			}
		}

		// A prefix must not decode as this message, nor must the body with
		// one more byte. Only Produce and Deliver, whose record body runs
		// to the end, decode once their fixed fields are whole, and then
		// to the same fields with the record body cut (or grown) to match.
		fixedEnd := len(body) - len(recordBody(m))
		withoutTail := len(body) - optionalTail(m)
		for _, cut := range prefixLengths(len(body), fixedEnd) {
			short, _, err := decodeBody(frameType, body[:cut], nil)
			switch {
			case cut == withoutTail && cut < len(body):
				if err != nil {
					t.Fatalf("%v: the body without its optional trailing field failed: %v", frameType, err)
				}
			case !openEnded(frameType) && err == nil:
				t.Fatalf("%v: a %d-byte prefix of a %d-byte body decoded: %+v", frameType, cut, len(body), short)
			case openEnded(frameType) && cut < fixedEnd && err == nil:
				t.Fatalf("%v: a %d-byte prefix decoded, but the fixed fields need %d", frameType, cut, fixedEnd)
			case openEnded(frameType) && cut >= fixedEnd && err != nil:
				t.Fatalf("%v: a %d-byte prefix failed although the fixed fields fit: %v", frameType, cut, err)
			case openEnded(frameType) && cut >= fixedEnd && !bytes.Equal(recordBody(short), body[fixedEnd:cut]):
				t.Fatalf("%v: a %d-byte prefix decoded the record body %x, want %x", frameType, cut, recordBody(short), body[fixedEnd:cut])
			}
		}
		longer := append(append([]byte(nil), body...), 0)
		_, _, err = decodeBody(frameType, longer, nil)
		if !openEnded(frameType) && err == nil {
			t.Fatalf("%v: the body with a trailing byte decoded", frameType)
		}
		if openEnded(frameType) && err != nil {
			t.Fatalf("%v: a longer record body failed: %v", frameType, err)
		}
	})
}
