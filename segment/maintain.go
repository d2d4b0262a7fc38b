package segment

import (
	"fmt"
	"path"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// validateSealed runs the one-time full scan of a sealed segment on its
// first read. Damage it finds is reported as a runtime loss event, turned
// into holes readers skip, and (when the log is writable) quarantined and
// covered with skip frames so the next scan sees a known gap.
func (l *Log) validateSealed(seg *segment) error {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	defer l.open.touch(seg)
	damages, err := seg.ensureValidated(l.opts.MaxRecordBytes)
	if err != nil || len(damages) == 0 {
		return err
	}
	var repair func(*segment, damage, *LossEvent) error
	if l.writableForRepair() {
		repair = l.repairSealed
	}
	seg.addHoles(l.recordDamage(seg, damages, "damage found reading a sealed segment", repair))
	l.dir.reportRuntimeDamage(l)
	return nil
}

// recordDamage turns damage found on a first read into runtime loss
// events (logged as what) and the holes readers skip; repair, when not
// nil, quarantines each region and covers it with a skip frame first.
func (l *Log) recordDamage(seg *segment, damages []damage, what string, repair func(*segment, damage, *LossEvent) error) []hole {
	holes := make([]hole, 0, len(damages))
	for _, d := range damages {
		ev := newEvent(d.Reason, seg.name, d.Start, d.End, d.FirstLost, d.LostCount, d.Detail)
		holes = append(holes, hole{First: d.FirstLost, Count: d.LostCount, Start: d.Start, End: d.End, Reason: d.Reason})
		if repair != nil {
			if err := repair(seg, d, &ev); err != nil {
				l.opts.Logger.Error("could not quarantine damage", "log", l.id.String(), "segment", seg.name, "error", err.Error())
			}
		}
		l.runtimeMu.Lock()
		l.runtimeEvents = append(l.runtimeEvents, ev)
		l.runtimeMu.Unlock()
		l.opts.Logger.Error(what, "log", l.id.String(), "segment", seg.name,
			"reason", ev.Reason.String(), "bytes", ev.Bytes, "records", ev.Records,
			"first_offset", ev.FirstOffset, "last_offset", ev.LastOffset, "applied", ev.Applied, "detail", ev.Detail)
	}
	return holes
}

func (l *Log) writableForRepair() bool {
	return !l.opts.ReadOnly && l.Err() == nil
}

// repairSealed copies a damaged region of a sealed segment to quarantine
// and writes a skip frame over its start.
func (l *Log) repairSealed(seg *segment, d damage, ev *LossEvent) error {
	seg.mu.Lock()
	data, err := seg.mappedLocked()
	seg.mu.Unlock()
	if err != nil {
		return err
	}
	return l.coverDamage(seg, d, data[d.Start:d.End], ev)
}

// coverDamage copies the damaged bytes of a region to quarantine and
// writes a skip frame over its start, synced.
func (l *Log) coverDamage(seg *segment, d damage, damaged []byte, ev *LossEvent) error {
	quarantined, err := l.dir.quarantine(l.id, fmt.Sprintf("%s.%d-%d", seg.name, d.Start, d.End), damaged)
	if err != nil {
		return err
	}
	ev.Quarantine = quarantined
	if d.End-d.Start < format.SkipFrameSize {
		return nil
	}
	file, err := l.fs.OpenFile(path.Join(l.path, seg.name), vfs.ReadWrite)
	if err != nil {
		return err
	}
	defer file.Close()
	skip := format.AppendSkip(nil, format.Skip{Token: seg.header.Token, Length: uint32(d.End - d.Start),
		FirstLost: d.FirstLost, LostCount: d.LostCount, ReasonCode: uint32(d.Reason)})
	if _, err := file.WriteAt(skip, d.Start); err != nil {
		return err
	}
	if err := file.SyncData(); err != nil {
		return err
	}
	ev.Applied = true
	return nil
}

// Validate scans every segment not yet scanned (what `ironbus verify`
// does): sealed ones, and the part of the active one a clean-stop marker
// vouched for. It returns the log's report with everything found.
func (l *Log) Validate() (LogReport, error) {
	for _, seg := range l.segments.Load().segments {
		if !seg.tryAcquire() {
			continue
		}
		var err error
		switch {
		case seg.sealed.Load():
			err = l.validateSealed(seg)
		case seg.trustPending.Load():
			err = l.validateTrusted(seg)
		}
		seg.release()
		if err != nil {
			return l.Report(), err
		}
	}
	return l.Report(), nil
}

// DeleteBefore removes whole sealed segments every offset of which is below
// floor, oldest first, never the newest segment. Each removal is made
// durable (directory sync) before the next, so a crash leaves a suffix of
// the log. Readers still holding a removed segment finish with it first.
// A replica's Raft log refuses (ErrReplicated): its retention is the
// replica's (RaftLog.CompactTo), by Raft index.
func (l *Log) DeleteBefore(floor uint64) (int, error) {
	if l.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	l.mu.Lock()
	replicated := l.mu.replicated
	l.mu.Unlock()
	if replicated {
		return 0, ErrReplicated
	}
	l.setMu.Lock()
	defer l.setMu.Unlock()
	deleted := 0
	for {
		set := l.segments.Load()
		if len(set.segments) < 2 {
			return deleted, nil
		}
		seg := set.segments[0]
		if !seg.sealed.Load() || seg.next() > floor {
			return deleted, nil
		}
		l.segments.Store(set.without(seg))
		l.open.forget(seg)
		if err := l.fs.Remove(seg.path); err != nil {
			return deleted, fmt.Errorf("retention: removing %s: %w", seg.name, err)
		}
		if err := l.fs.SyncDir(l.path); err != nil {
			return deleted, fmt.Errorf("retention: syncing %s: %w", l.path, err)
		}
		seg.release()
		deleted++
	}
}
