package replica

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

var errPowerCut = fmt.Errorf("%w: power cut", vfs.ErrInjected)

// powerCut cuts the power at the crashAt-th mutating file operation: it
// takes the crash image there, and every operation fails from then on.
type powerCut struct {
	mem     *vfs.MemFS
	crashAt int64
	opts    vfs.CrashOptions

	ops     atomic.Int64
	crashed atomic.Bool
	model   *journalModel
	mu      sync.Mutex // held while the image is taken
	// image and atCrash are taken at the cut: the model first, so
	// whatever it says was synced was synced before the image.
	image   *vfs.MemFS
	atCrash *journalModel
}

func (p *powerCut) injector(op vfs.Op) error {
	if p.crashed.Load() {
		return errPowerCut
	}
	if !op.Kind.IsMutation() || p.ops.Add(1)-1 != p.crashAt {
		return nil
	}
	// Every later operation fails from here on; one already past the
	// injector lands before or after the image, as it would in a power
	// cut, and the model is copied before the image.
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashed.Store(true)
	p.atCrash = p.model.copy()
	p.image = p.mem.CrashClone(p.opts)
	return errPowerCut
}

// taken returns the image and the model copied at the cut, once whole.
func (p *powerCut) taken() (*vfs.MemFS, *journalModel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.image, p.atCrash
}

// journalWorkload appends, syncs, saves states, replaces suffixes above
// the commit, compacts and installs a snapshot, recording each write in
// the model before it is made (a write cut by the crash may land in
// part). It stops at the first error.
func journalWorkload(j Journal, m *journalModel, seed uint64, steps int) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	term, commit := uint64(1), uint64(0)
	source := entrySource{}
	for step := range steps {
		last := m.current.last()
		switch {
		case step%7 == 6 && last > commit+1:
			cut := commit + 2 + uint64(rng.IntN(int(last-commit-1)))
			term++
			source.next = m.current.offsetBefore(cut)
			var entries []Entry
			for i := range 1 + rng.IntN(4) {
				entries = append(entries, source.entry(rng, cut+uint64(i), term))
			}
			m.appendEntries(entries)
			if err := j.Append(entries); err != nil {
				return err
			}
		case step == steps/2:
			term++
			s := Snapshot{Index: last + 3, Term: term, NextOffset: m.current.nextOffset() + 50,
				Config: Membership{Voters: []ReplicaID{NewReplicaID(1, 1)}}, Data: []byte("tables")}
			m.installSnapshot(s)
			if err := j.InstallSnapshot(s); err != nil {
				return err
			}
			source.next, commit = s.NextOffset, s.Index
		case step%5 == 4 && commit > m.current.base:
			m.compact(commit)
			start := Snapshot{Index: commit, Config: m.current.baseConfig, Data: m.current.baseData}
			if _, err := j.Compact(start, 0); err != nil {
				return err
			}
		default:
			source.next = m.current.nextOffset()
			var entries []Entry
			for i := range 1 + rng.IntN(3) {
				entries = append(entries, source.entry(rng, last+1+uint64(i), term))
			}
			m.appendEntries(entries)
			if err := j.Append(entries); err != nil {
				return err
			}
		}
		if rng.IntN(3) > 0 {
			// Commit what the last sync made durable, at most.
			commit = max(commit, min(m.durable.last(), commit+uint64(rng.IntN(4))))
			s := State{Term: term, Vote: NewReplicaID(uint32(1+rng.IntN(3)), 1), Commit: commit, ConfigIndex: commit / 2}
			m.saveState(s)
			if err := j.SaveState(s); err != nil {
				return err
			}
		}
		if err := j.Sync(); err != nil {
			return err
		}
		m.synced()
	}
	return nil
}

// TestSegmentJournalCrashEveryWrite cuts the power at every mutating file
// operation of the workload in turn, reopens what a crash leaves and
// checks it against the model: every synced entry back byte for byte,
// nothing invented, the state a synced one or one whose entries
// survived.
func TestSegmentJournalCrashEveryWrite(t *testing.T) {
	steps := 40
	if testing.Short() {
		steps = 16
	}
	for _, run := range []struct {
		keep float64
		mode segment.IOMode
	}{{0, segment.IOBuffered}, {0.5, segment.IOBuffered}, {0.5, segment.IODirect}} {
		keep := run.keep
		t.Run(fmt.Sprint("keep=", keep, ",", run.mode), func(t *testing.T) {
			for k := int64(0); ; k++ {
				model := newJournalModel()
				p := &powerCut{mem: vfs.NewMemFS(), crashAt: k, model: model,
					opts: vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: keep, Reorder: keep > 0, Tear: keep > 0}}
				fsys := vfs.Inject(p.mem, vfs.InjectorFunc(p.injector))
				opts := journalOptions(uint64(k))
				opts.IOMode = run.mode
				if j, err := openJournalWith(fsys, opts); err == nil {
					_ = journalWorkload(j, model, 7, steps)
					j.close()
				}
				if !p.crashed.Load() {
					t.Logf("%d crash points checked", k)
					return
				}
				label := fmt.Sprintf("crash at write %d", k)
				image, atCrash := p.taken()
				opts = journalOptions(1)
				opts.IOMode = run.mode
				j, err := openJournalWith(image, opts)
				if err != nil {
					t.Fatalf("%s: reopen: %v", label, err)
				}
				if report := j.log.Report(); report.HasDataLoss() {
					t.Fatalf("%s: a crash alone lost data: %+v", label, report)
				}
				view := recoverView(t, j, label)
				atCrash.check(t, view, label)
				j.close()
			}
		})
	}
}
