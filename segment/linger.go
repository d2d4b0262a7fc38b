package segment

import "time"

// The commit linger (Options.CommitLinger) is for flash that wears by the
// page: every fdatasync of a log rewrites the page its tail is in, so a
// sync per awaited record of 256 B writes a 4 KiB page (and the file
// system's journal block) for each, about 19 device bytes per payload
// byte. Holding the sync of a busy log for a moment lets the records of
// other producers join it, and one page rewrite then covers all of them.
//
// Busy means a round of the log's syncs gathers more than one record
// (Log.roundRecords): its last fdatasync covered several, or records were
// written while it ran. Either shows more than one producer (or a
// pipelining one) writing, with records on their way. A log whose last
// sync covered one record and saw none arrive meanwhile is idle: a lone
// producer with one record in flight sends its next record only after
// this one's ack, so waiting would only delay it. Its records keep the
// inline commit (TryCommitBatch) and the committer syncs them at once,
// exactly as with no linger. The figure is re-learnt at every sync, so a
// log whose producers went away is idle again after one sync.
//
// A round is the larger of what the last sync covered and one more than
// what was written while it ran: two awaited producers whose syncs
// alternate (one inline, one by the committer, each covering one record)
// count as a round of two, and are then synced together. A busy log is
// held until a round's worth of records is written but not yet synced
// (each producer has sent its next one), or until the linger has passed
// since it was queued, whichever comes first. The linger only delays the call to syncLog: what
// a sync covers and when tickets complete is unchanged, so an
// acknowledgement still never precedes the fdatasync that covers it.
// Under DurabilityInterval and DurabilityNone there is no linger (those
// acknowledge before any sync).

// lingers reports whether an append to l should be staged for the
// committer rather than committed inline: the log is busy under a linger.
func (l *Log) lingers() bool {
	return l.dir.committer.linger > 0 && l.roundRecords.Load() > 1
}

// noteRound records the round a sync that made records durable, and
// covered every offset below covered, saw.
func (l *Log) noteRound(records, covered uint64) {
	l.mu.Lock()
	during := l.mu.written.next - min(covered, l.mu.written.next)
	l.mu.Unlock()
	l.roundRecords.Store(max(records, during+1))
}

// noteWrittenLocked keeps the linger's account of a write the appender
// published: when it queued the log, the linger starts; when the log is
// held and now has a round's worth of unsynced records, the committer is
// woken to sync it without waiting out the linger.
// REQUIRES: l.mu held.
func (l *Log) noteWrittenLocked(m mark, queued bool) {
	if queued {
		l.mu.dirtySince = time.Now()
		return
	}
	want, synced := l.roundRecords.Load(), l.syncedNext.Load()
	if want > 1 && m.next > synced && m.next-synced >= want {
		select {
		case l.dir.committer.wake <- struct{}{}:
		default:
		}
	}
}

// lingerDue reports whether the committer should sync l now and, when
// not, until when it may hold it.
func (l *Log) lingerDue(now time.Time, linger time.Duration) (bool, time.Time) {
	want := l.roundRecords.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	if want <= 1 || l.mu.closed || l.mu.failure != nil || l.mu.dirtySince.IsZero() {
		return true, time.Time{}
	}
	deadline := l.mu.dirtySince.Add(linger)
	written, synced := l.mu.written.next, l.syncedNext.Load()
	return (written > synced && written-synced >= want) || !now.Before(deadline), deadline
}

// runLingering is run with a linger: a queued busy log may be held back,
// and a timer brings the committer back when the first held one is due.
func (c *committer) runLingering() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-c.wake:
		case <-timer.C:
		case <-c.stop:
			c.cycle() // the last cycle holds nothing back
			return
		}
		if due := c.lingeringCycle(); !due.IsZero() {
			timer.Reset(max(time.Until(due), 0))
		}
	}
}

// lingeringCycle syncs the queued logs that are due, puts the others back
// in the queue (still dirty: each is queued once) and returns when the
// first of those is due (zero: none held).
func (c *committer) lingeringCycle() (due time.Time) {
	c.mu.Lock()
	logs := c.queue
	c.queue = c.spare[:0]
	c.mu.Unlock()
	now := time.Now()
	ready, held := logs[:0], c.holding[:0]
	for _, l := range logs {
		ok, deadline := l.lingerDue(now, c.linger)
		if ok {
			ready = append(ready, l)
			continue
		}
		if due.IsZero() || deadline.Before(due) {
			due = deadline
		}
		held = append(held, l)
	}
	clear(logs[len(ready):])
	if len(held) > 0 {
		c.held.Add(uint64(len(held)))
		c.mu.Lock()
		c.queue = append(c.queue, held...)
		c.mu.Unlock()
	}
	clear(held)
	c.holding = held[:0]
	c.syncAll(ready)
	return due
}
