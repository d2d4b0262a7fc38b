package segment

import "github.com/ironbus/ironbus/segment/format"

// Visibility of a replicated log. Readers of a log read up to its
// committed mark. A replicated log's entry is committed when a majority
// of its replicas hold it, which a local sync alone does not show: once
// gated (HideAfter), the mark readers use is published only up to the
// end of the last entry that is both synced here and at or below the
// offset the replica made visible (SetVisible, from its Raft commit). So
// no consumer reads a record that a new leader might cut away.
type visibility struct {
	gated   bool
	visible uint64 // offsets below it are committed
	// written are the ends of entries written since the last sync;
	// synced those synced but not yet visible. Both are in log order and
	// hold at most the entries in flight.
	written []mark
	synced  []mark
}

// noteWritten records the end of an entry just written.
// REQUIRES: the write token held.
func (r *RaftLog) noteWritten(m mark) {
	if r.gated {
		r.written = append(r.written, m)
	}
}

// noteSynced moves the written ends to the synced ones and publishes what
// is visible. REQUIRES: the write token held.
func (r *RaftLog) noteSynced() {
	r.synced = append(r.synced, r.written...)
	r.written = r.written[:0]
	r.publishVisible()
}

// SetVisible makes the offsets below offset readable once they are
// synced: the replica's commit reached them.
func (r *RaftLog) SetVisible(offset uint64) {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if !r.gated || offset <= r.visible {
		return
	}
	r.visible = offset
	r.publishVisible()
}

// publishVisible publishes the end of the last synced entry at or below
// the visible offset. REQUIRES: the write token held.
func (r *RaftLog) publishVisible() {
	last := -1
	for i, m := range r.synced {
		if m.next > r.visible {
			break
		}
		last = i
	}
	if last < 0 {
		return
	}
	r.log.publishSynced(r.synced[last])
	r.synced = append(r.synced[:0], r.synced[last+1:]...)
}

// forgetAfter drops the ends a truncation or reset cut away.
// REQUIRES: the write token held.
func (r *RaftLog) forgetAfter(cut mark) {
	keep := func(ends []mark) []mark {
		kept := ends[:0]
		for _, m := range ends {
			if m.next < cut.next || (m.next == cut.next && !markAfter(&m, &cut)) {
				kept = append(kept, m)
			}
		}
		return kept
	}
	r.written, r.synced = keep(r.written), keep(r.synced)
	r.visible = min(r.visible, cut.next)
}

// HideAfter gates the log's readers: from now on they see only what
// SetVisible allows, and at once no more than the entries up to index
// (the replica's durable commit), even when later ones were recovered
// from disk. Called once, right after OpenRaft, before anyone reads.
func (r *RaftLog) HideAfter(index uint64) {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	r.gated = true
	// What recovery found is published as committed at open; anything
	// written since is in written.
	end := *l.committed.Load()
	l.mu.Lock()
	if written := l.mu.written; written.seg != nil && markAfter(&written, &end) {
		end = written
	}
	l.mu.Unlock()
	cut := end
	if index < r.last {
		span := r.spanOf(index + 1)
		if span == nil {
			return
		}
		pos, offset, err := r.entryAt(span, index+1)
		if err != nil {
			// The segment cannot be walked to the entry (damage, which the
			// replica meets when it reads the entry): hide the whole
			// segment, which the commit makes visible again.
			pos, offset = format.SegmentDataStart, span.seg.base
		}
		cut = mark{next: offset, seg: span.seg, pos: pos}
	}
	r.visible = cut.next
	if markAfter(&end, &cut) {
		// What lies after the commit is durable (recovery found it) but
		// not known to be committed: it becomes visible with the commit.
		r.synced = append(r.synced[:0], end)
		l.lowerCommitted(cut)
	}
}

// lowerCommitted moves the committed mark back to m, before anyone reads.
func (l *Log) lowerCommitted(m mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if committed := l.committed.Load(); markAfter(committed, &m) {
		l.committed.Store(&m)
	}
}
