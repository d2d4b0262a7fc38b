package replica

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// journalModel is the Journal contract as a model: what was written, and
// every state a crash may leave of it. The durable image is what the last
// Sync covered; each later write may survive or not, in order, the one a
// crash cut partly: an append keeps its cut of the conflicting suffix and
// a prefix of its new entries, or a prefix of the suffix it replaces (a
// replaced suffix was never committed, so losing it loses nothing acked).
// The state is the synced one, or a later saved one whose earlier writes
// all survived.
type journalModel struct {
	// mu lets a crash injector copy the model (copy) while the workload
	// writes to it: what was synced is read before the image is cut.
	mu           sync.Mutex
	durable      modelLog
	durableState State
	current      modelLog
	state        State
	pending      []modelWrite
	states       []modelState
}

// modelLog holds the entries after a snapshot point; compaction only
// raises floor, so the entries a segment-granular compaction keeps can
// still be compared.
type modelLog struct {
	base       uint64 // snapshot index
	baseTerm   uint64
	baseOffset uint64 // the data offset after the snapshot point
	floor      uint64 // highest index retention asked to drop
	entries    []Entry
	// baseConfig and baseData are the last installed snapshot's: a
	// compaction keeps them.
	baseConfig Membership
	baseData   []byte
}

type modelWrite struct {
	entries  []Entry
	snapshot *Snapshot
	compact  uint64
}

type modelState struct {
	state  State
	writes int
}

func (l modelLog) last() uint64 { return l.base + uint64(len(l.entries)) }

func (l modelLog) clone() modelLog {
	l.entries = slices.Clone(l.entries)
	return l
}

// entry returns the entry at index, which the log holds.
func (l modelLog) entry(index uint64) Entry { return l.entries[index-l.base-1] }

// nextOffset is the offset the next data entry takes.
func (l modelLog) nextOffset() uint64 { return nextOffsetAfter(l.entries, l.baseOffset) }

// offsetBefore is the offset a data entry at index takes.
func (l modelLog) offsetBefore(index uint64) uint64 {
	return nextOffsetAfter(l.entries[:index-l.base-1], l.baseOffset)
}

func (l *modelLog) apply(w modelWrite) {
	switch {
	case w.snapshot != nil:
		*l = modelLog{base: w.snapshot.Index, baseTerm: w.snapshot.Term, baseOffset: w.snapshot.NextOffset, floor: w.snapshot.Index,
			baseConfig: w.snapshot.Config, baseData: w.snapshot.Data}
	case w.compact != 0:
		l.floor = max(l.floor, w.compact)
	default:
		first := w.entries[0].Index
		l.entries = append(l.entries[:first-l.base-1:first-l.base-1], w.entries...)
	}
}

// partial lists what a crash in the middle of w may leave of l, w not
// applied and w applied included.
func (l modelLog) partial(w modelWrite) []modelLog {
	applied := l.clone()
	applied.apply(w)
	out := []modelLog{l, applied}
	if w.snapshot != nil || w.compact != 0 {
		return out
	}
	first := w.entries[0].Index
	for cut := first; cut <= l.last(); cut++ {
		kept := l.clone()
		kept.entries = kept.entries[:cut-l.base-1]
		out = append(out, kept)
	}
	for q := range w.entries {
		kept := l.clone()
		kept.apply(modelWrite{entries: w.entries[:q+1]})
		out = append(out, kept)
	}
	return out
}

func newJournalModel() *journalModel { return &journalModel{} }

func (m *journalModel) write(w modelWrite) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.entries != nil {
		w.entries = slices.Clone(w.entries)
	}
	m.current.apply(w)
	m.pending = append(m.pending, w)
}

func (m *journalModel) appendEntries(entries []Entry) { m.write(modelWrite{entries: entries}) }

func (m *journalModel) installSnapshot(s Snapshot) { m.write(modelWrite{snapshot: &s}) }

func (m *journalModel) compact(index uint64) {
	m.mu.Lock()
	current := m.current
	m.mu.Unlock()
	if index > current.base && index <= current.last() {
		m.write(modelWrite{compact: index})
	}
}

// copy returns a copy of the model for checking a crash image.
func (m *journalModel) copy() *journalModel {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &journalModel{durable: m.durable.clone(), durableState: m.durableState, current: m.current.clone(),
		state: m.state, pending: slices.Clone(m.pending), states: slices.Clone(m.states)}
}

func (m *journalModel) saveState(s State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = s
	m.states = append(m.states, modelState{state: s, writes: len(m.pending)})
}

func (m *journalModel) synced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.durable = m.current.clone()
	if n := len(m.states); n > 0 {
		m.durableState = m.states[n-1].state
	}
	m.pending, m.states = nil, nil
}

// recovered is what a reopened journal shows.
type recovered struct {
	state       State
	snapshot    Snapshot
	first, last uint64
	entries     []Entry
}

func recoverView(t testing.TB, j Journal, label string) recovered {
	t.Helper()
	state, snapshot, err := j.Load()
	if err != nil {
		t.Fatalf("%s: load: %v", label, err)
	}
	r := recovered{state: state, snapshot: snapshot, first: j.FirstIndex(), last: j.LastIndex()}
	if r.first <= r.last {
		if r.entries, err = j.Entries(r.first, r.last+1, 1<<40); err != nil {
			t.Fatalf("%s: entries [%d, %d]: %v", label, r.first, r.last, err)
		}
	}
	return r
}

// check fails t unless r is a state a crash may leave. Retention only
// drops committed entries, which no lost write touches, so a compaction
// may survive a crash that loses writes made before it.
func (m *journalModel) check(t testing.TB, r recovered, label string) {
	t.Helper()
	log := m.durable.clone()
	compacted := uint64(0)
	for _, w := range m.pending {
		compacted = max(compacted, w.compact)
	}
	var reasons []string
	for done := 0; done <= len(m.pending); done++ {
		variants := []modelLog{log}
		if done < len(m.pending) {
			variants = log.partial(m.pending[done])
		}
		for _, v := range variants {
			if compacted > v.base && compacted <= v.last() {
				v.floor = max(v.floor, compacted)
			}
			reason := v.matches(r)
			if reason == "" {
				reason = m.stateMatches(r.state, done, v)
			}
			if reason == "" {
				return
			}
			reasons = append(reasons, fmt.Sprintf("after %d writes: %s", done, reason))
		}
		if done < len(m.pending) {
			log.apply(m.pending[done])
		}
	}
	t.Fatalf("%s: recovered first %d last %d state %+v snapshot %d/%d matches no crash outcome:\n%s",
		label, r.first, r.last, r.state, r.snapshot.Index, r.snapshot.Term, reasonsSample(reasons))
}

func reasonsSample(reasons []string) string {
	if len(reasons) > 12 {
		reasons = append(reasons[:12], fmt.Sprintf("... %d more", len(reasons)-12))
	}
	var b bytes.Buffer
	for _, r := range reasons {
		b.WriteString("  " + r + "\n")
	}
	return b.String()
}

// matches says why r is not l, or "" when it is.
func (l modelLog) matches(r recovered) string {
	switch {
	case r.last != l.last():
		return fmt.Sprintf("last %d, model %d", r.last, l.last())
	case r.first < l.base+1 || r.first > max(l.floor, l.base)+1:
		return fmt.Sprintf("first %d outside [%d, %d]", r.first, l.base+1, max(l.floor, l.base)+1)
	case r.snapshot.Index != r.first-1:
		return fmt.Sprintf("snapshot point %d, first %d", r.snapshot.Index, r.first)
	}
	wantTerm := l.baseTerm
	if r.snapshot.Index > l.base {
		wantTerm = l.entry(r.snapshot.Index).Term
	}
	if r.snapshot.Term != wantTerm {
		return fmt.Sprintf("snapshot term %d, model %d", r.snapshot.Term, wantTerm)
	}
	if !bytes.Equal(r.snapshot.Data, l.baseData) || fmt.Sprint(r.snapshot.Config) != fmt.Sprint(l.baseConfig) {
		return fmt.Sprintf("snapshot data %q config %v, model %q %v", r.snapshot.Data, r.snapshot.Config, l.baseData, l.baseConfig)
	}
	for i, got := range r.entries {
		want := l.entry(r.first + uint64(i))
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
			(got.Data == nil) != (len(want.Data) == 0) {
			return fmt.Sprintf("entry %d differs (term %d/%d, %d/%d bytes)", want.Index, got.Term, want.Term, len(got.Data), len(want.Data))
		}
	}
	return ""
}

// stateMatches says why state is not one a crash after done writes may
// leave with v, or "".
func (m *journalModel) stateMatches(state State, done int, v modelLog) string {
	want := m.durableState
	want.Commit = max(want.Commit, v.base)
	if fmt.Sprint(state) == fmt.Sprint(want) {
		return ""
	}
	for _, s := range m.states {
		want := s.state
		want.Commit = max(want.Commit, v.base)
		if s.writes <= done && fmt.Sprint(state) == fmt.Sprint(want) {
			return ""
		}
	}
	return fmt.Sprintf("state %+v, synced %+v", state, m.durableState)
}
