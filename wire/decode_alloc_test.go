package wire_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/wire"
)

// The broker decodes an Ack per request on its hot path, which must not
// allocate: DecodeAck fills the caller's entries slice and aliases the
// names in the body.

func fullAckBody() ([]byte, []wire.AckEntry) {
	entries := make([]wire.AckEntry, wire.MaxAckEntries)
	for i := range entries {
		entries[i] = wire.AckEntry{Offset: uint64(i) * 3, Lease: uint64(i) ^ 0x5555}
	}
	ack := &wire.Ack{Stream: []byte("orders"), Partition: 2, Group: []byte("billing"), Op: wire.AckNack, DelayMs: 100, Entries: entries}
	return ack.AppendBody(nil), entries
}

func TestDecodeAckDoesNotAllocateWithRoomForEntries(t *testing.T) {
	body, want := fullAckBody()
	entries := make([]wire.AckEntry, 0, wire.MaxAckEntries)
	var decoded wire.Ack
	var err error
	allocs := testing.AllocsPerRun(100, func() { decoded, err = wire.DecodeAck(body, entries) })
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("DecodeAck allocated %v times per call with a slice big enough for every entry", allocs)
	}
	if len(decoded.Entries) != len(want) || &decoded.Entries[0] != &entries[:1][0] {
		t.Fatalf("decoded %d entries, want %d in the caller's slice", len(decoded.Entries), len(want))
	}
	for i := range want {
		if decoded.Entries[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, decoded.Entries[i], want[i])
		}
	}
}

// A count the body cannot back must be refused before anything is sized by
// it: a hostile peer would otherwise make the broker allocate 64 KiB for a
// 17-byte frame.
func TestDecodeAckLyingCountAllocatesNothingForEntries(t *testing.T) {
	body, _ := fullAckBody()
	const fixed = 2 + 6 + 4 + 2 + 7 + 1 + 4 + 2 // stream, partition, group, op, delay, count
	lying := body[:fixed]
	const runs = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := wire.DecodeAck(lying, nil); !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("an Ack promising %d entries and carrying none: %v", wire.MaxAckEntries, err)
		}
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / runs
	if perCall >= 16*wire.MaxAckEntries/8 {
		t.Fatalf("refusing a lying count allocated %d bytes per call; the entries would need %d", perCall, 16*wire.MaxAckEntries)
	}
}

// The decoders of the frames that carry records and acknowledgements alias
// the body instead of copying it, so on a valid body they must not
// allocate at all: they run once per record on the broker's produce and
// consume paths, and on the client's.
func TestHotPathDecodersDoNotAllocate(t *testing.T) {
	produce := (&wire.Produce{Stream: []byte("orders"), Partition: 1, BodyCRC: 9, Body: []byte("record body")}).AppendBody(nil)
	produceAck := (&wire.ProduceAck{Partition: 1, Offset: 2}).AppendBody(nil)
	consume := (&wire.Consume{Stream: []byte("orders"), Group: []byte("billing"), Mode: wire.ModeWork, MaxRecords: 10}).AppendBody(nil)
	deliver := (&wire.Deliver{Partition: 1, Offset: 2, Lease: 3, Attempt: 1, Body: []byte("record body")}).AppendBody(nil)
	consumeEnd := (&wire.ConsumeEnd{Delivered: 1, Reason: wire.EndLimit}).AppendBody(nil)
	ack, _ := fullAckBody()
	ackResult := (&wire.AckResult{Statuses: []uint8{wire.AckOK, wire.AckStale}}).AppendBody(nil)
	ping := (&wire.Ping{Payload: 7}).AppendBody(nil)
	entries := make([]wire.AckEntry, 0, wire.MaxAckEntries)
	decoders := []struct {
		name   string
		decode func() error
	}{
		{"DecodeProduce", func() error { _, err := wire.DecodeProduce(produce); return err }},
		{"DecodeProduceAck", func() error { _, err := wire.DecodeProduceAck(produceAck); return err }},
		{"DecodeConsume", func() error { _, err := wire.DecodeConsume(consume); return err }},
		{"DecodeDeliver", func() error { _, err := wire.DecodeDeliver(deliver); return err }},
		{"DecodeConsumeEnd", func() error { _, err := wire.DecodeConsumeEnd(consumeEnd); return err }},
		{"DecodeAck", func() error { _, err := wire.DecodeAck(ack, entries); return err }},
		{"DecodeAckResult", func() error { _, err := wire.DecodeAckResult(ackResult); return err }},
		{"DecodePing", func() error { _, err := wire.DecodePing(ping); return err }},
	}
	for _, decoder := range decoders {
		if err := decoder.decode(); err != nil {
			t.Fatalf("%s: %v", decoder.name, err)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = decoder.decode() }); allocs != 0 {
			t.Errorf("%s allocated %v times per call on a valid body", decoder.name, allocs)
		}
	}
}
