package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/ironbus/ironbus/replica"
)

// disk is a node's MemoryJournal seen by the checks: it tracks which
// (index, term) pairs are synced, so an acknowledgement can be held
// against the journals' durable state at the moment it is made, and it
// refuses writes from a replica that has stopped.
type disk struct {
	*replica.MemoryJournal
	// durableTerms[i] is the term of the synced entry at index first+i.
	first        uint64
	durableTerms []uint64
	durableState replica.State
	// unsynced holds the Appends since the last Sync, as (index, term)
	// runs, and the last SaveState since then.
	unsynced   [][]indexTerm
	savedState *replica.State
	// exact is false once a snapshot or compaction changed the journal's
	// start; durability questions then go to MemoryJournal.Durable.
	exact bool
	// stopped is set when the replica reported a latch or damage: it must
	// not write again. violation receives any write that breaks that.
	stopped   bool
	violation func(format string, args ...any)
	// corrupted lists the entries this disk was told to damage.
	corrupted map[uint64]bool
	// cutAt, when positive, counts down the writes (Append, SaveState,
	// Sync) until the power is cut in the middle of the one it reaches
	// zero at: that write does not happen, and the call panics with
	// powerCut, which the simulator turns into a crash of the node.
	cutAt int
	// cutAfterVote arms a crash once this disk saves a vote: voted says
	// one was saved, and the simulator crashes the node when the call
	// that saved it returns (its answer has left).
	cutAfterVote, voted bool
}

// powerCut is the panic a disk raises when the nemesis cuts the power in
// the middle of a write; the simulator recovers it around the replica
// call that was writing.
type powerCut struct{}

type indexTerm struct{ index, term uint64 }

func newDisk(violation func(string, ...any)) *disk {
	return &disk{MemoryJournal: replica.NewMemoryJournal(), first: 1, exact: true,
		violation: violation, corrupted: map[uint64]bool{}}
}

func (d *disk) write(what string) {
	if d.stopped {
		d.violation("a stopped replica wrote to its journal (%s)", what)
	}
	if d.cutAt > 0 {
		d.cutAt--
		if d.cutAt == 0 {
			panic(powerCut{})
		}
	}
}

// Append implements replica.Journal.
func (d *disk) Append(entries []replica.Entry) error {
	d.write("append")
	if err := d.MemoryJournal.Append(entries); err != nil {
		return err
	}
	run := make([]indexTerm, len(entries))
	for i, e := range entries {
		run[i] = indexTerm{e.Index, e.Term}
		delete(d.corrupted, e.Index) // rewritten whole
	}
	d.unsynced = append(d.unsynced, run)
	return nil
}

// SaveState implements replica.Journal.
func (d *disk) SaveState(state replica.State) error {
	d.write("save state")
	if err := d.MemoryJournal.SaveState(state); err != nil {
		return err
	}
	if d.cutAfterVote && state.Vote != 0 && (state.Vote != d.lastState().Vote || state.Term != d.lastState().Term) {
		d.voted = true
	}
	d.savedState = &state
	return nil
}

func (d *disk) lastState() replica.State {
	if d.savedState != nil {
		return *d.savedState
	}
	return d.durableState
}

// Sync implements replica.Journal.
func (d *disk) Sync() error {
	d.write("sync")
	if err := d.MemoryJournal.Sync(); err != nil {
		return err
	}
	for _, run := range d.unsynced {
		if !d.exact || len(run) == 0 {
			continue
		}
		cut := run[0].index - d.first
		if cut > uint64(len(d.durableTerms)) {
			d.violation("a synced append at index %d leaves a hole after %d", run[0].index,
				d.first+uint64(len(d.durableTerms))-1)
			cut = uint64(len(d.durableTerms))
		}
		d.durableTerms = d.durableTerms[:cut]
		for _, it := range run {
			d.durableTerms = append(d.durableTerms, it.term)
		}
	}
	if d.savedState != nil {
		d.durableState = *d.savedState
	}
	d.unsynced, d.savedState = nil, nil
	return nil
}

// InstallSnapshot implements replica.Journal.
func (d *disk) InstallSnapshot(snapshot replica.Snapshot) error {
	d.write("install snapshot")
	d.exact = false
	return d.MemoryJournal.InstallSnapshot(snapshot)
}

// Compact implements replica.Journal.
func (d *disk) Compact(start replica.Snapshot, configSince uint64) (replica.Snapshot, error) {
	d.write("compact")
	d.exact = false
	return d.MemoryJournal.Compact(start, configSince)
}

// crash cuts the power: unsynced writes are lost (a torn tail may
// survive), and the tracking restarts from what the journal kept.
func (d *disk) crash(rng *rand.Rand) {
	d.MemoryJournal.Crash(rng)
	state, snapshot, entries := d.MemoryJournal.Durable()
	d.first, d.durableState, d.exact = snapshot.Index+1, state, true
	d.durableTerms = d.durableTerms[:0]
	for _, e := range entries {
		d.durableTerms = append(d.durableTerms, e.Term)
	}
	d.unsynced, d.savedState, d.stopped, d.cutAt = nil, nil, false, 0
	d.cutAfterVote, d.voted = false, false
	for index := range d.corrupted {
		if index < d.first || index >= d.first+uint64(len(d.durableTerms)) {
			delete(d.corrupted, index)
		}
	}
}

// durableLast is the last synced index.
func (d *disk) durableLast() uint64 {
	if !d.exact {
		_, snapshot, entries := d.MemoryJournal.Durable()
		return snapshot.Index + uint64(len(entries))
	}
	return d.first + uint64(len(d.durableTerms)) - 1
}

// durableAt says whether the entry at index with term is synced.
func (d *disk) durableAt(index, term uint64) bool {
	if !d.exact {
		_, _, entries := d.MemoryJournal.Durable()
		for _, e := range entries {
			if e.Index == index {
				return e.Term == term
			}
		}
		return false
	}
	if index < d.first || index-d.first >= uint64(len(d.durableTerms)) {
		return false
	}
	return d.durableTerms[index-d.first] == term
}

func (d *disk) corrupt(index uint64) {
	d.MemoryJournal.Corrupt(index)
	d.corrupted[index] = true
}

func (d *disk) String() string {
	return fmt.Sprintf("journal [%d, %d] durable to %d, state term %d", d.FirstIndex(), d.LastIndex(),
		d.first+uint64(len(d.durableTerms))-1, d.durableState.Term)
}
