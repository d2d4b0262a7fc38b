package broker

import (
	"sync"
	"sync/atomic"
)

// spanState is what one group name shares across the partitions of its
// stream, kept on partition 0's servedGroup: where the next all-partition
// fetch starts, and which streaming member reads which partitions.
//
// Streaming assignment: the members are the connections consuming the
// group over all its partitions (AllPartitions). Partition p belongs to the member at
// index p mod n in join order, so the assignment is disjoint and balanced
// (member counts differ by at most one partition), and every join or
// leave rebalances it at once. A member reads only its partitions; one
// that gains a partition reads it from the group's committed position
// there, so what the previous owner read but did not commit is read
// again, never lost.
type spanState struct {
	rotation atomic.Uint32

	mu         sync.Mutex
	members    []uint64 // connection ids in join order
	generation uint64   // bumped by every join and leave
	views      map[uint64]*memberView
}

// memberView is the assignment a member last read with, so a change can
// be told to it: the partitions it gained start at the committed position.
type memberView struct {
	generation uint64
	partitions []uint32
}

// start returns where an all-partition fetch over count partitions
// begins, a different partition each time, so a busy partition cannot
// starve the others.
func (st *spanState) start(count int) int {
	return int(st.rotation.Add(1)-1) % count
}

// join adds member; it reports whether the member is new.
func (st *spanState) join(member uint64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.views[member]; ok {
		return false
	}
	if st.views == nil {
		st.views = map[uint64]*memberView{}
	}
	st.views[member] = &memberView{}
	st.members = append(st.members, member)
	st.generation++
	return true
}

// leave removes member: its partitions go to the others.
func (st *spanState) leave(member uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.views[member]; !ok {
		return
	}
	delete(st.views, member)
	for i, m := range st.members {
		if m == member {
			st.members = append(st.members[:i], st.members[i+1:]...)
			break
		}
	}
	st.generation++
}

// assigned returns member's partitions out of count, ascending, and the
// partitions it gained since it last asked.
func (st *spanState) assigned(member uint64, count uint32) (partitions, gained []uint32) {
	st.mu.Lock()
	defer st.mu.Unlock()
	view, ok := st.views[member]
	if !ok {
		return nil, nil
	}
	if view.generation == st.generation && view.partitions != nil {
		return view.partitions, nil
	}
	index, n := 0, len(st.members)
	for i, m := range st.members {
		if m == member {
			index = i
		}
	}
	partitions = make([]uint32, 0, int(count)/n+1)
	for p := uint32(index); p < count; p += uint32(n) {
		partitions = append(partitions, p)
		if !containsPartition(view.partitions, p) {
			gained = append(gained, p)
		}
	}
	view.generation, view.partitions = st.generation, partitions
	return partitions, gained
}

// Members returns how many members share the group (for tests and
// metrics).
func (st *spanState) memberCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.members)
}

func containsPartition(partitions []uint32, p uint32) bool {
	for _, q := range partitions {
		if q == p {
			return true
		}
	}
	return false
}
