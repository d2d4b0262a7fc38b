package consumer

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/segment"
)

// Operator actions on a group: a summary of its live state, a reset of
// its cursor and its deletion. Reset and delete are refused while the
// group has members, because a member holds leases and read positions
// the change would silently void; the operator stops the consumers first.

// Summary returns the group's live figures, the same ones InspectGroup
// reads from a checkpoint, plus its members and leases.
func (g *Group) Summary() Summary {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.stateLocked()
	summary := Summary{Name: g.name, Type: g.kind, Committed: g.committed, Unsettled: g.unsettledLocked(),
		PendingMoves: len(g.moves), Members: len(g.members), Leased: len(g.leases)}
	for _, span := range st.Done {
		summary.AckedAhead += span.To - span.From
	}
	for _, count := range st.Counts {
		summary.MostDeliveries = max(summary.MostDeliveries, count.Deliveries)
	}
	return summary
}

// Reset moves the group's cursor to start (resolved against what the log
// holds now) and forgets everything above the old cursor: acked-ahead
// ranges, delivery counts and dead-letter moves not yet running. The new
// state is checkpointed before Reset returns. It fails with
// ErrGroupActive while the group has members or a dead-letter move runs.
func (g *Group) Reset(start StartPosition) error {
	g.checkpointMu.Lock()
	defer g.checkpointMu.Unlock()
	g.mu.Lock()
	if err := g.idleLocked(); err != nil {
		g.mu.Unlock()
		return err
	}
	offset, err := g.startOffset(start)
	if err != nil {
		g.mu.Unlock()
		return fmt.Errorf("consumer: group %s: reset: %w", g.name, err)
	}
	g.closeReaderLocked()
	g.start = start
	g.next, g.committed, g.highWater, g.reading = offset, offset, offset, 0
	g.done = spanSet{}
	g.leases, g.pending, g.restored, g.moves = map[uint64]*lease{}, map[uint64]*pendingRecord{}, map[uint64]uint32{}, map[uint64]*move{}
	g.deadlines, g.due = nil, nil
	g.keys = keyRouter{keys: map[uint64]*keyState{}}
	data := encodeState(nil, g.stateLocked())
	g.dirty, g.acksSince = false, 0
	g.mu.Unlock()
	if err := g.log.WriteCheckpoint(checkpointPrefix+g.name, data); err != nil {
		g.mu.Lock()
		g.dirty = true
		g.mu.Unlock()
		return fmt.Errorf("consumer: group %s: reset checkpoint: %w", g.name, err)
	}
	return nil
}

// Delete closes the group and removes its checkpoint: the next Open of
// its name creates it afresh. It fails with ErrGroupActive while the
// group has members or a dead-letter move runs; the group stays usable
// then.
func (g *Group) Delete() error {
	g.checkpointMu.Lock()
	defer g.checkpointMu.Unlock()
	g.mu.Lock()
	if err := g.idleLocked(); err != nil {
		g.mu.Unlock()
		return err
	}
	g.closed = true
	g.closeReaderLocked()
	g.mu.Unlock()
	g.markCreated() // nobody waits on a deleted group
	err := g.log.DeleteCheckpoint(checkpointPrefix + g.name)
	if err != nil && !errors.Is(err, segment.ErrNotFound) {
		return fmt.Errorf("consumer: group %s: delete: %w", g.name, err)
	}
	return nil
}

// idleLocked refuses a reset or delete while anyone acts on the group.
// REQUIRES: g.mu held.
func (g *Group) idleLocked() error {
	if g.closed {
		return ErrClosed
	}
	if len(g.members) > 0 {
		return fmt.Errorf("%w: group %s has %d live consumer(s); stop them first", ErrGroupActive, g.name, len(g.members))
	}
	for _, m := range g.moves {
		if m.running {
			return fmt.Errorf("%w: group %s is moving offset %d to the dead-letter queue; try again shortly", ErrGroupActive, g.name, m.offset)
		}
	}
	return nil
}

// DeleteGroup removes the checkpoint of a group that is not open (an
// offline tool, or a broker that never loaded it); ErrNoGroup when log
// has none by that name.
func DeleteGroup(log *segment.Log, name string) error {
	err := log.DeleteCheckpoint(checkpointPrefix + name)
	if errors.Is(err, segment.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNoGroup, name)
	}
	if err != nil {
		return fmt.Errorf("consumer: group %s: delete: %w", name, err)
	}
	return nil
}
