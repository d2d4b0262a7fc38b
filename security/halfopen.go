package security

import "container/list"

// The half-open table: connections accepted but not yet authenticated,
// in the order they arrived, overall and per source IP.
//
// A full table does not refuse the newcomer: it evicts the oldest
// unauthenticated connection (of the newcomer's source when that source
// is at its own cap, else of any source) to admit it. Refusing would let
// connections that send nothing hold every slot for the whole handshake
// timeout, locking out every real client; evicting the oldest costs a
// flood its own earliest connections first, and a real client, whose
// handshake takes milliseconds, is rarely the oldest for long.

// Admission is a connection's half-open slot, held from accept until the
// connection authenticates or ends. Release gives it back.
type Admission struct {
	gate   *Gate
	source string
	evict  func() bool
	all    *list.Element // in gate.halfOpen; nil once released or evicted
	mine   *list.Element // in the source's list
}

// halfOpenTable is the gate's half-open state, guarded by Gate.mu.
type halfOpenTable struct {
	all      *list.List            // *Admission, oldest first
	bySource map[string]*list.List // *Admission per source IP, oldest first; no empty lists
}

func newHalfOpenTable() halfOpenTable {
	return halfOpenTable{all: list.New(), bySource: map[string]*list.List{}}
}

// Release gives the slot back (authenticated, or gone). It is idempotent,
// and a no-op after an eviction took the slot.
func (a *Admission) Release() {
	if a == nil {
		return
	}
	a.gate.mu.Lock()
	defer a.gate.mu.Unlock()
	a.gate.halfOpen.remove(a)
}

func (t *halfOpenTable) add(a *Admission) {
	a.all = t.all.PushBack(a)
	mine := t.bySource[a.source]
	if mine == nil {
		mine = list.New()
		t.bySource[a.source] = mine
	}
	a.mine = mine.PushBack(a)
}

func (t *halfOpenTable) remove(a *Admission) {
	if a.all == nil {
		return
	}
	t.all.Remove(a.all)
	if mine := t.bySource[a.source]; mine != nil {
		mine.Remove(a.mine)
		if mine.Len() == 0 {
			delete(t.bySource, a.source)
		}
	}
	a.all, a.mine = nil, nil
}

// sourceCount is how many of source's connections are half-open.
func (t *halfOpenTable) sourceCount(source string) int {
	if mine := t.bySource[source]; mine != nil {
		return mine.Len()
	}
	return 0
}

// evictOldest evicts the oldest evictable connection of candidates (the
// whole table, or one source's list) and reports whether there was one.
// A connection whose evict callback declines (it is authenticating right
// now, which ends by itself within the failure delay) is passed over.
func (t *halfOpenTable) evictOldest(candidates *list.List) bool {
	if candidates == nil {
		return false
	}
	for element := candidates.Front(); element != nil; element = element.Next() {
		a := element.Value.(*Admission)
		if a.evict != nil && a.evict() {
			t.remove(a)
			return true
		}
	}
	return false
}
