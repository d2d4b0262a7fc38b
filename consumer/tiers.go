package consumer

import (
	"errors"
	"fmt"
	"io"

	"github.com/ironbus/ironbus/segment"
)

// Broadcast and streaming groups hold no per-record state: a broadcast
// group is one reader advancing a cursor with cumulative acks; a
// streaming group only stores the position its consumer commits.

// fetchBroadcast hands the next records to the group's one reader. A
// second reader is refused until the first is released.
func (g *Group) fetchBroadcast(owner uint64, limit, maxBytes int) ([]Delivery, []Gap, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, nil, ErrClosed
	}
	if g.reading != 0 && g.reading != owner {
		return nil, nil, fmt.Errorf("%w: group %s is read by %d", ErrBroadcastBusy, g.name, g.reading)
	}
	g.reading = owner
	g.members[owner] = struct{}{}
	for {
		end, ok := g.done.contains(g.next)
		if !ok {
			break
		}
		g.next = end
	}
	deliveries, gaps, next, err := readRun(g.readerAtLocked(g.next), limit, maxBytes)
	for _, gap := range gaps {
		if gap.To > g.committed {
			g.done.add(max(gap.From, g.committed), gap.To)
		}
	}
	for i := range deliveries {
		deliveries[i].Attempt = 1
		if deliveries[i].Offset < g.highWater {
			deliveries[i].Attempt, deliveries[i].Redelivered = 2, true
			g.stats.Redelivered++
		}
	}
	g.stats.Delivered += uint64(len(deliveries))
	g.next = next
	g.highWater = max(g.highWater, next)
	g.advanceLocked()
	return deliveries, gaps, err
}

// CumulativeAck marks every offset below upTo done in a broadcast group.
// It is idempotent and monotonic: an older upTo changes nothing; one past
// what the reader was given is refused.
func (g *Group) CumulativeAck(upTo uint64) error {
	if g.kind != TypeBroadcast {
		return fmt.Errorf("%w: CumulativeAck on %s group %s", ErrWrongType, g.kind, g.name)
	}
	return g.moveCursor(upTo, func() uint64 { return g.highWater })
}

// Commit stores a streaming group's position: every offset below offset
// is done. It is idempotent and monotonic; an offset past the log's
// committed end is refused.
func (g *Group) Commit(offset uint64) error {
	if g.kind != TypeStreaming {
		return fmt.Errorf("%w: Commit on %s group %s", ErrWrongType, g.kind, g.name)
	}
	return g.moveCursor(offset, g.log.Committed)
}

// moveCursor advances the cursor to upTo (bounded by limit) and
// checkpoints every CheckpointEvery calls.
func (g *Group) moveCursor(upTo uint64, limit func() uint64) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	if bound := limit(); upTo > bound {
		g.mu.Unlock()
		return fmt.Errorf("%w: group %s: %d is past %d", ErrOutOfRange, g.name, upTo, bound)
	}
	if upTo > g.committed {
		g.stats.Acked += upTo - g.committed
		g.committed = g.done.advance(upTo) // also drops gap spans the cursor passed
		g.next = max(g.next, g.committed)
		g.dirty = true
		g.acksSince++
	}
	due := g.checkpointDueLocked()
	g.mu.Unlock()
	if due {
		return g.checkpointWhenDue()
	}
	return nil
}

// Read returns up to max records (about maxBytes; at least one) from
// offset from, for a streaming group's consumer, which manages its own
// position and commits it with Commit. Nothing is leased or remembered.
// Gaps in the range come back merged, one per removal. filter, when the
// group has none of its own, skips records whose subject it does not
// match (they come back as GapFiltered gaps); nil reads every record.
func (g *Group) Read(from uint64, max, maxBytes int, filter Matcher) ([]Delivery, []Gap, error) {
	reader := filteredReader(g.log, from, g.matcher(filter))
	defer reader.Close()
	deliveries, gaps, _, err := readRun(reader, max, maxBytes)
	return deliveries, gaps, err
}

// readRun reads a contiguous run of records from reader: up to max (at
// least one) and about maxBytes. It returns the offset after the run.
func readRun(reader *segment.Reader, limit, maxBytes int) ([]Delivery, []Gap, uint64, error) {
	var deliveries []Delivery
	var gaps []Gap
	bytes := 0
	for len(deliveries) < max(limit, 1) && (len(deliveries) == 0 || bytes < maxBytes) {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return deliveries, gaps, reader.Offset(), err
		}
		if entry.Gap != nil {
			gaps = addGap(gaps, Gap{From: entry.Gap.From, To: entry.Gap.To, Reason: entry.Gap.Reason})
			continue
		}
		deliveries = append(deliveries, Delivery{Offset: entry.Offset, Attempt: 1, Timestamp: entry.Timestamp,
			BodyCRC: entry.BodyCRC, Body: append([]byte(nil), entry.Body...)})
		bytes += len(entry.Body)
	}
	return deliveries, gaps, reader.Offset(), nil
}
