package consumer

import (
	"container/heap"
	"time"
)

// lease is one grant of a record to a consumer. The token fences every
// later operation: only the current grant's holder can settle or extend
// it. Tokens are 64 random bits (newTokenLocked): a stale holder's token
// equals the current one with probability 2^-64, and another consumer
// cannot guess it.
type lease struct {
	token    uint64
	owner    uint64
	start    time.Time // the attempt began here; MaxLease counts from it
	deadline time.Time
	attempt  uint32
	key      keyRef
}

// pendingRecord is a record waiting to be handed out: nacked with a
// delay, lapsed (expired or released), or parked behind its key.
type pendingRecord struct {
	offset    uint64
	due       time.Time
	attempt   uint32 // deliveries so far
	key       keyRef
	lapsed    uint64 // token of the lease that lapsed into this wait, 0 if none
	heapIndex int
}

// Ack marks the leased record done.
func (g *Group) Ack(offset, token uint64) Status {
	g.mu.Lock()
	status := g.checkLeaseLocked(offset, token)
	if status == StatusOK {
		l := g.leases[offset]
		delete(g.leases, offset)
		g.settleLocked(offset, l.key)
		g.stats.Acked++
	}
	due := g.checkpointDueLocked()
	g.mu.Unlock()
	if due {
		_ = g.checkpointWhenDue()
	}
	return status
}

// Term marks the leased record done without processing it and without
// the dead-letter queue: the consumer decided it is not worth retrying.
func (g *Group) Term(offset, token uint64) Status { return g.Ack(offset, token) }

// AckRange acknowledges every record in [from, to) currently leased to
// owner and returns how many it acked. Records in the range that owner
// does not hold are left alone: the owner's identity fences the batch as
// a token fences one record.
func (g *Group) AckRange(owner, from, to uint64) (acked int) {
	g.mu.Lock()
	now := g.opts.Now()
	settle := func(offset uint64, l *lease) {
		if l.owner != owner || !now.Before(l.deadline) {
			return
		}
		delete(g.leases, offset)
		g.settleLocked(offset, l.key)
		g.stats.Acked++
		acked++
	}
	if to > from && to-from <= uint64(len(g.leases)) {
		for offset := from; offset < to; offset++ {
			if l, ok := g.leases[offset]; ok {
				settle(offset, l)
			}
		}
	} else {
		for offset, l := range g.leases {
			if offset >= from && offset < to {
				settle(offset, l)
			}
		}
	}
	due := g.checkpointDueLocked()
	g.mu.Unlock()
	if due {
		_ = g.checkpointWhenDue()
	}
	return acked
}

// Nack returns the leased record for redelivery after delay; a negative
// delay uses the group's backoff for the record's attempt. Its credit is
// free at once: a record waiting out a delay holds no lease.
func (g *Group) Nack(offset, token uint64, delay time.Duration) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	status := g.checkLeaseLocked(offset, token)
	if status != StatusOK {
		return status
	}
	l := g.leases[offset]
	if delay < 0 {
		delay = g.opts.Backoff[min(int(l.attempt), len(g.opts.Backoff))-1]
	}
	delete(g.leases, offset)
	g.keys.unlease(l.key)
	g.waitLocked(&pendingRecord{offset: offset, due: g.opts.Now().Add(delay), attempt: l.attempt, key: l.key})
	return StatusOK
}

// Extend renews the lease for visibility (the group's by default) from
// now, never past MaxLease from the attempt's start; StatusCapped says
// the cap cut it short. It is the "in progress" signal of a long job.
func (g *Group) Extend(offset, token uint64, visibility time.Duration) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	status := g.checkLeaseLocked(offset, token)
	if status != StatusOK {
		return status
	}
	if visibility <= 0 {
		visibility = g.opts.Visibility
	}
	l := g.leases[offset]
	deadline := g.opts.Now().Add(visibility)
	if limit := l.start.Add(g.opts.MaxLease); deadline.After(limit) {
		deadline, status = limit, StatusCapped
	}
	if deadline.After(l.deadline) {
		l.deadline = deadline
		heap.Push(&g.deadlines, deadlineEntry{deadline: deadline, offset: offset, token: token})
		g.compactDeadlinesLocked()
	}
	return status
}

// newTokenLocked draws a lease token: never 0, which marks "no lease".
// The group's ChaCha8 stream is keyed with 256 bits from crypto/rand when
// it opens, so a consumer that sees its own tokens learns nothing about
// another's (docs/SECURITY.md). REQUIRES: g.mu held.
func (g *Group) newTokenLocked() uint64 {
	for {
		if token := g.tokenMaker.Uint64(); token != 0 {
			return token
		}
	}
}

// checkLeaseLocked says whether token is offset's live lease. A lease
// past its deadline lapses here, so a late ack is refused even before a
// fetch noticed the expiry. REQUIRES: g.mu held.
func (g *Group) checkLeaseLocked(offset, token uint64) Status {
	if l, ok := g.leases[offset]; ok {
		switch {
		case l.token != token:
			return StatusStale
		case !g.opts.Now().Before(l.deadline):
			g.lapseLocked(offset, l, g.opts.Now())
			return StatusExpired
		}
		return StatusOK
	}
	if p, ok := g.pending[offset]; ok {
		if p.lapsed == token && token != 0 {
			return StatusExpired
		}
		return StatusStale
	}
	if _, ok := g.moves[offset]; ok {
		return StatusStale
	}
	return StatusUnknown
}

// lapseLocked ends a lease that expired or whose holder left: the record
// is due again now. REQUIRES: g.mu held.
func (g *Group) lapseLocked(offset uint64, l *lease, now time.Time) {
	delete(g.leases, offset)
	g.keys.unlease(l.key)
	g.waitLocked(&pendingRecord{offset: offset, due: now, attempt: l.attempt, key: l.key, lapsed: l.token})
}

// expireLocked lapses every lease past its deadline. REQUIRES: g.mu held.
func (g *Group) expireLocked(now time.Time) {
	for len(g.deadlines) > 0 && !now.Before(g.deadlines[0].deadline) {
		top := heap.Pop(&g.deadlines).(deadlineEntry)
		if l, ok := g.leases[top.offset]; ok && l.token == top.token && l.deadline.Equal(top.deadline) {
			g.lapseLocked(top.offset, l, now)
		}
	}
}

// earliestLeaseLocked returns the earliest live lease deadline, dropping
// entries that extensions or settlements made stale. REQUIRES: g.mu held.
func (g *Group) earliestLeaseLocked() (time.Time, bool) {
	for len(g.deadlines) > 0 {
		top := g.deadlines[0]
		if l, ok := g.leases[top.offset]; ok && l.token == top.token && l.deadline.Equal(top.deadline) {
			return top.deadline, true
		}
		heap.Pop(&g.deadlines)
	}
	return time.Time{}, false
}

// compactDeadlinesLocked rebuilds the deadline queue when stale entries
// (left by extensions and settlements) outnumber live ones, so its size
// stays a function of MaxInFlight. REQUIRES: g.mu held.
func (g *Group) compactDeadlinesLocked() {
	if len(g.deadlines) <= 2*len(g.leases)+64 {
		return
	}
	live := g.deadlines[:0]
	for _, e := range g.deadlines {
		if l, ok := g.leases[e.offset]; ok && l.token == e.token && l.deadline.Equal(e.deadline) {
			live = append(live, e)
		}
	}
	clear(g.deadlines[len(live):])
	g.deadlines = live
	heap.Init(&g.deadlines)
}

// waitLocked queues a record for (re)delivery. REQUIRES: g.mu held.
func (g *Group) waitLocked(p *pendingRecord) {
	g.pending[p.offset] = p
	heap.Push(&g.due, p)
}

// popDueLocked removes the earliest waiting record. REQUIRES: g.mu held.
func (g *Group) popDueLocked() *pendingRecord {
	p := heap.Pop(&g.due).(*pendingRecord)
	delete(g.pending, p.offset)
	return p
}

// settleLocked records offset as done and advances the cursor.
// REQUIRES: g.mu held.
func (g *Group) settleLocked(offset uint64, key keyRef) {
	g.keys.settle(key, offset)
	delete(g.restored, offset)
	if offset >= g.committed {
		g.done.add(offset, offset+1)
	}
	g.acksSince++
	g.advanceLocked()
	g.dirty = true
}

// advanceLocked moves the cursor over the done spans that reach it.
// REQUIRES: g.mu held.
func (g *Group) advanceLocked() {
	if moved := g.done.advance(g.committed); moved != g.committed {
		g.committed = moved
		g.dirty = true
	}
}

type deadlineEntry struct {
	deadline time.Time
	offset   uint64
	token    uint64
}

// deadlineQueue is a min-heap of lease deadlines. Entries are never
// removed in place: a settled or extended lease leaves a stale entry that
// is recognised (token or deadline differ) and dropped when it surfaces.
type deadlineQueue []deadlineEntry

func (q deadlineQueue) Len() int           { return len(q) }
func (q deadlineQueue) Less(i, j int) bool { return q[i].deadline.Before(q[j].deadline) }
func (q deadlineQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *deadlineQueue) Push(x any)        { *q = append(*q, x.(deadlineEntry)) }
func (q *deadlineQueue) Pop() any {
	old := *q
	item := old[len(old)-1]
	*q = old[:len(old)-1]
	return item
}

// pendingQueue is a min-heap of waiting records by due time, then offset
// (so records due together go out in log order).
type pendingQueue []*pendingRecord

func (q pendingQueue) Len() int { return len(q) }
func (q pendingQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].offset < q[j].offset
}
func (q pendingQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIndex, q[j].heapIndex = i, j
}
func (q *pendingQueue) Push(x any) {
	p := x.(*pendingRecord)
	p.heapIndex = len(*q)
	*q = append(*q, p)
}
func (q *pendingQueue) Pop() any {
	old := *q
	item := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return item
}
