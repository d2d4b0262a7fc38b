package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// RepairCheckpoints rewrites every damaged checkpoint of the log from its
// intact previous copy (what a reader falls back to anyway), and every
// checkpoint left with its previous copy only, crash-safely:
// the damaged file is quarantined and removed first, so a crash leaves
// the previous copy as the checkpoint, then the copy's data is written as
// the checkpoint again. A checkpoint with no intact copy is left alone
// (quarantined and reported): its owner decides where to resume, and
// removing it would let a group be created afresh at a later position.
// It returns the events of every damaged checkpoint.
func (l *Log) RepairCheckpoints() ([]LossEvent, error) {
	if l.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	names, err := l.Checkpoints()
	if err != nil {
		return nil, err
	}
	l.runtimeMu.Lock()
	seen := len(l.runtimeEvents)
	l.runtimeMu.Unlock()
	for _, name := range names {
		data, err := l.ReadCheckpoint(name)
		if errors.Is(err, ErrCorruptCheckpoint) {
			continue // no intact copy: reported by ReadCheckpoint
		}
		if err != nil {
			return nil, err
		}
		file := path.Join(l.path, checkpointDirName, name+checkpointSuffix)
		// A fallback may already have removed the damaged file: the
		// previous copy is then the only one, and is written back too.
		if _, statErr := l.fs.Stat(file); statErr == nil && !l.hasNewEventSince(seen) {
			continue
		}
		if err := l.fs.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("segment: repairing checkpoint %s: %w", name, err)
		}
		if err := l.WriteCheckpoint(name, data); err != nil {
			return nil, fmt.Errorf("segment: repairing checkpoint %s: %w", name, err)
		}
		l.runtimeMu.Lock()
		seen = len(l.runtimeEvents)
		l.runtimeMu.Unlock()
	}
	var events []LossEvent
	for _, event := range l.Report().Events {
		if event.Reason == ReasonCorruptCheckpoint {
			events = append(events, event)
		}
	}
	return events, nil
}

func (l *Log) hasNewEventSince(seen int) bool {
	l.runtimeMu.Lock()
	defer l.runtimeMu.Unlock()
	return len(l.runtimeEvents) > seen
}

// reportRuntimeDamage rewrites recovery-report.json with the log's report
// as it stands, damage found since the start included (a sealed segment
// failing its first full read, a damaged checkpoint), so the file accounts
// for every loss of this run, not only the start's.
func (d *Dir) reportRuntimeDamage(l *Log) {
	if d.opts.ReadOnly {
		return
	}
	report := l.Report()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range d.mu.reports {
		if r.Stream == l.id.Stream && r.Partition == l.id.Partition {
			d.mu.reports[i] = report
		}
	}
	if err := d.writeReportLocked(); err != nil {
		d.opts.Logger.Warn("could not write the recovery report", "error", err.Error())
	}
}
