package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// MemoryJournal is a Journal in memory with the disk model the simulator
// and tests need: writes are visible at once but durable only at Sync, and
// Crash loses what was not synced the way a power cut does (any prefix of
// the unsynced log writes survives, the state survives as it was at any
// unsynced SaveState). FailSync and Corrupt inject the other faults.
type MemoryJournal struct {
	durable memoryImage
	current memoryImage
	// pending holds the unsynced log writes in order; each is applied to
	// durable at Sync, or a prefix of them at Crash.
	pending []memoryWrite
	// states are the unsynced SaveState calls in order, each with the
	// number of pending log writes made before it.
	states []savedState

	failSync error
	damaged  map[uint64]bool
	syncs    int
}

type memoryImage struct {
	state    State
	snapshot Snapshot
	entries  []Entry // entries[i].Index == snapshot.Index+1+i
}

type savedState struct {
	state  State
	writes int
}

type memoryWrite struct {
	entries  []Entry   // an append
	snapshot *Snapshot // or an installed snapshot
	compact  *Snapshot // or a compaction: the new start point
}

// NewMemoryJournal returns an empty journal.
func NewMemoryJournal() *MemoryJournal {
	return &MemoryJournal{damaged: map[uint64]bool{}}
}

// Load implements Journal.
func (j *MemoryJournal) Load() (State, Snapshot, error) {
	return cloneState(j.current.state), cloneSnapshot(j.current.snapshot), nil
}

// Append implements Journal.
func (j *MemoryJournal) Append(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	owned := make([]Entry, len(entries))
	for i, e := range entries {
		owned[i] = Entry{Index: e.Index, Term: e.Term, Type: e.Type, Data: slices.Clone(e.Data)}
	}
	if err := j.current.append(owned); err != nil {
		return err
	}
	for _, e := range owned {
		delete(j.damaged, e.Index)
	}
	j.pending = append(j.pending, memoryWrite{entries: owned})
	return nil
}

// SaveState implements Journal.
func (j *MemoryJournal) SaveState(state State) error {
	state = cloneState(state)
	j.current.state = state
	j.states = append(j.states, savedState{state: state, writes: len(j.pending)})
	return nil
}

// Sync implements Journal.
func (j *MemoryJournal) Sync() error {
	if j.failSync != nil {
		return j.failSync
	}
	for _, w := range j.pending {
		j.durable.apply(w)
	}
	if len(j.states) > 0 {
		j.durable.state = j.states[len(j.states)-1].state
	}
	j.pending, j.states = nil, nil
	j.syncs++
	return nil
}

// Entries implements Journal.
func (j *MemoryJournal) Entries(lo, hi, maxBytes uint64) ([]Entry, error) {
	first, last := j.FirstIndex(), j.LastIndex()
	if lo < first {
		return nil, fmt.Errorf("%w: %d is below %d", ErrCompacted, lo, first)
	}
	if hi > last+1 || lo > hi {
		return nil, fmt.Errorf("%w: [%d, %d) past %d", ErrUnavailable, lo, hi, last)
	}
	var out []Entry
	var size uint64
	for index := lo; index < hi; index++ {
		if j.damaged[index] {
			return nil, fmt.Errorf("%w: entry %d fails its checksum", ErrDamaged, index)
		}
		e := j.current.entries[index-first]
		size += uint64(len(e.Data))
		if len(out) > 0 && size > maxBytes {
			break
		}
		out = append(out, Entry{Index: e.Index, Term: e.Term, Type: e.Type, Data: slices.Clone(e.Data)})
	}
	return out, nil
}

// Term implements Journal.
func (j *MemoryJournal) Term(index uint64) (uint64, error) {
	first, last := j.FirstIndex(), j.LastIndex()
	switch {
	case index == first-1:
		return j.current.snapshot.Term, nil
	case index < first:
		return 0, fmt.Errorf("%w: %d is below %d", ErrCompacted, index, first)
	case index > last:
		return 0, fmt.Errorf("%w: %d past %d", ErrUnavailable, index, last)
	}
	return j.current.entries[index-first].Term, nil
}

// FirstIndex implements Journal.
func (j *MemoryJournal) FirstIndex() uint64 { return j.current.snapshot.Index + 1 }

// LastIndex implements Journal.
func (j *MemoryJournal) LastIndex() uint64 {
	return j.current.snapshot.Index + uint64(len(j.current.entries))
}

// InstallSnapshot implements Journal.
func (j *MemoryJournal) InstallSnapshot(snapshot Snapshot) error {
	snapshot = cloneSnapshot(snapshot)
	w := memoryWrite{snapshot: &snapshot}
	j.current.apply(w)
	clear(j.damaged)
	j.pending = append(j.pending, w)
	return nil
}

// Compact implements Journal: it cuts exactly at start.Index.
func (j *MemoryJournal) Compact(start Snapshot, configSince uint64) (Snapshot, error) {
	current := cloneSnapshot(j.current.snapshot)
	if start.Index < j.FirstIndex() || start.Index < configSince {
		return current, nil
	}
	if start.Index > j.LastIndex() {
		return current, fmt.Errorf("%w: compact to %d past %d", ErrUnavailable, start.Index, j.LastIndex())
	}
	start = cloneSnapshot(start)
	w := memoryWrite{compact: &start}
	j.current.apply(w)
	j.pending = append(j.pending, w)
	return cloneSnapshot(start), nil
}

// Crash models a power cut: a random prefix of the unsynced log writes
// survives (the last one possibly torn, which loses its tail entries), the
// state is the synced one or a later unsynced one whose earlier log writes
// all survived (a journal writes its state after its log at Sync, so a
// state never gets ahead of the entries it describes), and the journal
// reopens on what survived. A torn entry is lost whole: its checksum
// fails and recovery drops it.
func (j *MemoryJournal) Crash(rng *rand.Rand) {
	image := j.durable.clone()
	keep := rng.IntN(len(j.pending) + 1)
	whole := keep
	for i, w := range j.pending[:keep] {
		if i == keep-1 && len(w.entries) > 1 {
			if torn := 1 + rng.IntN(len(w.entries)); torn < len(w.entries) {
				w.entries, whole = w.entries[:torn], keep-1
			}
		}
		image.apply(w)
	}
	eligible := 0
	for eligible < len(j.states) && j.states[eligible].writes <= whole {
		eligible++
	}
	if n := rng.IntN(eligible + 1); n > 0 {
		image.state = j.states[n-1].state
	}
	j.durable, j.current = image, image.clone()
	j.pending, j.states, j.failSync = nil, nil, nil
	for index := range j.damaged {
		if index < j.FirstIndex() || index > j.LastIndex() {
			delete(j.damaged, index)
		}
	}
}

// FailSync makes every later Sync fail with err (nil clears it).
func (j *MemoryJournal) FailSync(err error) { j.failSync = err }

// Corrupt damages the stored entry at index: reads of it fail with
// ErrDamaged, as a flipped bit fails a checksum.
func (j *MemoryJournal) Corrupt(index uint64) { j.damaged[index] = true }

// Syncs counts successful Syncs.
func (j *MemoryJournal) Syncs() int { return j.syncs }

// Durable returns what a crash with nothing unsynced surviving would
// leave: the synced state and entries.
func (j *MemoryJournal) Durable() (State, Snapshot, []Entry) {
	image := j.durable.clone()
	return image.state, image.snapshot, image.entries
}

func (m *memoryImage) append(entries []Entry) error {
	first := entries[0].Index
	last := m.snapshot.Index + uint64(len(m.entries))
	if first <= m.snapshot.Index || first > last+1 {
		return fmt.Errorf("%w: append at %d to a journal holding (%d, %d]", ErrUnavailable, first, m.snapshot.Index, last)
	}
	m.entries = append(m.entries[:first-m.snapshot.Index-1:first-m.snapshot.Index-1], entries...)
	return nil
}

func (m *memoryImage) apply(w memoryWrite) {
	switch {
	case w.snapshot != nil:
		m.snapshot = cloneSnapshot(*w.snapshot)
		m.entries = nil
	case w.compact != nil:
		if w.compact.Index <= m.snapshot.Index {
			return
		}
		cut := min(w.compact.Index-m.snapshot.Index, uint64(len(m.entries)))
		m.entries = slices.Clone(m.entries[cut:])
		m.snapshot = cloneSnapshot(*w.compact)
	default:
		// A write the model accepted once; the image it lands on is a
		// prefix of the one that accepted it, so it always fits.
		_ = m.append(w.entries)
	}
}

func (m memoryImage) clone() memoryImage {
	return memoryImage{state: cloneState(m.state), snapshot: cloneSnapshot(m.snapshot),
		entries: slices.Clone(m.entries)}
}
