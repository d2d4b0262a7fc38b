package producer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/internal/crashtest"
)

// oracleProducer is what a producer's records were, in full: every
// stored sequence's offset and the runs Record coalesces into batches.
type oracleProducer struct {
	stored  bool
	next    uint64
	offsets map[uint64]uint64
	runs    []batch
	// recordedAt is the registry generation when it last stored a record:
	// a state dropped with no Init since must answer ErrExpired.
	recordedAt uint64
}

func (o *oracleProducer) reset(seq, offset uint64, generation uint64) {
	*o = oracleProducer{stored: true, offsets: map[uint64]uint64{}}
	o.add(seq, offset, generation)
}

func (o *oracleProducer) add(seq, offset uint64, generation uint64) {
	o.offsets[seq] = offset
	o.next = seq + 1
	o.recordedAt = generation
	if n := len(o.runs); n > 0 {
		last := &o.runs[n-1]
		if last.firstSeq+uint64(last.count) == seq && last.firstOffset+uint64(last.count) == offset {
			last.count++
			return
		}
	}
	o.runs = append(o.runs, batch{firstSeq: seq, firstOffset: offset, count: 1})
}

// inRecentRuns reports whether seq is in one of the last n runs.
func (o *oracleProducer) inRecentRuns(seq uint64, n int) bool {
	for _, run := range o.runs[max(0, len(o.runs)-n):] {
		if seq >= run.firstSeq && seq < run.firstSeq+uint64(run.count) {
			return true
		}
	}
	return false
}

// TestTableAgainstOracle drives tables with Inits, appends (next, old
// and future sequences), other records, idle time and restarts through a
// snapshot, and checks every answer against a full history. Seeded:
// IRONBUS_SEED replays a failure.
func TestTableAgainstOracle(t *testing.T) {
	seed := crashtest.Seed(t)
	t.Logf("seed %d (IRONBUS_SEED replays it)", seed)
	rng := codectest.NewRand(seed)
	for round := range 200 {
		runOracleRound(t, rng, round)
	}
}

func runOracleRound(t *testing.T, rng *rand.Rand, round int) {
	gens := newFakeGenerations()
	clock := &manualClock{}
	opts := TableOptions{
		MaxProducers: 1 + rng.IntN(6),
		RingBatches:  1 + rng.IntN(4),
		IdleExpiry:   time.Duration(1+rng.IntN(50)) * time.Second,
		Clock:        clock.read,
	}
	table := NewTable(gens, opts)
	oracle := map[uint64]*oracleProducer{}
	offset, ids := uint64(0), uint64(0)
	var stored []storedRecord
	persisted := NewTable(gens, opts).Encode(0) // the snapshot on disk
	// recovered is what recovery would build now: the snapshot on disk
	// and a replay of the records after it.
	recovered := func() *Table {
		rebuilt, covers, err := DecodeTable(gens, opts, persisted)
		if err != nil {
			t.Fatalf("round %d: persisted snapshot: %v", round, err)
		}
		for _, r := range stored {
			if r.offset >= covers {
				rebuilt.Record(r.id, r.seq, r.offset)
			}
		}
		return rebuilt
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("round %d (%+v): "+format, append([]any{round, opts}, args...)...)
	}
	for range 300 {
		switch op := rng.IntN(12); {
		case op == 0 || ids == 0:
			id := 1 + rng.Uint64N(ids+1)
			ids = max(ids, id)
			gens.init(id)
			if oracle[id] == nil {
				oracle[id] = &oracleProducer{}
			}
		case op == 1:
			offset++ // a record without a producer
		case op == 2:
			clock.now += time.Duration(rng.IntN(20)) * time.Second
		case op == 3:
			persisted = table.Encode(offset)
			loaded, covers, err := DecodeTable(gens, opts, persisted)
			if err != nil || covers != offset {
				fail("restart: %v, covers %d want %d", err, covers, offset)
			}
			for id := range oracle {
				n1, ok1 := table.Next(id)
				n2, ok2 := loaded.Next(id)
				if n1 != n2 || ok1 != ok2 {
					fail("restart changed producer %d: %d %v -> %d %v", id, n1, ok1, n2, ok2)
				}
			}
			table = loaded
		case op == 5:
			persisted = table.Encode(offset)
			table.Persisted(table.Drops())
		case op == 4:
			if err := compareRebuilt(table, gens, opts, stored, oracle); err != nil {
				fail("%v", err)
			}
		default:
			id := 1 + rng.Uint64N(ids)
			o := oracle[id]
			seq := rng.Uint64N(o.next + 4)
			if _, held := table.Next(id); !held {
				// A fresh accept must not be a record recovery would
				// take for a duplicate (the state came back).
				if v, err := table.Check(id, seq); err == nil && v == (Verdict{}) {
					if v, _ := recovered().Check(id, seq); v.Duplicate {
						fail("producer %d seq %d accepted fresh, a duplicate after a crash", id, seq)
					}
				}
			}
			before := offset
			if err := appendChecked(table, gens, o, id, seq, &offset, opts.RingBatches); err != nil {
				fail("%v", err)
			}
			if offset != before {
				stored = append(stored, storedRecord{id: id, seq: seq, offset: before})
			}
		}
	}
}

// storedRecord is a record of the log a round builds.
type storedRecord struct{ id, seq, offset uint64 }

// compareRebuilt replays the whole log into a new table, as recovery
// without a snapshot does, and checks it agrees with the live one on
// every producer both hold: the same next sequence, and the same offset
// wherever both know one.
func compareRebuilt(live *Table, gens *fakeGenerations, opts TableOptions, stored []storedRecord, oracle map[uint64]*oracleProducer) error {
	rebuilt := NewTable(gens, opts)
	for _, r := range stored {
		rebuilt.Record(r.id, r.seq, r.offset)
	}
	for id := range oracle {
		n1, ok1 := live.Next(id)
		n2, ok2 := rebuilt.Next(id)
		if !ok1 || !ok2 {
			continue
		}
		if n1 != n2 {
			return fmt.Errorf("rebuilt producer %d: next %d, live %d", id, n2, n1)
		}
		for seq := range n1 {
			v1, _ := live.Check(id, seq)
			v2, _ := rebuilt.Check(id, seq)
			if v1.OffsetKnown && v2.OffsetKnown && v1.Offset != v2.Offset {
				return fmt.Errorf("rebuilt producer %d seq %d: offset %d, live %d", id, seq, v2.Offset, v1.Offset)
			}
		}
	}
	return nil
}

func appendChecked(table *Table, gens *fakeGenerations, o *oracleProducer, id, seq uint64, offset *uint64, ring int) error {
	verdict, err := table.Check(id, seq)
	next, held := table.Next(id)
	if !held {
		initSince := gens.ids[id] > o.recordedAt
		switch {
		case errors.Is(err, ErrExpired):
			return nil
		case err != nil || verdict != (Verdict{}):
			return fmt.Errorf("producer %d without state: %+v %v", id, verdict, err)
		case o.stored && !initSince:
			return fmt.Errorf("producer %d lost its state and was accepted fresh at %d", id, seq)
		}
		table.Record(id, seq, *offset)
		o.reset(seq, *offset, gens.Generation())
		*offset++
		return nil
	}
	if next != o.next {
		return fmt.Errorf("producer %d: table next %d, history %d", id, next, o.next)
	}
	switch {
	case seq > next:
		var gap *GapError
		if !errors.As(err, &gap) || gap.Expected != next {
			return fmt.Errorf("producer %d seq %d: %v, want a gap at %d", id, seq, err, next)
		}
	case seq == next:
		if err != nil || verdict != (Verdict{}) {
			return fmt.Errorf("producer %d seq %d: %+v %v, want new", id, seq, verdict, err)
		}
		table.Record(id, seq, *offset)
		o.add(seq, *offset, gens.Generation())
		*offset++
	default:
		if err != nil || !verdict.Duplicate {
			return fmt.Errorf("producer %d seq %d: %+v %v, want a duplicate", id, seq, verdict, err)
		}
		original, storedHere := o.offsets[seq]
		if verdict.OffsetKnown && (!storedHere || verdict.Offset != original) {
			return fmt.Errorf("producer %d seq %d: offset %d, stored at %d (%v)", id, seq, verdict.Offset, original, storedHere)
		}
		if !verdict.OffsetKnown && o.inRecentRuns(seq, ring) {
			return fmt.Errorf("producer %d seq %d: offset unknown inside the ring", id, seq)
		}
	}
	return nil
}
