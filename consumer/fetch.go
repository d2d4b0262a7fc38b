package consumer

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ironbus/ironbus/segment"
)

// fetch is one Fetch in progress.
type fetch struct {
	owner      uint64
	max        int
	maxBytes   int
	bytes      int
	now        time.Time
	visibility time.Duration
	deliveries []Delivery
	gaps       []Gap
	moves      []*move // records to move to the dead-letter queue after unlocking
	checkpoint bool    // a delivery used the last attempt: persist its count now
}

func (f *fetch) full() bool {
	return len(f.deliveries) >= max(f.max, 1) || (len(f.deliveries) > 0 && f.bytes >= f.maxBytes)
}

// Fetch hands up to max records (and about maxBytes of bodies; at least
// one record whatever its size) to owner, joining owner to the group.
// Work and key-shared groups lease each record for visibility (the
// group's by default), redeliveries first; a broadcast group hands the
// next records to its one reader. Gaps the group crossed are returned
// once, merged. Records that exhausted max-deliver move to the
// dead-letter queue before Fetch returns.
func (g *Group) Fetch(owner uint64, max, maxBytes int, visibility time.Duration) ([]Delivery, []Gap, error) {
	switch g.kind {
	case TypeBroadcast:
		return g.fetchBroadcast(owner, max, maxBytes)
	case TypeStreaming:
		return nil, nil, fmt.Errorf("%w: Fetch on streaming group %s; use Read and Commit", ErrWrongType, g.name)
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, ErrClosed
	}
	if visibility <= 0 {
		visibility = g.opts.Visibility
	}
	f := fetch{owner: owner, max: max, maxBytes: maxBytes, now: g.opts.Now(), visibility: visibility}
	g.members[owner] = struct{}{}
	g.expireLocked(f.now)
	f.moves = g.retryableMovesLocked(f.now)
	err := g.redeliverLocked(&f)
	if err == nil {
		err = g.deliverNewLocked(&f)
	}
	g.mu.Unlock()
	g.runMoves(f.moves)
	if f.checkpoint {
		_ = g.Checkpoint()
	}
	return f.deliveries, f.gaps, err
}

// creditLocked reports whether one more record may be leased.
// REQUIRES: g.mu held.
func (g *Group) creditLocked() bool { return len(g.leases) < g.opts.MaxInFlight }

// redeliverLocked hands out waiting records that are due, in due order.
// A key-shared record that this owner may not take yet is set aside and
// stays waiting. REQUIRES: g.mu held.
func (g *Group) redeliverLocked(f *fetch) error {
	var aside []*pendingRecord
	defer func() {
		for _, p := range aside {
			g.waitLocked(p)
		}
	}()
	for len(g.due) > 0 && !f.full() && g.creditLocked() {
		if g.due[0].due.After(f.now) {
			return nil
		}
		p := g.popDueLocked()
		if !g.keys.deliverable(p.key, p.offset, f.owner, g.members) {
			aside = append(aside, p)
			continue
		}
		entry, err := readOne(g.log, p.offset)
		if gone(entry, err) {
			g.settleLocked(p.offset, p.key) // removed by retention meanwhile
			continue
		}
		if err != nil {
			aside = append(aside, p)
			return err
		}
		if reason := g.poisonLocked(p.attempt, len(entry.Body)); reason != "" {
			f.moves = append(f.moves, g.startMoveLocked(p.offset, p.attempt, reason, p.key))
			continue
		}
		g.leaseLocked(f, entry, p.attempt, p.key)
	}
	return nil
}

// deliverNewLocked reads records the group never read, skipping those
// already done (acked ahead before a restart). It stops at the credit
// limit or when MaxUnsettled records are outstanding, which bounds the
// memory of nacked and parked records. REQUIRES: g.mu held.
func (g *Group) deliverNewLocked(f *fetch) error {
	for !f.full() && g.creditLocked() && g.unsettledLocked() < g.opts.MaxUnsettled {
		if end, ok := g.done.contains(g.next); ok {
			g.next = end
			continue
		}
		entry, err := g.readerAtLocked(g.next).Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if entry.Gap != nil {
			g.crossGapLocked(f, entry.Gap)
			continue
		}
		g.next = entry.Offset + 1
		if _, moving := g.moves[entry.Offset]; moving {
			continue // a dead-letter move restored from the checkpoint owns it
		}
		g.admitLocked(f, entry)
	}
	return nil
}

// admitLocked decides what happens to a record read for the first time
// since the group (re)started: lease it, park it behind its key, or move
// it to the dead-letter queue. REQUIRES: g.mu held.
func (g *Group) admitLocked(f *fetch, entry segment.Entry) {
	attempt := g.restored[entry.Offset]
	delete(g.restored, entry.Offset)
	var key keyRef
	if g.kind == TypeKeyShared {
		key = recordKey(entry.Body)
		g.keys.track(key, entry.Offset)
	}
	if reason := g.poisonLocked(attempt, len(entry.Body)); reason != "" {
		f.moves = append(f.moves, g.startMoveLocked(entry.Offset, attempt, reason, key))
		return
	}
	if !g.keys.deliverable(key, entry.Offset, f.owner, g.members) {
		g.waitLocked(&pendingRecord{offset: entry.Offset, due: f.now, attempt: attempt, key: key})
		return
	}
	g.leaseLocked(f, entry, attempt, key)
}

// crossGapLocked records a gap as done and reports it. REQUIRES: g.mu held.
func (g *Group) crossGapLocked(f *fetch, gap *segment.Gap) {
	f.gaps = addGap(f.gaps, Gap{From: gap.From, To: gap.To, Reason: gap.Reason})
	g.next = max(g.next, gap.To)
	for offset := range g.restored {
		if offset >= gap.From && offset < gap.To {
			delete(g.restored, offset)
		}
	}
	if gap.To > g.committed {
		g.done.add(max(gap.From, g.committed), gap.To)
	}
	g.advanceLocked()
}

// leaseLocked grants the record to the fetching owner. delivered is how
// many times it was delivered before. REQUIRES: g.mu held.
func (g *Group) leaseLocked(f *fetch, entry segment.Entry, delivered uint32, key keyRef) {
	token := g.newTokenLocked()
	attempt := delivered + 1
	deadline := f.now.Add(min(f.visibility, g.opts.MaxLease))
	g.leases[entry.Offset] = &lease{token: token, owner: f.owner, start: f.now, deadline: deadline,
		attempt: attempt, key: key}
	heap.Push(&g.deadlines, deadlineEntry{deadline: deadline, offset: entry.Offset, token: token})
	g.keys.lease(key)
	f.deliveries = append(f.deliveries, Delivery{Offset: entry.Offset, Lease: token, Attempt: attempt,
		Redelivered: delivered > 0, Timestamp: entry.Timestamp, BodyCRC: entry.BodyCRC,
		Body: append([]byte(nil), entry.Body...)})
	f.bytes += len(entry.Body)
	g.stats.Delivered++
	if delivered > 0 {
		g.stats.Redelivered++
	}
	// Every delivery changes a count in the checkpoint, the first one
	// too: a restart must redeliver it as attempt 2, not 1 again.
	g.dirty = true
	if g.opts.DeadLetters != nil && int(attempt) >= g.opts.MaxDeliver {
		f.checkpoint = true // the last attempt: a crash now must not grant another
	}
}

// poisonLocked says why a record must go to the dead-letter queue
// instead of being delivered again, or "". Without a queue nothing is
// poison: a record is never dropped. REQUIRES: g.mu held.
func (g *Group) poisonLocked(delivered uint32, bodyBytes int) string {
	switch {
	case g.opts.DeadLetters == nil:
		return ""
	case int(delivered) >= g.opts.MaxDeliver:
		return ReasonMaxDeliver
	case g.opts.MaxRecordBytes > 0 && bodyBytes > g.opts.MaxRecordBytes:
		return ReasonTooLarge
	}
	return ""
}
