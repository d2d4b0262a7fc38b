package txn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestCommitCopiesEveryRecordOnceWithItsReference(t *testing.T) {
	sink, clock := newMemorySink(), &fakeClock{}
	c := mustOpen(t, testConfig(vfs.NewMemFS(), sink, clock))
	defer c.Close()
	sink.logs[targetA] = [][]byte{{1}, {2}} // two unrelated records before
	id, err := c.Begin(1, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"a0", "b0", "a1"} {
		target := targetA
		if p[0] == 'b' {
			target = targetB
		}
		if index := appendDurable(t, c, 1, id, target, p); index != uint32(i) {
			t.Fatalf("index %d, want %d", index, i)
		}
	}
	if got := payloads(t, sink, targetA, id); len(got) != 0 {
		t.Fatalf("records visible before the commit: %v", got)
	}
	commits := []GroupCommit{{Stream: "in", Partition: 0, Group: "etl", Offset: 41}}
	out, err := c.End(1, "alice", id, true, commits)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	want := []Range{{Target: targetA, First: 2, Count: 2}, {Target: targetB, First: 0, Count: 1}}
	if !out.Committed || !slices.Equal(out.Ranges, want) {
		t.Fatalf("outcome %+v, want ranges %+v", out, want)
	}
	if got := payloads(t, sink, targetA, id); !slices.Equal(got, []string{"a0", "a1"}) {
		t.Fatalf("target a holds %v", got)
	}
	if sink.groups["in/0/etl"] != 41 {
		t.Fatalf("group position %d, want 41", sink.groups["in/0/etl"])
	}
	// A repeated commit, from another connection of the same identity,
	// returns the recorded ranges and copies nothing.
	appends := sink.appends
	again, err := c.End(2, "alice", id, true, nil)
	if err != nil || !slices.Equal(again.Ranges, want) || sink.appends != appends {
		t.Fatalf("repeated commit: %+v, %v (appends %d → %d)", again, err, appends, sink.appends)
	}
	if _, err := c.End(2, "mallory", id, true, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("another identity's repeated commit: %v, want ErrUnknown", err)
	}
	// After a restart too.
	c.Close()
	c = mustOpen(t, testConfig(c.cfg.FS, sink, clock))
	again, err = c.End(2, "alice", id, true, nil)
	if err != nil || !slices.Equal(again.Ranges, want) || sink.appends != appends {
		t.Fatalf("repeated commit after a restart: %+v, %v", again, err)
	}
}

func TestAbortLeavesNothingAndRefusesALaterCommit(t *testing.T) {
	sink, clock := newMemorySink(), &fakeClock{}
	c := mustOpen(t, testConfig(vfs.NewMemFS(), sink, clock))
	defer c.Close()
	id, _ := c.Begin(1, "", 0)
	appendDurable(t, c, 1, id, targetA, "x")
	if _, err := c.End(2, "", id, false, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("abort from another connection: %v, want ErrUnknown", err)
	}
	if out, err := c.End(1, "", id, false, nil); err != nil || out.Committed {
		t.Fatalf("abort: %+v, %v", out, err)
	}
	if _, err := c.End(1, "", id, true, nil); !errors.Is(err, ErrAborted) {
		t.Fatalf("commit after abort: %v, want ErrAborted", err)
	}
	b, crc := body(t, "late")
	if _, _, err := c.Append(1, id, targetA, b, crc); !errors.Is(err, ErrAborted) {
		t.Fatalf("append after abort: %v, want ErrAborted", err)
	}
	if len(sink.logs[targetA]) != 0 {
		t.Fatalf("an aborted transaction wrote to its target")
	}
}

func TestTimeoutAbortsOnTheMonotonicClock(t *testing.T) {
	sink, clock := newMemorySink(), &fakeClock{}
	c := mustOpen(t, testConfig(vfs.NewMemFS(), sink, clock))
	defer c.Close()
	id, _ := c.Begin(1, "", 5*time.Second)
	other, _ := c.Begin(1, "", time.Minute)
	appendDurable(t, c, 1, id, targetA, "x")
	clock.advance(4 * time.Second)
	if n := c.Expire(); n != 0 {
		t.Fatalf("expired %d before the timeout", n)
	}
	clock.advance(time.Second)
	if n := c.Expire(); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if _, err := c.End(1, "", id, true, nil); !errors.Is(err, ErrAborted) {
		t.Fatalf("commit after the timeout: %v, want ErrAborted", err)
	}
	if infos := c.OpenTransactions(); len(infos) != 1 || infos[0].ID != other {
		t.Fatalf("open transactions %+v, want only %d", infos, other)
	}
	// A touch past the deadline aborts too, without the sweeper.
	clock.advance(time.Minute)
	b, crc := body(t, "late")
	if _, _, err := c.Append(1, other, targetA, b, crc); !errors.Is(err, ErrAborted) {
		t.Fatalf("append past the timeout: %v, want ErrAborted", err)
	}
}

func TestOpenTransactionsAreBounded(t *testing.T) {
	sink, clock := newMemorySink(), &fakeClock{}
	cfg := testConfig(vfs.NewMemFS(), sink, clock)
	cfg.MaxOpen, cfg.MaxRecords = 3, 2
	c := mustOpen(t, cfg)
	defer c.Close()
	var ids []uint64
	for range 3 {
		id, err := c.Begin(1, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := c.Begin(1, "", 0); !errors.Is(err, ErrTooManyOpen) {
		t.Fatalf("begin over the bound: %v, want ErrTooManyOpen", err)
	}
	if _, err := c.End(1, "", ids[0], false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(1, "", 0); err != nil {
		t.Fatalf("begin after one ended: %v", err)
	}
	appendDurable(t, c, 1, ids[1], targetA, "1")
	appendDurable(t, c, 1, ids[1], targetA, "2")
	b, crc := body(t, "3")
	if _, _, err := c.Append(1, ids[1], targetA, b, crc); !errors.Is(err, ErrAborted) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("record over the limit: %v, want ErrAborted and ErrTooLarge", err)
	}
}

func TestRestartAbortsOpenTransactions(t *testing.T) {
	sink, clock, mem := newMemorySink(), &fakeClock{}, vfs.NewMemFS()
	c := mustOpen(t, testConfig(mem, sink, clock))
	id, _ := c.Begin(1, "", 0)
	appendDurable(t, c, 1, id, targetA, "x")
	c.Close()
	infos, err := Inspect(mem, "/data/txn", testConfig(mem, sink, clock).Storage)
	if err != nil || len(infos) != 1 || infos[0].ID != id || infos[0].Records != 1 || infos[0].Committing {
		t.Fatalf("Inspect: %+v, %v", infos, err)
	}
	c = mustOpen(t, testConfig(mem, sink, clock))
	defer c.Close()
	if _, err := c.End(1, "", id, true, nil); !errors.Is(err, ErrAborted) {
		t.Fatalf("commit after a restart: %v, want ErrAborted", err)
	}
	if len(sink.logs[targetA]) != 0 || len(c.OpenTransactions()) != 0 {
		t.Fatalf("a restart left the transaction visible or open")
	}
}

func TestRollForwardAppendsOnlyTheMissingCopies(t *testing.T) {
	sink, clock, mem := newMemorySink(), &fakeClock{}, vfs.NewMemFS()
	c := mustOpen(t, testConfig(mem, sink, clock))
	id, _ := c.Begin(1, "", 0)
	for _, p := range []string{"a0", "a1", "a2"} {
		appendDurable(t, c, 1, id, targetA, p)
	}
	// Write the intent by hand and one copy, as a commit cut short would.
	floors := []Floor{{Target: targetA, Offset: 0}}
	if err := c.writeSync(encodeIntent(id, floors, []GroupCommit{{Stream: "in", Group: "g", Offset: 9}})); err != nil {
		t.Fatal(err)
	}
	records, err := c.readRecords(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	copied, crc, err := Reframe(records[0].body, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Append(targetA, [][]byte{copied}, []uint32{crc}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = mustOpen(t, testConfig(mem, sink, clock))
	defer c.Close()
	if got := payloads(t, sink, targetA, id); !slices.Equal(got, []string{"a0", "a1", "a2"}) {
		t.Fatalf("after recovery target a holds %v", got)
	}
	out, err := c.End(1, "", id, true, nil)
	if err != nil || !slices.Equal(out.Ranges, []Range{{Target: targetA, First: 0, Count: 3}}) {
		t.Fatalf("outcome after recovery: %+v, %v", out, err)
	}
	if sink.groups["in/0/g"] != 9 {
		t.Fatalf("group commit not applied at recovery")
	}
}

func TestReclaimKeepsWhatOpenTransactionsNeed(t *testing.T) {
	sink, clock, mem := newMemorySink(), &fakeClock{}, vfs.NewMemFS()
	c := mustOpen(t, testConfig(mem, sink, clock))
	old, _ := c.Begin(1, "", 0)
	appendDurable(t, c, 1, old, targetA, "kept")
	big := string(make([]byte, 4096))
	for range 100 {
		id, _ := c.Begin(1, "", 0)
		appendDurable(t, c, 1, id, targetB, big)
		if _, err := c.End(1, "", id, true, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Reclaim(); n != 0 {
		t.Fatalf("reclaimed %d segments below an open transaction's BEGIN", n)
	}
	if _, err := c.End(1, "", old, true, nil); err != nil {
		t.Fatal(err)
	}
	if got := payloads(t, sink, targetA, old); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("the old transaction committed %v", got)
	}
	if n := c.Reclaim(); n == 0 {
		t.Fatalf("nothing reclaimed once no transaction was open")
	}
	c.Close()
	c = mustOpen(t, testConfig(mem, sink, clock))
	defer c.Close()
	id, err := c.Begin(1, "", 0)
	if err != nil || id <= old {
		t.Fatalf("a new id %d after reclaiming, %v; ids must keep rising", id, err)
	}
}

func TestEndedOutcomesAreBounded(t *testing.T) {
	s := newEndedSet(3, 100)
	many := make([]Range, 51)
	for id := uint64(1); id <= 5; id++ {
		s.add(id, "", Outcome{Committed: true, Ranges: many[:int(id%2)*len(many)]})
	}
	// 3 and 5 each hold more than half the range bound: only 5 and the
	// empty 4 fit.
	for id, want := range map[uint64]bool{1: false, 2: false, 3: false, 4: true, 5: true} {
		if _, ok := s.get(id); ok != want {
			t.Errorf("outcome %d kept %v, want %v", id, ok, want)
		}
	}
	if s.ranges != len(many) || len(s.byID) != 2 {
		t.Fatalf("%d ranges in %d outcomes", s.ranges, len(s.byID))
	}
}

// TestForgedReferenceNeverStandsInForACopy: a record someone published
// with a transaction's reference header but other content is not taken
// for the transaction's copy when a commit is rolled forward.
func TestForgedReferenceNeverStandsInForACopy(t *testing.T) {
	sink, clock, mem := newMemorySink(), &fakeClock{}, vfs.NewMemFS()
	c := mustOpen(t, testConfig(mem, sink, clock))
	id, _ := c.Begin(1, "", 0)
	appendDurable(t, c, 1, id, targetA, "real")
	if err := c.writeSync(encodeIntent(id, []Floor{{Target: targetA}}, nil)); err != nil {
		t.Fatal(err)
	}
	forged, err := record.AppendBody(nil, record.Body{Payload: []byte("forged"),
		Headers: []record.Header{{Name: ReferenceHeader, Value: appendReference(nil, id, 0)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Append(targetA, [][]byte{forged}, []uint32{record.Checksum(forged)}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = mustOpen(t, testConfig(mem, sink, clock))
	defer c.Close()
	if got := payloads(t, sink, targetA, id); !slices.Equal(got, []string{"forged", "real"}) {
		t.Fatalf("target a holds %v; the real copy must be appended beside the forgery", got)
	}
}

// TestADecidedCommitIsFinishedByAnyConnectionOfItsIdentity: a commit whose
// intent is durable but whose copies failed (a target was full) is
// finished by a repeated end from another connection of the identity,
// which learns its ranges.
func TestADecidedCommitIsFinishedByAnyConnectionOfItsIdentity(t *testing.T) {
	sink, clock := newMemorySink(), &fakeClock{}
	c := mustOpen(t, testConfig(vfs.NewMemFS(), sink, clock))
	defer c.Close()
	id, _ := c.Begin(1, "etl", 0)
	appendDurable(t, c, 1, id, targetA, "x")
	full := true
	sink.dead = func() bool { return full }
	if _, err := c.End(1, "etl", id, true, nil); err == nil {
		t.Fatal("a commit whose target refused its copies succeeded")
	}
	full = false
	if _, err := c.End(2, "mallory", id, true, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("another identity finishing the commit: %v, want ErrUnknown", err)
	}
	out, err := c.End(2, "etl", id, true, nil)
	if err != nil || !slices.Equal(out.Ranges, []Range{{Target: targetA, First: 0, Count: 1}}) {
		t.Fatalf("finishing the decided commit: %+v, %v", out, err)
	}
	if got := payloads(t, sink, targetA, id); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("target a holds %v", got)
	}
}
