package histcheck

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func produce(client int, value string, outcome Outcome, offset uint64, invoke, ret int64) Operation {
	return Operation{Client: client, Kind: KindProduce, Value: value, Outcome: outcome, Offset: offset,
		Invoke: invoke, Return: ret}
}

func read(client int, offset uint64, value string, invoke, ret int64) Operation {
	return Operation{Client: client, Kind: KindRead, Offset: offset, Value: value, Found: value != "",
		Invoke: invoke, Return: ret}
}

func final(values ...string) []Record {
	var records []Record
	for i, v := range values {
		records = append(records, Record{Offset: uint64(i), Value: v})
	}
	return records
}

// goodHistory is correct: two concurrent acks, an indeterminate produce
// that landed, a failed one and one never answered that did not, reads
// before and after.
func goodHistory() History {
	return History{
		Operations: []Operation{
			produce(0, "a", OutcomeOK, 0, 0, 10),
			produce(1, "b", OutcomeOK, 1, 5, 15),
			produce(2, "c", OutcomeInfo, 0, 6, 40),
			produce(3, "d", OutcomeFail, 0, 7, 9),
			produce(4, "e", OutcomePending, 0, 8, 0),
			read(0, 0, "a", 11, 12),
			read(1, 3, "", 16, 17),
			produce(0, "f", OutcomeOK, 3, 20, 30),
			read(1, 3, "f", 31, 32),
			{Client: 5, Partition: 1, Kind: KindProduce, Value: "x", Outcome: OutcomeOK, Offset: 7, Invoke: 1, Return: 2},
		},
		Partitions: map[uint32]Partition{
			0: {Final: final("a", "b", "c", "f")},
			1: {Begin: 7, Start: 7, Final: []Record{{Offset: 7, Value: "x"}}},
		},
	}
}

func clone(h History) History {
	c := History{Operations: slices.Clone(h.Operations), Partitions: map[uint32]Partition{}}
	for p, part := range h.Partitions {
		part.Final = slices.Clone(part.Final)
		c.Partitions[p] = part
	}
	return c
}

func withFinal(h History, partition uint32, records []Record) History {
	h = clone(h)
	part := h.Partitions[partition]
	part.Final = records
	h.Partitions[partition] = part
	return h
}

func withOperation(h History, op Operation) History {
	h = clone(h)
	h.Operations = append(h.Operations, op)
	return h
}

func withChanged(h History, index int, change func(*Operation)) History {
	h = clone(h)
	change(&h.Operations[index])
	return h
}

func TestGoodHistoryPasses(t *testing.T) {
	h := goodHistory()
	if err := CheckLog(h); err != nil {
		t.Fatalf("CheckLog: %v", err)
	}
	if err := CheckLinearizable(h, 10*time.Second); err != nil {
		t.Fatalf("CheckLinearizable: %v", err)
	}
}

func TestPlantedAnomaliesAreCaught(t *testing.T) {
	good := goodHistory()
	cases := []struct {
		name    string
		history History
		log     ViolationKind // what CheckLog must report (0: it cannot see this one)
	}{
		{"lost ack", withFinal(good, 0, final("a", "b", "c")), LostAck},
		{"lost ack replaced", withFinal(good, 0, final("a", "b", "c", "x2")), LostAck},
		{"duplicate", withFinal(good, 0, append(final("a", "b", "c", "f"), Record{Offset: 4, Value: "b"})), Duplicate},
		{"gap", withFinal(good, 0, []Record{{0, "a"}, {1, "b"}, {3, "f"}}), Gap},
		{"swapped records", withFinal(good, 0, final("b", "a", "c", "f")), MovedAck},
		{"listed out of order", withFinal(good, 0, []Record{{0, "a"}, {2, "c"}, {1, "b"}, {3, "f"}}), Disorder},
		{"acks against real time", withChanged(withChanged(good, 0, func(op *Operation) { op.Offset = 1 }),
			1, func(op *Operation) { op.Offset, op.Invoke = 0, 11 }), RealTimeOrder},
		{"stale read", withOperation(good, read(3, 1, "", 16, 17)), RealTimeOrder},
		{"read from the future", withOperation(good, read(3, 2, "c", 1, 2)), FutureRead},
		{"read of another value", withOperation(good, read(3, 1, "a", 20, 21)), ReadMismatch},
		{"failed produce visible", withFinal(good, 0, final("a", "b", "c", "f", "d")), FailedVisible},
		{"phantom", withFinal(good, 0, final("a", "b", "c", "f", "zz")), Phantom},
		{"produced elsewhere", withFinal(good, 0, final("a", "b", "c", "f", "x")), Phantom},
		{"double ack", withChanged(good, 7, func(op *Operation) { op.Offset = 1 }), DoubleAck},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckLog(c.history)
			var vs Violations
			switch {
			case c.log == 0 && err != nil:
				t.Errorf("CheckLog: %v", err)
			case c.log != 0 && !errors.As(err, &vs):
				t.Errorf("CheckLog passed, want %s", c.log)
			case c.log != 0 && !vs.Has(c.log):
				t.Errorf("CheckLog: %v; want a %s", err, c.log)
			case c.log != 0 && !errors.Is(err, ErrViolation):
				t.Errorf("CheckLog error does not match ErrViolation: %v", err)
			}
			if c.name == "listed out of order" {
				return // the same log read in another order is linearizable
			}
			err = CheckLinearizable(c.history, 10*time.Second)
			if !errors.Is(err, ErrNotLinearizable) {
				t.Fatalf("CheckLinearizable: %v; want ErrNotLinearizable", err)
			}
			if !strings.Contains(err.Error(), "\tclient") && !strings.Contains(err.Error(), "\tfinal") {
				t.Errorf("the report names no operation: %v", err)
			}
			t.Logf("reported:\n%v", err)
		})
	}
}

func TestMalformedHistoriesAreRefused(t *testing.T) {
	good := goodHistory()
	cases := map[string]History{
		"value produced twice":   withOperation(good, produce(9, "a", OutcomeFail, 0, 50, 51)),
		"no final read":          withOperation(good, Operation{Partition: 9, Kind: KindRead, Invoke: 1, Return: 2}),
		"returns before invoked": withChanged(good, 0, func(op *Operation) { op.Return = -1 }),
		"unknown kind":           withOperation(good, Operation{Kind: 7}),
	}
	for name, h := range cases {
		if err := CheckLog(h); !errors.Is(err, ErrBadHistory) {
			t.Errorf("%s: CheckLog: %v, want ErrBadHistory", name, err)
		}
		if err := CheckLinearizable(h, time.Second); !errors.Is(err, ErrBadHistory) {
			t.Errorf("%s: CheckLinearizable: %v, want ErrBadHistory", name, err)
		}
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	a := r.Produce(0, 0, "a", 1)
	b := r.Produce(1, 0, "b", 2)
	c := r.Produce(2, 0, "c", 3)
	r.Acked(b, 0, 4)
	r.Indeterminate(a, 5)
	r.Failed(c, 6)
	r.Read(3, 0, 0, "b", true, 7, 8)
	ops := r.Operations()
	want := []Operation{
		produce(0, "a", OutcomeInfo, 0, 1, 5),
		produce(1, "b", OutcomeOK, 0, 2, 4),
		produce(2, "c", OutcomeFail, 0, 3, 6),
		read(3, 0, "b", 7, 8),
	}
	if !slices.Equal(ops, want) {
		t.Fatalf("recorded %v, want %v", ops, want)
	}
	h := History{Operations: ops, Partitions: map[uint32]Partition{0: {Final: final("b")}}}
	if err := CheckLog(h); err != nil {
		t.Fatal(err)
	}
	if err := CheckLinearizable(h, time.Second); err != nil {
		t.Fatal(err)
	}
}

// randomHistory runs clients against one true log: each operation takes
// effect at a random point between its invocation and its return, some
// produces fail, some answers are lost.
func randomHistory(rng *rand.Rand, operations int) History {
	type planned struct {
		op       Operation
		at       int64
		lostWord bool
		fails    bool
	}
	plans := make([]planned, operations)
	for i := range plans {
		invoke := rng.Int64N(int64(operations) * 4)
		at := invoke + rng.Int64N(20)
		op := Operation{Client: i % 8, Invoke: invoke, Return: at + rng.Int64N(20)}
		if rng.IntN(3) == 0 {
			op.Kind = KindRead
		} else {
			op.Kind, op.Value = KindProduce, fmt.Sprintf("v%d", i)
		}
		plans[i] = planned{op: op, at: at, lostWord: rng.IntN(10) == 0, fails: rng.IntN(10) == 0}
	}
	slices.SortStableFunc(plans, func(a, b planned) int { return int(a.at - b.at) })
	var log []string
	var h History
	for _, p := range plans {
		op := p.op
		switch {
		case op.Kind == KindRead:
			op.Offset = uint64(rng.IntN(len(log) + 2))
			if op.Offset < uint64(len(log)) {
				op.Value, op.Found = log[op.Offset], true
			}
		case p.fails:
			op.Outcome = OutcomeFail
		default:
			op.Offset, op.Outcome = uint64(len(log)), OutcomeOK
			log = append(log, op.Value)
			if p.lostWord {
				op.Offset, op.Outcome = 0, OutcomeInfo
			}
		}
		h.Operations = append(h.Operations, op)
	}
	h.Partitions = map[uint32]Partition{0: {Final: final(log...)}}
	return h
}

func TestRandomCorrectHistoriesPass(t *testing.T) {
	for seed := range uint64(20) {
		h := randomHistory(rand.New(rand.NewPCG(seed, 1)), 400)
		if err := CheckLog(h); err != nil {
			t.Fatalf("seed %d: CheckLog: %v", seed, err)
		}
		if err := CheckLinearizable(h, 30*time.Second); err != nil {
			t.Fatalf("seed %d: CheckLinearizable: %v", seed, err)
		}
		// Losing one acknowledged record from the final log is caught by
		// both.
		var acked []int
		for i, op := range h.Operations {
			if op.Kind == KindProduce && op.Outcome == OutcomeOK {
				acked = append(acked, i)
			}
		}
		lost := h.Operations[acked[int(seed)%len(acked)]]
		part := h.Partitions[0]
		records := slices.DeleteFunc(slices.Clone(part.Final), func(r Record) bool { return r.Value == lost.Value })
		damaged := withFinal(h, 0, records)
		if err := CheckLog(damaged); !errors.Is(err, ErrViolation) {
			t.Fatalf("seed %d: CheckLog missed the loss of %s: %v", seed, lost, err)
		}
		if err := CheckLinearizable(damaged, 30*time.Second); !errors.Is(err, ErrNotLinearizable) {
			t.Fatalf("seed %d: CheckLinearizable missed the loss of %s: %v", seed, lost, err)
		}
	}
}
