package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestSegmentJournalProperties runs seeded random sequences of journal
// operations (appends, suffix replacements above the commit, states,
// syncs, retention, snapshots, reads, clean reopens and crashes) against
// the model of the contract, which is the in-memory journal's semantics
// with retention allowed to stop at a segment boundary. IRONBUS_SEED
// replays one sequence.
func TestSegmentJournalProperties(t *testing.T) {
	seeds, ops := 40, 80
	if testing.Short() {
		seeds = 8
	}
	if v := os.Getenv("IRONBUS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IRONBUS_SEED=%q: %v", v, err)
		}
		journalProperties(t, seed, ops, true)
		return
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { journalProperties(t, seed, ops, false) })
	}
}

// propertyRun is one sequence: the journal, its file system and the
// model it must follow.
type propertyRun struct {
	t      *testing.T
	rng    *rand.Rand
	mem    *vfs.MemFS
	j      *openedJournal
	model  *journalModel
	term   uint64
	commit uint64 // the durable commit: nothing at or below it is replaced
	step   int
	traced bool
}

func journalProperties(t *testing.T, seed uint64, ops int, traced bool) {
	p := &propertyRun{t: t, rng: rand.New(rand.NewPCG(seed, 99)), mem: vfs.NewMemFS(), model: newJournalModel(), term: 1,
		traced: traced}
	p.j = openJournal(t, p.mem)
	defer func() { p.j.close() }()
	for p.step = range ops {
		switch k := p.rng.IntN(100); {
		case k < 35:
			p.appendEntries()
			p.trace("append")
		case k < 45:
			p.replaceSuffix()
			p.trace("replace")
		case k < 55:
			p.saveState()
			p.trace("state")
		case k < 70:
			p.sync()
			p.trace("sync")
		case k < 75:
			p.compact()
			p.trace("compact")
		case k < 77:
			p.installSnapshot()
			p.trace("snapshot")
		case k < 90:
			p.read()
			p.trace("read")
		case k < 95:
			p.reopen()
			p.trace("reopen")
		default:
			p.crash()
			p.trace("crash")
		}
		p.compare()
	}
}

// trace logs an operation when one sequence is replayed.
func (p *propertyRun) trace(what string) {
	if p.traced {
		p.t.Logf("%d: %s: journal [%d, %d], model base %d floor %d last %d, durable %d, commit %d", p.step, what,
			p.j.FirstIndex(), p.j.LastIndex(), p.model.current.base, p.model.current.floor, p.model.current.last(),
			p.model.durable.last(), p.commit)
	}
}

func (p *propertyRun) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("step %d: "+format, append([]any{p.step}, args...)...)
}

func (p *propertyRun) appendEntries() {
	source := entrySource{next: p.model.current.nextOffset()}
	last := p.model.current.last()
	var entries []Entry
	for i := range 1 + p.rng.IntN(4) {
		entries = append(entries, source.entry(p.rng, last+1+uint64(i), p.term))
	}
	p.model.appendEntries(entries)
	if err := p.j.Append(entries); err != nil {
		p.fatalf("append at %d: %v", last+1, err)
	}
}

func (p *propertyRun) replaceSuffix() {
	last := p.model.current.last()
	low := max(p.commit, p.model.state.Commit, p.model.current.base) + 1
	if last < low {
		return
	}
	cut := low + uint64(p.rng.IntN(int(last-low+1)))
	p.term++
	source := entrySource{next: p.model.current.offsetBefore(cut)}
	var entries []Entry
	for i := range 1 + p.rng.IntN(5) {
		entries = append(entries, source.entry(p.rng, cut+uint64(i), p.term))
	}
	p.model.appendEntries(entries)
	if err := p.j.Append(entries); err != nil {
		p.fatalf("replace from %d: %v", cut, err)
	}
	if p.commit > 0 && p.rng.IntN(4) == 0 {
		// At or below the durable commit the journal refuses.
		bad := []Entry{noopEntry(p.commit, p.term)}
		if err := p.j.Append(bad); !errors.Is(err, ErrCommittedTruncation) && !errors.Is(err, ErrUnavailable) {
			p.fatalf("replacing committed entry %d: %v", p.commit, err)
		}
	}
}

func (p *propertyRun) saveState() {
	// A state may commit what the last sync made durable.
	commit := max(p.model.state.Commit, p.commit)
	if last := min(p.model.durable.last(), p.model.current.last()); last > commit {
		commit += uint64(p.rng.IntN(int(last-commit) + 1))
	}
	s := State{Term: p.term, Vote: NewReplicaID(uint32(1+p.rng.IntN(3)), 2), Commit: commit, ConfigIndex: commit / 3,
		Config: Membership{Voters: []ReplicaID{NewReplicaID(1, 2), NewReplicaID(2, 2)}, AutoLeave: p.rng.IntN(2) == 0}}
	p.model.saveState(s)
	if err := p.j.SaveState(s); err != nil {
		p.fatalf("save state: %v", err)
	}
}

func (p *propertyRun) sync() {
	if err := p.j.Sync(); err != nil {
		p.fatalf("sync: %v", err)
	}
	p.model.synced()
	p.commit = max(p.model.durableState.Commit, p.model.durable.base)
}

func (p *propertyRun) compact() {
	index := p.commit
	if index <= p.model.current.base || index > p.model.current.last() {
		return
	}
	p.model.compact(index)
	// The model keeps the installed snapshot's configuration and data
	// across compactions; the journal keeps what it is given.
	start := Snapshot{Index: index, Config: p.model.current.baseConfig, Data: p.model.current.baseData}
	if _, err := p.j.Compact(start, 0); err != nil {
		p.fatalf("compact %d: %v", index, err)
	}
}

func (p *propertyRun) installSnapshot() {
	p.term++
	s := Snapshot{Index: max(p.model.current.last(), p.model.state.Commit) + 1 + uint64(p.rng.IntN(5)), Term: p.term,
		NextOffset: p.model.current.nextOffset() + uint64(p.rng.IntN(100)),
		Config:     Membership{Voters: []ReplicaID{NewReplicaID(3, 1)}}, Data: []byte(fmt.Sprint("tables ", p.step))}
	p.model.installSnapshot(s)
	if err := p.j.InstallSnapshot(s); err != nil {
		p.fatalf("install snapshot %d: %v", s.Index, err)
	}
	p.commit = s.Index
}

// read compares a random range of entries, with a random byte budget,
// against the model, and the errors just outside the journal.
func (p *propertyRun) read() {
	first, last := p.j.FirstIndex(), p.j.LastIndex()
	if _, err := p.j.Entries(first-1, last+1, 1<<30); first > 1 && !errors.Is(err, ErrCompacted) {
		p.fatalf("Entries below the first %d: %v", first, err)
	}
	if _, err := p.j.Entries(first, last+2, 1<<30); !errors.Is(err, ErrUnavailable) {
		p.fatalf("Entries past the last %d: %v", last, err)
	}
	if first > last {
		return
	}
	lo := first + uint64(p.rng.IntN(int(last-first+1)))
	hi := lo + uint64(p.rng.IntN(int(last-lo+2)))
	budget := uint64(p.rng.IntN(20_000))
	got, err := p.j.Entries(lo, hi, budget)
	if err != nil {
		p.fatalf("Entries(%d, %d): %v", lo, hi, err)
	}
	var size uint64
	want := 0
	for index := lo; index < hi; index++ {
		size += uint64(len(p.model.current.entry(index).Data))
		if want > 0 && size > budget {
			break
		}
		want++
	}
	if len(got) != want {
		p.fatalf("Entries(%d, %d, %d): %d entries, want %d", lo, hi, budget, len(got), want)
	}
	for i, e := range got {
		requireEntry(p.t, e, p.model.current.entry(lo+uint64(i)), fmt.Sprint("step ", p.step))
	}
}

// compare checks the live journal against the model's current log.
func (p *propertyRun) compare() {
	m := p.model.current
	first, last := p.j.FirstIndex(), p.j.LastIndex()
	if last != m.last() || first < m.base+1 || first > max(m.floor, m.base)+1 {
		p.fatalf("first %d last %d; model base %d floor %d last %d", first, last, m.base, m.floor, m.last())
	}
	for index := first - 1; index <= last; index++ {
		want := m.baseTerm
		if index > m.base {
			want = m.entry(index).Term
		}
		if got, err := p.j.Term(index); err != nil || got != want {
			p.fatalf("Term(%d) = %d, %v; want %d", index, got, err, want)
		}
	}
}

// reopen syncs, closes cleanly and reopens: everything is back.
func (p *propertyRun) reopen() {
	p.sync()
	p.j.close()
	p.j = openJournal(p.t, p.mem)
	view := recoverView(p.t, p.j, fmt.Sprint("step ", p.step))
	if reason := p.model.current.matches(view); reason != "" {
		p.fatalf("after a clean reopen: %s", reason)
	}
	if reason := p.model.stateMatches(view.state, 0, p.model.current); reason != "" {
		p.fatalf("after a clean reopen: %s", reason)
	}
}

// crash cuts the power with nothing unsynced surviving, checks the
// recovered journal against the model and goes on from what it holds.
func (p *propertyRun) crash() {
	image := p.mem.CrashClone(vfs.CrashOptions{Seed: uint64(p.step)})
	p.j.close()
	p.mem = image
	p.j = openJournal(p.t, p.mem)
	label := fmt.Sprint("step ", p.step, " crash")
	view := recoverView(p.t, p.j, label)
	p.model.check(p.t, view, label)
	// The model goes on from the recovered journal.
	recovered := modelLog{base: view.snapshot.Index, baseTerm: view.snapshot.Term, baseOffset: view.snapshot.NextOffset,
		floor: view.snapshot.Index, entries: view.entries, baseConfig: view.snapshot.Config, baseData: view.snapshot.Data}
	p.model = &journalModel{durable: recovered.clone(), durableState: view.state, current: recovered, state: view.state}
	p.commit = max(view.state.Commit, view.snapshot.Index)
	p.term = max(p.term, view.state.Term)
}
