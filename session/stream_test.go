package session

import (
	"slices"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/wire"
)

// batchRecords verifies a DeliverBatch the way a client must (every
// record frame's checksums, commit frames skipped, offsets consecutive,
// the count) and returns its records as Deliver values.
func batchRecords(t testing.TB, body []byte) []wire.Deliver {
	t.Helper()
	b, err := wire.DecodeDeliverBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	var records []wire.Deliver
	for frames := b.Frames; len(frames) > 0; {
		if format.PeekKind(frames) == format.KindCommit {
			frames = frames[format.CommitFrameSize:]
			continue
		}
		h, recordBody, err := record.ParseFrame(frames, record.AbsoluteMaxBody)
		if err != nil {
			t.Fatalf("a DeliverBatch frame: %v", err)
		}
		if want := b.First + uint64(len(records)); h.Offset != want {
			t.Fatalf("DeliverBatch record %d, want %d", h.Offset, want)
		}
		records = append(records, wire.Deliver{Partition: b.Partition, Offset: h.Offset, Attempt: 1, Timestamp: h.Timestamp,
			BodyCRC: h.BodyCRC, Body: slices.Clone(recordBody)})
		frames = frames[h.FrameLength:]
	}
	if len(records) != int(b.Count) || (len(records) > 0 && records[len(records)-1].Offset+1 != b.Next) {
		t.Fatalf("DeliverBatch says %d records up to %d, holds %d", b.Count, b.Next, len(records))
	}
	return records
}

func offsetRange(from, to uint64) []uint64 {
	var offsets []uint64
	for o := from; o < to; o++ {
		offsets = append(offsets, o)
	}
	return offsets
}

// TestStreamingDeliverBatch: a client with deliver_batch reads a
// streaming group as DeliverBatch runs of the stored frames, in order
// across sealed and active segments, resumes from its commit on a new
// connection, and an older client gets the same records as Deliver.
func TestStreamingDeliverBatch(t *testing.T) {
	cfg := testConfig{}
	cfg.engine.Storage.SegmentSize = segment.MinSegmentSize
	addr, _ := testBroker(t, cfg)
	c := connect(t, addr)
	produceN(t, c, "tape", 600) // several 64 KiB segments
	consume := wire.Consume{Stream: []byte("tape"), Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 250, MaxBytes: 1 << 20}
	var got []uint64
	for id := uint32(10); len(got) < 600; id++ {
		a := c.consume(id, consume)
		if a.err != nil || a.delivers != 0 || (a.batches == 0 && len(a.deliveries) > 0) {
			t.Fatalf("answer: %d batches, %d Deliver frames, error %v", a.batches, a.delivers, a.err)
		}
		if int(a.end.Delivered) != len(a.deliveries) || len(a.deliveries) == 0 {
			t.Fatalf("ConsumeEnd counts %d, %d records came", a.end.Delivered, len(a.deliveries))
		}
		got = append(got, offsetsOf(a.deliveries)...)
	}
	if !slices.Equal(got, offsetRange(0, 600)) {
		t.Fatalf("read %d records out of order or twice", len(got))
	}
	if statuses, _ := c.ackOp(99, "tape", "s", wire.AckCommit, 0, wire.AckEntry{Offset: 590}); !slices.Equal(statuses, []uint8{wire.AckOK}) {
		t.Fatalf("commit: %v", statuses)
	}
	_ = c.conn.Close()
	again := connect(t, addr)
	if a := again.consume(1, consume); !slices.Equal(offsetsOf(a.deliveries), offsetRange(590, 600)) || a.batches == 0 {
		t.Fatalf("a new connection read %v, want 590-599 from the commit", offsetsOf(a.deliveries))
	}
	old := dialRaw(t, addr)
	old.send(0, &wire.Hello{MinVersion: 1, MaxVersion: 1, Capabilities: wire.Capabilities &^ wire.CapDeliverBatch,
		MaxFrame: wire.DefaultMaxFrame, Window: 64, ClientName: "old"})
	if frame := old.read(); frame.Type != wire.TypeWelcome {
		t.Fatalf("handshake answered %v", frame.Type)
	}
	if a := old.consume(1, consume); !slices.Equal(offsetsOf(a.deliveries), offsetRange(590, 600)) || a.batches != 0 || a.delivers != 10 {
		t.Fatalf("an old client got %d batches and %d Deliver frames: %v", a.batches, a.delivers, offsetsOf(a.deliveries))
	}
}

// TestStreamingDeliverBatchGap: records removed by retention under a
// streaming reader come as one Gap advisory, then the run goes on.
func TestStreamingDeliverBatchGap(t *testing.T) {
	cfg := testConfig{}
	cfg.engine.Storage.SegmentSize = segment.MinSegmentSize
	addr, b := testBroker(t, cfg)
	c := connect(t, addr)
	produceN(t, c, "tape", 600)
	consume := wire.Consume{Stream: []byte("tape"), Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 1}
	if a := c.consume(9, consume); !slices.Equal(offsetsOf(a.deliveries), []uint64{0}) {
		t.Fatalf("first read %v", offsetsOf(a.deliveries))
	}
	log := testLog(t, b, "tape", 0)
	if deleted, err := log.DeleteBefore(log.Committed() - 1); err != nil || deleted == 0 {
		t.Fatalf("DeleteBefore: %d %v", deleted, err)
	}
	first := log.FirstOffset()
	consume.MaxRecords = 50
	a := c.consume(10, consume)
	if len(a.gaps) != 1 || a.gaps[0].From != 1 || a.gaps[0].To != first || a.gaps[0].Reason != wire.GapRetention {
		t.Fatalf("gaps %+v, want [1, %d) retention", a.gaps, first)
	}
	if got := offsetsOf(a.deliveries); !slices.Equal(got, offsetRange(first, min(first+50, 600))) || a.batches == 0 {
		t.Fatalf("after the gap: %v", got)
	}
}
