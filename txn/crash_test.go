package txn

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

// TestCommitSurvivesACrashAtEveryWrite cuts the power at every write of
// the coordinator during a two-target transaction with a group commit:
// after recovery it is committed (every record once in its target, the
// group moved, a repeated commit answering the same ranges) or it is
// nothing at all.
func TestCommitSurvivesACrashAtEveryWrite(t *testing.T) {
	for k := int64(0); ; k++ {
		cut := crashtest.CutAtWrite(vfs.NewMemFS(), k)
		sink, clock := newMemorySink(), &fakeClock{}
		sink.dead = cut.Cut
		id, answered := crashWorkload(t, cut.FS(), sink, clock)
		if !cut.Cut() {
			if !answered {
				t.Fatalf("the workload failed without a cut")
			}
			if k < 10 {
				t.Fatalf("only %d writes: the sweep tested nothing", k)
			}
			return
		}
		for keep, image := range []*vfs.MemFS{cut.Image(), cut.Image().CrashClone(vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5})} {
			t.Run(fmt.Sprintf("write%d/keep%d", k, keep), func(t *testing.T) {
				checkRecovered(t, image.CrashClone(vfs.CrashOptions{}), sink.clone(), clock, id, answered)
			})
		}
	}
}

// crashWorkload runs one transaction: its id (0 when Begin failed) and
// whether its commit was answered.
func crashWorkload(t *testing.T, fsys vfs.FS, sink *memorySink, clock *fakeClock) (uint64, bool) {
	c, err := Open(testConfig(fsys, sink, clock))
	if err != nil {
		return 0, false
	}
	defer c.Close()
	id, err := c.Begin(1, "etl", 0)
	if err != nil {
		return 0, false
	}
	for _, p := range []string{"a0", "b0", "a1"} {
		target := targetA
		if p[0] == 'b' {
			target = targetB
		}
		b, crc := body(t, p)
		ticket, _, err := c.Append(1, id, target, b, crc)
		if err != nil {
			return id, false
		}
		<-ticket.Done()
		if ticket.Err() != nil {
			return id, false
		}
	}
	_, err = c.End(1, "etl", id, true, []GroupCommit{{Stream: "in", Partition: 0, Group: "etl", Offset: 41}})
	return id, err == nil
}

func checkRecovered(t *testing.T, fsys vfs.FS, sink *memorySink, clock *fakeClock, id uint64, answered bool) {
	c, err := Open(testConfig(fsys, sink, clock))
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	defer c.Close()
	if len(c.OpenTransactions()) != 0 {
		t.Fatalf("recovery left transactions open: %+v", c.OpenTransactions())
	}
	a, b := payloads(t, sink, targetA, id), payloads(t, sink, targetB, id)
	committed := len(a)+len(b) > 0
	if answered && !committed {
		t.Fatalf("an answered commit is not visible after recovery")
	}
	if !committed {
		if sink.groups["in/0/etl"] != 0 {
			t.Fatalf("group moved by a transaction that is not visible")
		}
		if id != 0 {
			if _, err := c.End(1, "etl", id, true, nil); !errors.Is(err, ErrAborted) && !errors.Is(err, ErrUnknown) {
				t.Fatalf("commit of a recovered uncommitted transaction: %v", err)
			}
		}
		return
	}
	if !slices.Equal(a, []string{"a0", "a1"}) || !slices.Equal(b, []string{"b0"}) {
		t.Fatalf("targets hold a=%v b=%v, want each record once", a, b)
	}
	if sink.groups["in/0/etl"] != 41 {
		t.Fatalf("group position %d, want 41", sink.groups["in/0/etl"])
	}
	appends := sink.appends
	out, err := c.End(2, "etl", id, true, nil)
	if err != nil || len(out.Ranges) != 2 || sink.appends != appends {
		t.Fatalf("repeated commit after recovery: %+v, %v", out, err)
	}
	for _, r := range out.Ranges {
		for i := range r.Count {
			if ref, _, ok := Reference(sink.logs[r.Target][r.First+uint64(i)]); !ok || ref != id {
				t.Fatalf("range %+v names offset %d, which is not the transaction's", r, r.First+uint64(i))
			}
		}
	}
}
