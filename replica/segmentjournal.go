package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ironbus/ironbus/segment"
)

// ErrCommittedTruncation: an append would replace entries at or below the
// durable commit index, which no correct caller asks for.
var ErrCommittedTruncation = errors.New("replica: append would replace committed entries")

// SegmentJournal is the Journal of a replica whose Raft log is its
// partition's segment log (segment.RaftLog): a data entry is its record
// frames at the offsets they carry, every other entry a control frame, and
// the state (with the point the log starts after) sits in a two-slot file
// beside the segments. Appends and truncations go to the log as they come;
// Sync is one fdatasync of the log and then, when the state changed, one
// slot write and its fdatasync: the state never gets ahead of the entries
// it describes.
//
// Retention and snapshots move the start point: it is written to the state
// first (durably), then segments are removed, so a crash between the two
// leaves segments the next open removes again. Retention is
// segment-granular: FirstIndex may stay at or below the index asked for.
//
// What a crash leaves, beyond the contract's prefix of unsynced writes: a
// replaced suffix is cut durably before its replacement is written, so a
// crash may leave the cut without any of the new entries (a prefix of the
// log; the cut entries conflicted with the leader's, so none was
// committed); and a retention or a snapshot install is durable when it
// returns, so it may outlive earlier unsynced appends (retention only
// drops committed entries, an install drops every entry).
type SegmentJournal struct {
	raft *segment.RaftLog
	// synced is the State the state file holds; state the one saved last.
	synced, state State
	dirty         bool
	// start is the point the log starts after: zero, a snapshot
	// installed, or where retention cut; its Data is the last installed
	// snapshot's, kept in the data file dataIndex names.
	start     Snapshot
	dataIndex uint64
}

// OpenSegmentJournal makes log, writable and idle, the Raft log of a
// replica and finishes what a crash interrupted: a snapshot install or a
// retention pass whose start point was written but whose segments were not
// all removed yet.
func OpenSegmentJournal(log *segment.Log) (*SegmentJournal, error) {
	image, err := log.ReadRaftState()
	if errors.Is(err, segment.ErrRaftState) {
		// Neither slot holds a state: the vote is unknown.
		return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if err != nil {
		return nil, err
	}
	var js journalState
	if image != nil {
		if js, err = decodeJournalState(image); err != nil {
			return nil, err
		}
	}
	if js.dataIndex != 0 {
		if js.start.Data, err = log.ReadSnapshotData(js.dataIndex); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	raft, err := log.OpenRaft(js.start.Index)
	if err != nil {
		return nil, err
	}
	j := &SegmentJournal{raft: raft, synced: js.state, state: cloneState(js.state), start: js.start, dataIndex: js.dataIndex}
	// A snapshot install cut by a crash may have left another's data.
	if err := raft.RemoveSnapshotData(js.dataIndex); err != nil {
		return nil, err
	}
	if err := j.reconcile(); err != nil {
		return nil, err
	}
	// Readers see what the replica knows committed, never a recovered
	// tail that a new leader may cut.
	raft.HideAfter(max(js.state.Commit, j.start.Index))
	return j, nil
}

// SetVisible lets the partition's readers read the offsets below offset
// once they are synced: the replica's commit reached them. The replica's
// application calls it as it applies committed entries.
func (j *SegmentJournal) SetVisible(offset uint64) { j.raft.SetVisible(offset) }

// reconcile brings the log in line with the start point.
func (j *SegmentJournal) reconcile() error {
	first, last, start := j.raft.FirstIndex(), j.raft.LastIndex(), j.start
	switch {
	case first > last:
		return j.raft.Reset(start.NextOffset, start.Index)
	case first <= start.Index:
		if term, err := j.raft.Term(start.Index); start.Index <= last && err == nil && term == start.Term {
			return j.raft.CompactTo(start.Index)
		}
		return j.raft.Reset(start.NextOffset, start.Index)
	case first > start.Index+1:
		return fmt.Errorf("%w: the log starts at entry %d, after entry %d it should follow", ErrDamaged, first, start.Index)
	}
	return nil
}

// Load implements Journal. The commit is at least the start point's
// index: whatever the log starts after is committed.
func (j *SegmentJournal) Load() (State, Snapshot, error) {
	state := cloneState(j.synced)
	state.Commit = max(state.Commit, j.start.Index)
	return state, cloneSnapshot(j.start), nil
}

// Append implements Journal.
func (j *SegmentJournal) Append(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	first, last := entries[0].Index, j.LastIndex()
	switch {
	case first <= j.start.Index || first > last+1:
		return fmt.Errorf("%w: append at %d to a journal holding (%d, %d]", ErrUnavailable, first, j.start.Index, last)
	case first <= j.synced.Commit && first <= last:
		return fmt.Errorf("%w: append at %d, durable commit %d", ErrCommittedTruncation, first, j.synced.Commit)
	}
	stored := make([]segment.RaftEntry, len(entries))
	for i, e := range entries {
		if i > 0 && e.Index != entries[i-1].Index+1 {
			return fmt.Errorf("%w: entry %d after entry %d", ErrUnavailable, e.Index, entries[i-1].Index)
		}
		var err error
		if stored[i], err = storedEntry(e); err != nil {
			return err
		}
	}
	if first <= last {
		if err := j.raft.TruncateFrom(first); err != nil {
			return journalError(err)
		}
	}
	return journalError(j.raft.Append(stored))
}

// storedEntry maps a Raft entry to what the log stores: a data payload's
// frames, or a control frame whose type is the entry type and whose
// payload is the entry's data as it is.
func storedEntry(e Entry) (segment.RaftEntry, error) {
	stored := segment.RaftEntry{Index: e.Index, Term: e.Term, Control: true, Type: uint8(e.Type), Data: e.Data}
	if e.Type != EntryNormal {
		return stored, nil
	}
	payload, err := DecodePayload(e.Data)
	if err != nil {
		return segment.RaftEntry{}, fmt.Errorf("entry %d: %w", e.Index, err)
	}
	if payload.Kind == PayloadData {
		stored = segment.RaftEntry{Index: e.Index, Term: e.Term, Data: payload.Frames,
			FirstOffset: payload.Data.BaseOffset, Count: payload.Data.Count}
	}
	return stored, nil
}

// SaveState implements Journal.
func (j *SegmentJournal) SaveState(state State) error {
	j.state, j.dirty = cloneState(state), true
	return nil
}

// Sync implements Journal: the log first, then the state.
func (j *SegmentJournal) Sync() error {
	if err := j.raft.Sync(); err != nil {
		return journalError(err)
	}
	if !j.dirty {
		return nil
	}
	if err := j.writeState(j.state, j.start); err != nil {
		return err
	}
	j.synced, j.dirty = cloneState(j.state), false
	return nil
}

func (j *SegmentJournal) writeState(state State, start Snapshot) error {
	image := appendJournalState(nil, journalState{state: state, start: start, dataIndex: j.dataIndex})
	return journalError(j.raft.WriteState(image))
}

// Entries implements Journal. A data entry comes back as its payload: the
// header rebuilt from the frames' offsets, then the frames.
func (j *SegmentJournal) Entries(lo, hi, maxBytes uint64) ([]Entry, error) {
	first, last := j.FirstIndex(), j.LastIndex()
	if lo < first {
		return nil, fmt.Errorf("%w: %d is below %d", ErrCompacted, lo, first)
	}
	if hi > last+1 || lo > hi {
		return nil, fmt.Errorf("%w: [%d, %d) past %d", ErrUnavailable, lo, hi, last)
	}
	var out []Entry
	var size uint64
	err := j.raft.ReadEntries(lo, hi, func(stored segment.RaftEntry) bool {
		e := journalEntryOf(stored)
		size += uint64(len(e.Data))
		if len(out) > 0 && size > maxBytes {
			return false
		}
		out = append(out, e)
		return true
	})
	if err != nil {
		return nil, journalError(err)
	}
	return out, nil
}

// journalEntryOf copies a stored entry out as a Raft entry.
func journalEntryOf(stored segment.RaftEntry) Entry {
	e := Entry{Index: stored.Index, Term: stored.Term, Type: EntryType(stored.Type)}
	switch {
	case stored.Control && len(stored.Data) > 0:
		e.Data = slices.Clone(stored.Data)
	case !stored.Control:
		e.Type = EntryNormal
		e.Data = AppendDataHeader(make([]byte, 0, DataHeaderSize+len(stored.Data)),
			DataHeader{Count: stored.Count, BaseOffset: stored.FirstOffset})
		e.Data = append(e.Data, stored.Data...)
	}
	return e
}

// Term implements Journal.
func (j *SegmentJournal) Term(index uint64) (uint64, error) {
	first, last := j.FirstIndex(), j.LastIndex()
	switch {
	case index == first-1:
		return j.start.Term, nil
	case index < first:
		return 0, fmt.Errorf("%w: %d is below %d", ErrCompacted, index, first)
	case index > last:
		return 0, fmt.Errorf("%w: %d past %d", ErrUnavailable, index, last)
	}
	term, err := j.raft.Term(index)
	return term, journalError(err)
}

// FirstIndex implements Journal.
func (j *SegmentJournal) FirstIndex() uint64 {
	return max(j.start.Index+1, j.raft.FirstIndex())
}

// LastIndex implements Journal.
func (j *SegmentJournal) LastIndex() uint64 { return j.raft.LastIndex() }

// InstallSnapshot implements Journal. The start point is durable when it
// returns, ahead of the next Sync, which the contract allows.
func (j *SegmentJournal) InstallSnapshot(snapshot Snapshot) error {
	start := cloneSnapshot(snapshot)
	j.dataIndex = 0
	if len(start.Data) > 0 {
		if err := j.raft.WriteSnapshotData(start.Index, start.Data); err != nil {
			return err
		}
		j.dataIndex = start.Index
	}
	if err := j.writeState(j.synced, start); err != nil {
		return err
	}
	j.start = start
	if err := j.raft.RemoveSnapshotData(j.dataIndex); err != nil {
		return err
	}
	return journalError(j.raft.Reset(start.NextOffset, start.Index))
}

// Compact implements Journal: segment-granular, it removes the leading
// segments whose entries are all at or below index, so FirstIndex may
// stay below index + 1.
func (j *SegmentJournal) Compact(asked Snapshot, configSince uint64) (Snapshot, error) {
	if asked.Index < j.FirstIndex() {
		return cloneSnapshot(j.start), nil
	}
	if asked.Index > j.LastIndex() {
		return cloneSnapshot(j.start), fmt.Errorf("%w: compact to %d past %d", ErrUnavailable, asked.Index, j.LastIndex())
	}
	point, ok := j.raft.Compactable(asked.Index)
	if !ok || point.Index <= j.start.Index || point.Index < configSince {
		return cloneSnapshot(j.start), nil
	}
	start := Snapshot{Index: point.Index, Term: point.Term, NextOffset: point.NextOffset,
		Config: cloneMembership(asked.Config), Data: slices.Clone(asked.Data)}
	if err := j.writeState(j.synced, start); err != nil {
		return cloneSnapshot(j.start), err
	}
	j.start = start
	return cloneSnapshot(start), journalError(j.raft.CompactTo(point.Index))
}

// journalError maps the log's damage to ErrDamaged.
func journalError(err error) error {
	if err != nil && errors.Is(err, segment.ErrDamagedEntry) {
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	return err
}

var _ Journal = (*SegmentJournal)(nil)
