package producer

import (
	"errors"
	"testing"
	"time"
)

func TestTableCheckVerdicts(t *testing.T) {
	gens := newFakeGenerations()
	gens.init(1)
	table := NewTable(gens, TableOptions{RingBatches: 2})
	if v := mustCheck(t, table, 1, 5); v != (Verdict{}) {
		t.Fatalf("a new producer at any sequence: %+v, want new", v)
	}
	// Three batches: seq 5-7 at 100-102, seq 8-9 at 200-201, seq 10 at 300.
	for i := range uint64(3) {
		table.Record(1, 5+i, 100+i)
	}
	table.Record(1, 8, 200)
	table.Record(1, 9, 201)
	table.Record(1, 10, 300)
	if next, ok := table.Next(1); !ok || next != 11 {
		t.Fatalf("Next = %d, %v; want 11", next, ok)
	}
	if v := mustCheck(t, table, 1, 11); v != (Verdict{}) {
		t.Fatalf("next sequence: %+v", v)
	}
	want := map[uint64]Verdict{
		9:  {Duplicate: true, Offset: 201, OffsetKnown: true},
		8:  {Duplicate: true, Offset: 200, OffsetKnown: true},
		10: {Duplicate: true, Offset: 300, OffsetKnown: true},
		7:  {Duplicate: true}, // its batch left the ring of 2
		0:  {Duplicate: true},
	}
	for seq, w := range want {
		if v := mustCheck(t, table, 1, seq); v != w {
			t.Errorf("Check(seq %d) = %+v, want %+v", seq, v, w)
		}
	}
	_, err := table.Check(1, 13)
	var gap *GapError
	if !errors.As(err, &gap) || gap.Expected != 11 || !errors.Is(err, ErrSequenceGap) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := table.Check(99, 0); !errors.Is(err, ErrUnknown) {
		t.Fatalf("never issued: %v", err)
	}
}

func TestTableRecordStartsOver(t *testing.T) {
	gens := newFakeGenerations()
	gens.init(1)
	table := NewTable(gens, TableOptions{})
	for seq := range uint64(5) {
		table.Record(1, seq, 10+seq)
	}
	// Replayed from the log: a fresh start at 2 after the state was
	// dropped and the producer was accepted anew.
	table.Record(1, 2, 20)
	if next, _ := table.Next(1); next != 3 {
		t.Fatalf("next %d, want 3", next)
	}
	if v := mustCheck(t, table, 1, 2); v.Offset != 20 || !v.OffsetKnown {
		t.Fatalf("the fresh start's offset: %+v", v)
	}
	if v := mustCheck(t, table, 1, 1); v.OffsetKnown {
		t.Fatalf("an offset from before the fresh start: %+v", v)
	}
}

func TestTableEvictionAndExpiry(t *testing.T) {
	gens := newFakeGenerations()
	clock := &manualClock{}
	table := NewTable(gens, TableOptions{MaxProducers: 2, IdleExpiry: time.Minute, Clock: clock.read})
	for id := uint64(1); id <= 3; id++ {
		gens.init(id)
	}
	table.Record(1, 0, 0)
	clock.now = time.Second
	table.Record(2, 0, 1)
	clock.now = 2 * time.Second
	table.Record(3, 0, 2) // evicts 1, idle longest
	if _, ok := table.Next(1); ok {
		t.Fatal("producer 1 still has state")
	}
	if _, err := table.Check(1, 1); !errors.Is(err, ErrExpired) {
		t.Fatalf("evicted producer: %v, want ErrExpired", err)
	}
	// A new Init puts the producer's generation above the mark, but the
	// drop is not on disk yet: recovery could bring the state back.
	gens.init(1)
	if _, err := table.Check(1, 7); !errors.Is(err, ErrExpired) {
		t.Fatalf("re-initialised before the drop is persisted: %v", err)
	}
	// A producer issued after the drop, never here, is new at once.
	gens.init(4)
	mustCheck(t, table, 4, 0)
	table.Persisted(table.Drops())
	if v := mustCheck(t, table, 1, 7); v != (Verdict{}) {
		t.Fatalf("re-initialised producer: %+v", v)
	}
	clock.now = time.Second + time.Minute + 1 // 2 is idle past the expiry, 3 is not
	if _, err := table.Check(2, 1); !errors.Is(err, ErrExpired) {
		t.Fatalf("idle producer: %v, want ErrExpired", err)
	}
	mustCheck(t, table, 3, 1)
	stats := table.Stats()
	if stats.Evicted != 1 || stats.Expired != 1 || stats.ExpiredAnswers != 3 || stats.Producers != 1 {
		t.Fatalf("stats %+v", stats)
	}
}

func TestTableMarkGap(t *testing.T) {
	gens := newFakeGenerations()
	gens.init(1)
	table := NewTable(gens, TableOptions{})
	table.MarkGap()
	if _, err := table.Check(1, 0); !errors.Is(err, ErrExpired) {
		t.Fatalf("after a gap: %v", err)
	}
	gens.init(2)
	mustCheck(t, table, 2, 0)
}

func TestSnapshotRoundTrip(t *testing.T) {
	gens := newFakeGenerations()
	clock := &manualClock{now: time.Hour}
	opts := TableOptions{RingBatches: 3, IdleExpiry: 2 * time.Hour, Clock: clock.read}
	table := NewTable(gens, opts)
	offset := uint64(0)
	for id := uint64(1); id <= 5; id++ {
		gens.init(id)
		for seq := range id * 3 {
			table.Record(id, seq, offset)
			offset += 1 + seq%2 // breaks batches now and then
		}
		clock.now += time.Minute
	}
	table.MarkGap()
	image := table.Encode(offset + 4)

	clock2 := &manualClock{} // the next run's clock starts again from zero
	opts.Clock = clock2.read
	loaded, covers, err := DecodeTable(gens, opts, image)
	if err != nil {
		t.Fatal(err)
	}
	if covers != offset+4 {
		t.Fatalf("covers %d", covers)
	}
	for id := uint64(1); id <= 6; id++ {
		for seq := range uint64(20) {
			v1, e1 := table.Check(id, seq)
			v2, e2 := loaded.Check(id, seq)
			if v1 != v2 || errors.Is(e1, ErrExpired) != errors.Is(e2, ErrExpired) || (e1 == nil) != (e2 == nil) {
				t.Fatalf("id %d seq %d: before %+v %v, after %+v %v", id, seq, v1, e1, v2, e2)
			}
		}
	}
	if again := loaded.Encode(offset + 4); string(again) != string(image) {
		t.Fatal("re-encoding differs (idle ages or order changed)")
	}
	// Producer 1 was idle 4 minutes before the snapshot: it expires once
	// the new clock adds the rest of its expiry.
	clock2.now = 2*time.Hour - 4*time.Minute + time.Second
	if _, err := loaded.Check(1, 3); !errors.Is(err, ErrExpired) {
		t.Fatalf("idle age not carried: %v", err)
	}
}

func TestSnapshotShrinks(t *testing.T) {
	gens := newFakeGenerations()
	table := NewTable(gens, TableOptions{RingBatches: 4})
	for id := uint64(1); id <= 4; id++ {
		gens.init(id)
		for seq := range uint64(4) {
			table.Record(id, seq, id*100+seq*2) // one batch per record
		}
	}
	image := table.Encode(1000)
	loaded, _, err := DecodeTable(gens, TableOptions{MaxProducers: 2, RingBatches: 2}, image)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := loaded.Next(1); ok {
		t.Fatal("the producer idle longest was kept")
	}
	if _, err := loaded.Check(2, 0); !errors.Is(err, ErrExpired) {
		t.Fatalf("dropped on load: %v", err)
	}
	if v := mustCheck(t, loaded, 4, 3); v.Offset != 406 || !v.OffsetKnown {
		t.Fatalf("newest batch: %+v", v)
	}
	if v := mustCheck(t, loaded, 4, 1); v.OffsetKnown {
		t.Fatalf("batch beyond the smaller ring kept: %+v", v)
	}
}

func TestSnapshotDamage(t *testing.T) {
	gens := newFakeGenerations()
	gens.init(1)
	table := NewTable(gens, TableOptions{})
	table.Record(1, 0, 0)
	image := table.Encode(1)
	for i := range image {
		damaged := append([]byte(nil), image...)
		damaged[i] ^= 0x40
		if _, _, err := DecodeTable(gens, TableOptions{}, damaged); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("flip at byte %d: %v", i, err)
		}
	}
	for n := range len(image) {
		if _, _, err := DecodeTable(gens, TableOptions{}, image[:n]); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}
