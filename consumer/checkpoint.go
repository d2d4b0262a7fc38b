package consumer

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/ironbus/ironbus/subject"
)

// A group's checkpoint is its whole durable state: type, start position,
// cursor, acked-ahead ranges, delivery counts and pending dead-letter
// moves. It is stored through segment.Log.WriteCheckpoint (temporary file,
// sync, rename, sync the directory, CRC'd), so a crash leaves the previous
// version or the new one. docs/CONSUMERS.md gives the layout field by
// field; encodeState and decodeState are its only writer and reader.
const (
	checkpointV1 = 1 // the serve issue's 9 bytes: version, cursor
	checkpointV2 = 2 // the consumers issue's layout: no subject filter
	checkpointV3 = 3 // this layout: version 2 followed by the subject filter
	// maxReasonBytes bounds a dead-letter reason in a checkpoint.
	maxReasonBytes = 255
)

// state is a decoded checkpoint.
type state struct {
	Type      Type
	Start     StartPosition
	Committed uint64
	Done      []Span          // ascending, disjoint, non-adjacent, above Committed
	Counts    []deliveryCount // ascending offsets at or above Committed
	Moves     []moveIntent    // ascending offsets at or above Committed
	Filter    string          // the group's subject pattern; "" = none
}

type deliveryCount struct {
	Offset     uint64
	Deliveries uint32
}

type moveIntent struct {
	Offset        uint64
	DeadLetterEnd uint64
	Attempts      uint32
	Reason        string
}

// encodeState appends the version 3 encoding of st to dst.
func encodeState(dst []byte, st state) []byte {
	dst = append(dst, checkpointV3, byte(st.Type), byte(st.Start.Kind))
	dst = binary.LittleEndian.AppendUint64(dst, st.Start.Offset)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(st.Start.Time))
	dst = binary.LittleEndian.AppendUint64(dst, st.Committed)
	dst = binary.AppendUvarint(dst, uint64(len(st.Done)))
	previous := st.Committed
	for _, span := range st.Done {
		dst = binary.AppendUvarint(dst, span.From-previous)
		dst = binary.AppendUvarint(dst, span.To-span.From)
		previous = span.To
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Counts)))
	previous = st.Committed
	for _, c := range st.Counts {
		dst = binary.AppendUvarint(dst, c.Offset-previous)
		dst = binary.AppendUvarint(dst, uint64(c.Deliveries))
		previous = c.Offset
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Moves)))
	previous = st.Committed
	for _, m := range st.Moves {
		dst = binary.AppendUvarint(dst, m.Offset-previous)
		dst = binary.LittleEndian.AppendUint64(dst, m.DeadLetterEnd)
		dst = binary.AppendUvarint(dst, uint64(m.Attempts))
		dst = append(dst, byte(len(m.Reason)))
		dst = append(dst, m.Reason...)
		previous = m.Offset
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Filter)))
	return append(dst, st.Filter...)
}

// decodeState decodes a checkpoint written by this or an older version.
// Every error wraps ErrCorruptCheckpoint or ErrCheckpointTooNew.
func decodeState(data []byte) (state, error) {
	if len(data) == 0 {
		return state{}, fmt.Errorf("%w: empty", ErrCorruptCheckpoint)
	}
	switch version := data[0]; {
	case version == checkpointV1:
		if len(data) != 9 {
			return state{}, fmt.Errorf("%w: version 1 holds 9 bytes, found %d", ErrCorruptCheckpoint, len(data))
		}
		return state{Type: TypeWork, Committed: binary.LittleEndian.Uint64(data[1:9])}, nil
	case version > checkpointV3:
		return state{}, fmt.Errorf("%w: version %d (this binary knows %d)", ErrCheckpointTooNew, version, checkpointV3)
	case version != checkpointV2 && version != checkpointV3:
		return state{}, fmt.Errorf("%w: version %d", ErrCorruptCheckpoint, version)
	}
	d := decoder{data: data[1:]}
	st := d.header()
	st.Done = d.spans(st.Committed)
	st.Counts = d.counts(st.Committed)
	st.Moves = d.moves(st.Committed)
	if data[0] >= checkpointV3 {
		st.Filter = d.filter() // a version 2 group has none
	}
	if d.err == nil && len(d.data) > 0 {
		d.fail("%d trailing bytes", len(d.data))
	}
	return st, d.err
}

// decoder reads checkpoint fields, remembering the first error; after an
// error every read returns zero values.
type decoder struct {
	data []byte
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorruptCheckpoint}, args...)...)
	}
	d.data = nil
}

func (d *decoder) byte() byte {
	if len(d.data) < 1 {
		d.fail("truncated")
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return b
}

func (d *decoder) uint64() uint64 {
	if len(d.data) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.data)
	d.data = d.data[8:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.data)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.data = d.data[n:]
	return v
}

// count reads a list length, refusing one the remaining bytes cannot
// hold (each entry takes at least minBytes): a corrupt length must not
// drive an allocation.
func (d *decoder) count(minBytes int) int {
	n := d.uvarint()
	if n > uint64(len(d.data)/minBytes) {
		d.fail("list of %d entries in %d bytes", n, len(d.data))
		return 0
	}
	return int(n)
}

// after returns base+delta, failing on overflow.
func (d *decoder) after(base, delta uint64) uint64 {
	if delta > math.MaxUint64-base {
		d.fail("offset overflows")
		return 0
	}
	return base + delta
}

func (d *decoder) header() state {
	st := state{Type: Type(d.byte())}
	st.Start.Kind = StartKind(d.byte())
	st.Start.Offset = d.uint64()
	st.Start.Time = int64(d.uint64())
	st.Committed = d.uint64()
	if d.err == nil && !st.Type.valid() {
		d.fail("group type %d", st.Type)
	}
	if d.err == nil && st.Start.Kind > StartTime {
		d.fail("start kind %d", st.Start.Kind)
	}
	return st
}

func (d *decoder) spans(committed uint64) []Span {
	n := d.count(2)
	spans := make([]Span, 0, n)
	previous := committed
	for i := 0; i < n && d.err == nil; i++ {
		gap, length := d.uvarint(), d.uvarint()
		if i > 0 && gap == 0 {
			d.fail("span %d touches the one before it", i)
		}
		if length == 0 {
			d.fail("span %d is empty", i)
		}
		from := d.after(previous, gap)
		to := d.after(from, length)
		spans = append(spans, Span{From: from, To: to})
		previous = to
	}
	return spans
}

func (d *decoder) counts(committed uint64) []deliveryCount {
	n := d.count(2)
	counts := make([]deliveryCount, 0, n)
	previous := committed
	for i := 0; i < n && d.err == nil; i++ {
		delta, deliveries := d.uvarint(), d.uvarint()
		if i > 0 && delta == 0 {
			d.fail("delivery count %d repeats an offset", i)
		}
		if deliveries == 0 || deliveries > math.MaxUint32 {
			d.fail("delivery count %d of %d", i, deliveries)
		}
		previous = d.after(previous, delta)
		counts = append(counts, deliveryCount{Offset: previous, Deliveries: uint32(deliveries)})
	}
	return counts
}

func (d *decoder) moves(committed uint64) []moveIntent {
	n := d.count(11)
	moves := make([]moveIntent, 0, n)
	previous := committed
	for i := 0; i < n && d.err == nil; i++ {
		delta := d.uvarint()
		if i > 0 && delta == 0 {
			d.fail("move %d repeats an offset", i)
		}
		m := moveIntent{Offset: d.after(previous, delta), DeadLetterEnd: d.uint64()}
		attempts := d.uvarint()
		if attempts > math.MaxUint32 {
			d.fail("move %d has %d attempts", i, attempts)
		}
		m.Attempts = uint32(attempts)
		length := int(d.byte())
		if length > len(d.data) {
			d.fail("move %d reason of %d bytes", i, length)
			break
		}
		m.Reason, d.data = string(d.data[:length]), d.data[length:]
		moves = append(moves, m)
		previous = m.Offset
	}
	return moves
}

// filter reads the group's subject pattern, refusing one no request
// could have set.
func (d *decoder) filter() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > subject.MaxLength || n > uint64(len(d.data)) {
		d.fail("subject filter of %d bytes", n)
		return ""
	}
	pattern := d.data[:n]
	d.data = d.data[n:]
	if n == 0 {
		return ""
	}
	if err := subject.ValidatePattern(pattern); err != nil {
		d.fail("subject filter: %v", err)
		return ""
	}
	return string(pattern)
}

// checkpointMode says when checkpoint writes.
type checkpointMode uint8

const (
	checkpointIfDirty checkpointMode = iota // the state changed since the last write
	checkpointIfDue                         // CheckpointEvery acks or commits since the last write
	checkpointAlways                        // a dead-letter intent must be durable now
)

// Checkpoint persists the group's state when it changed since the last
// checkpoint.
func (g *Group) Checkpoint() error { return g.checkpoint(checkpointIfDirty, nil) }

// checkpoint writes the state; prepare, when set, runs under g.mu just
// before the snapshot.
func (g *Group) checkpoint(mode checkpointMode, prepare func()) error {
	g.checkpointMu.Lock()
	defer g.checkpointMu.Unlock()
	g.mu.Lock()
	if g.closed {
		// Closed (its last checkpoint written) or deleted (its checkpoint
		// removed): a late writer must not bring it back.
		g.mu.Unlock()
		g.markCreated()
		return nil
	}
	if prepare != nil {
		prepare()
	}
	write := mode == checkpointAlways || (g.dirty && (mode == checkpointIfDirty || g.checkpointDueLocked()))
	if !write {
		clean := !g.dirty
		g.mu.Unlock()
		if clean {
			g.markCreated() // written before
		}
		return nil
	}
	defer g.markCreated() // tried: a failure leaves the state dirty for the next one
	data := encodeState(nil, g.stateLocked())
	g.dirty, g.acksSince = false, 0
	g.mu.Unlock()
	if err := g.log.WriteCheckpoint(checkpointPrefix+g.name, data); err != nil {
		g.mu.Lock()
		g.dirty = true
		g.mu.Unlock()
		return fmt.Errorf("consumer: group %s: checkpoint: %w", g.name, err)
	}
	return nil
}

// checkpointWhenDue writes the checkpoint CheckpointEvery acks made due,
// or hands it to the caller's CheckpointDue. REQUIRES: g.mu not held.
func (g *Group) checkpointWhenDue() error {
	if g.opts.CheckpointDue != nil {
		g.opts.CheckpointDue()
		return nil
	}
	return g.checkpoint(checkpointIfDue, nil)
}

// checkpointDueLocked reports whether enough acks or commits accumulated
// for a checkpoint. REQUIRES: g.mu held.
func (g *Group) checkpointDueLocked() bool { return g.acksSince >= g.opts.CheckpointEvery }

// stateLocked snapshots the durable state. Every unsettled record's
// delivery count goes in, so a restart neither forgets how often a poison
// record was tried nor redelivers what was acked ahead. REQUIRES: g.mu
// held.
func (g *Group) stateLocked() state {
	st := state{Type: g.kind, Start: g.start, Committed: g.committed, Done: slices.Clone(g.done.spans), Filter: g.filterPattern()}
	counts := make(map[uint64]uint32, len(g.restored)+len(g.leases)+len(g.pending))
	for offset, n := range g.restored {
		counts[offset] = n
	}
	for offset, l := range g.leases {
		counts[offset] = l.attempt
	}
	for offset, p := range g.pending {
		if p.attempt > 0 {
			counts[offset] = p.attempt
		}
	}
	for offset, m := range g.moves {
		switch {
		case m.intent:
			st.Moves = append(st.Moves, moveIntent{Offset: offset, DeadLetterEnd: m.deadLetterEnd,
				Attempts: m.attempts, Reason: m.reason[:min(len(m.reason), maxReasonBytes)]})
		case m.attempts > 0:
			counts[offset] = m.attempts
		}
	}
	for offset, n := range counts {
		if offset >= g.committed && n > 0 {
			st.Counts = append(st.Counts, deliveryCount{Offset: offset, Deliveries: n})
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(st.Counts, func(i, j int) bool { return st.Counts[i].Offset < st.Counts[j].Offset })
	sort.Slice(st.Moves, func(i, j int) bool { return st.Moves[i].Offset < st.Moves[j].Offset })
	return st
}
