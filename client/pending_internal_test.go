package client

import (
	"math"
	"testing"
)

// TestPendingIDsWrap drives the id counter across its wrap: ids are never
// 0, never collide with an id still in flight, and stay resolvable while
// the table grows.
func TestPendingIDsWrap(t *testing.T) {
	var table pendingTable
	table.lastID = math.MaxUint32 - 50
	live := map[uint32]uint64{}
	for i := range uint64(300) {
		id := table.add(entry{kind: kindPing, seq: i})
		if id == 0 {
			t.Fatal("id 0 handed out")
		}
		if _, dup := live[id]; dup {
			t.Fatalf("id %d handed out twice", id)
		}
		live[id] = i
		if i%3 == 0 { // retire some, so slots free up in a scattered way
			for old := range live {
				table.remove(table.get(old))
				delete(live, old)
				break
			}
		}
	}
	if table.count != len(live) {
		t.Fatalf("count %d, live %d", table.count, len(live))
	}
	for id, seq := range live {
		if e := table.get(id); e == nil || e.seq != seq {
			t.Fatalf("id %d lost after growth: %+v", id, e)
		}
	}
	if table.get(0) != nil || table.get(table.lastID+1) != nil {
		t.Fatal("get found an id that is not in flight")
	}
}

func TestPendingSkipsBusySlots(t *testing.T) {
	var table pendingTable
	first := table.add(entry{kind: kindAck}) // id 1
	size := uint32(len(table.slots))
	table.lastID = size // the next candidate, size+1, maps to first's slot
	if id := table.add(entry{kind: kindAck}); id != size+2 {
		t.Fatalf("got id %d, want %d: id %d's slot is busy", id, size+2, size+1)
	}
	if e := table.get(first); e == nil || e.id != first {
		t.Fatal("the busy slot was overwritten")
	}
	if got := len(table.drain()); got != 2 || table.count != 0 || table.get(first) != nil {
		t.Fatalf("drain returned %d entries", got)
	}
}
