package consumer

import (
	"context"
	"fmt"
	"time"
)

// Dead-letter reasons.
const (
	ReasonMaxDeliver = "max-deliver" // delivered MaxDeliver times without an ack
	ReasonTooLarge   = "too-large"   // larger than any consumer of the group can take
	ReasonRejected   = "rejected"    // the consumer called Reject
)

// deadLetterTimeout bounds one dead-letter append; a queue that cannot
// take the record in that time is retried later, never waited on forever.
const deadLetterTimeout = 30 * time.Second

// deadLetterRetry is how long a failed move waits before it is tried
// again.
const deadLetterRetry = time.Second

// DeadLetter is a record on its way to the dead-letter queue, with where
// it came from and why.
type DeadLetter struct {
	Group     string
	Stream    string
	Partition uint32
	Offset    uint64 // in the source log
	Attempts  uint32 // deliveries before the move
	Reason    string
	Timestamp int64  // the source record's timestamp
	Body      []byte // the source record's body as stored
}

// DeadLetters is a stream's dead-letter queue as a group sees it. The
// caller supplies it (one per source log), so package consumer does not
// know how dead-letter logs are named or opened; NewLogDeadLetters
// implements it over a segment.Log.
type DeadLetters interface {
	// End returns an offset at or below the one the next Append will get.
	End() uint64
	// Append stores letter and returns once it is durable.
	Append(ctx context.Context, letter DeadLetter) error
	// Find reports whether the queue holds, at or after offset from, a
	// dead letter of group's record at source offset of partition.
	Find(from uint64, group string, partition uint32, source uint64) (bool, error)
}

// move is a record on its way to the dead-letter queue. While it exists
// the record is unsettled and nobody can lease it.
type move struct {
	offset   uint64
	attempts uint32
	reason   string
	key      keyRef
	// deadLetterEnd is the queue's End when the move's intent was
	// checkpointed: any dead letter this move appended is at or after it.
	deadLetterEnd uint64
	intent        bool      // deadLetterEnd is set and goes into checkpoints
	mayExist      bool      // an append may have landed: search before appending
	running       bool      // a goroutine is moving it now
	retryAt       time.Time // a failed move is tried again from here
}

// startMoveLocked begins moving offset to the dead-letter queue; the
// caller runs the returned move with g.mu released. REQUIRES: g.mu held.
func (g *Group) startMoveLocked(offset uint64, attempts uint32, reason string, key keyRef) *move {
	m := &move{offset: offset, attempts: attempts, reason: reason, key: key, running: true}
	g.moves[offset] = m
	g.dirty = true
	return m
}

// retryableMovesLocked claims the moves waiting for a retry (failed, or
// restored from a checkpoint) that are due. REQUIRES: g.mu held.
func (g *Group) retryableMovesLocked(now time.Time) []*move {
	var out []*move
	for _, m := range g.moves {
		if !m.running && !now.Before(m.retryAt) {
			m.running = true
			out = append(out, m)
		}
	}
	return out
}

// hasMoveRetryLocked reports whether a move waits for a retry.
// REQUIRES: g.mu held.
func (g *Group) hasMoveRetryLocked() bool {
	for _, m := range g.moves {
		if !m.running {
			return true
		}
	}
	return false
}

// runMoves moves records to the dead-letter queue, crash-safely and at
// most once (see docs/CONSUMERS.md):
//
//  1. checkpoint the intent: each move with the queue's End at this
//     moment (a dead letter it appends can only be at or after it);
//  2. if an earlier attempt may have appended already (a restart, or a
//     failed append), search the queue from that End and skip the append
//     when the dead letter is there;
//  3. append and wait until durable;
//  4. mark the source record done (persisted by the next checkpoint; until
//     then a restart finds the intent and does step 2 again).
func (g *Group) runMoves(moves []*move) {
	if len(moves) == 0 {
		return
	}
	queue := g.opts.DeadLetters
	err := g.checkpoint(checkpointAlways, func() {
		end := queue.End()
		for _, m := range moves {
			if !m.intent {
				m.deadLetterEnd, m.intent = end, true
			}
		}
	})
	for _, m := range moves {
		if err == nil {
			err = g.moveOne(queue, m)
		}
		g.finishMove(m, err)
	}
}

// moveOne performs steps 2 and 3 for one record.
func (g *Group) moveOne(queue DeadLetters, m *move) error {
	entry, err := readOne(g.log, m.offset)
	if gone(entry, err) {
		return nil // retention removed it: nothing left to move
	}
	if err != nil {
		return err
	}
	id := g.log.ID()
	if m.mayExist {
		found, err := queue.Find(m.deadLetterEnd, g.name, id.Partition, m.offset)
		if err != nil || found {
			return err
		}
	}
	m.mayExist = true // from here an append may land even if it reports failure
	ctx, cancel := context.WithTimeout(context.Background(), deadLetterTimeout)
	defer cancel()
	return queue.Append(ctx, DeadLetter{Group: g.name, Stream: id.Stream, Partition: id.Partition,
		Offset: m.offset, Attempts: m.attempts, Reason: m.reason, Timestamp: entry.Timestamp, Body: entry.Body})
}

// finishMove settles a moved record, or schedules a failed move again.
func (g *Group) finishMove(m *move, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m.running = false
	if err != nil {
		m.retryAt = g.opts.Now().Add(deadLetterRetry)
		g.stats.DeadLetterFailures++
		g.stats.LastDeadLetterError = err.Error()
		return
	}
	delete(g.moves, m.offset)
	g.settleLocked(m.offset, m.key)
	g.stats.DeadLettered++
}

// Reject moves the leased record to the dead-letter queue now, whatever
// its delivery count: the consumer found it can never be processed
// (malformed, too large for it). A failed move is retried by later
// fetches; the record is never delivered again either way.
func (g *Group) Reject(offset, token uint64, reason string) (Status, error) {
	g.mu.Lock()
	status := g.checkLeaseLocked(offset, token)
	if status != StatusOK {
		g.mu.Unlock()
		return status, nil
	}
	if g.opts.DeadLetters == nil {
		g.mu.Unlock()
		return StatusStale, fmt.Errorf("%w: group %s cannot reject offset %d", ErrNoDeadLetters, g.name, offset)
	}
	if reason == "" {
		reason = ReasonRejected
	}
	l := g.leases[offset]
	delete(g.leases, offset)
	g.keys.unlease(l.key)
	m := g.startMoveLocked(offset, l.attempt, reason, l.key)
	g.mu.Unlock()
	g.runMoves([]*move{m})
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, failed := g.moves[offset]; failed {
		return StatusOK, fmt.Errorf("consumer: group %s: dead-letter move of offset %d: %s", g.name, offset, g.stats.LastDeadLetterError)
	}
	return StatusOK, nil
}
