package producer

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Defaults of TableOptions.
const (
	DefaultMaxProducers = 64
	DefaultRingBatches  = 8
	DefaultIdleExpiry   = 7 * 24 * time.Hour
	// MaxRingBatches bounds TableOptions.RingBatches (a snapshot stores
	// the count in a byte).
	MaxRingBatches = 255
)

// Generations is what a Table asks the registry (a *Registry is one): the
// generation of the latest Init, and of a producer's latest Init.
type Generations interface {
	Generation() uint64
	InitGeneration(id uint64) (uint64, bool)
}

// TableOptions bound a Table.
type TableOptions struct {
	// MaxProducers caps the producers with state in the table
	// (DefaultMaxProducers when zero). Admitting one more drops the state
	// of the one idle longest.
	MaxProducers int
	// RingBatches is how many recent batches per producer keep their
	// offsets (DefaultRingBatches when zero, at most MaxRingBatches).
	RingBatches int
	// IdleExpiry drops the state of a producer that appended nothing for
	// this long (DefaultIdleExpiry when zero), measured by Clock.
	IdleExpiry time.Duration
	// Clock is broker running time: monotonic, never the wall clock. It
	// may restart from zero at every broker start (a snapshot stores idle
	// ages, not instants), so downtime does not count. Nil: time stands
	// still and nothing expires by idleness.
	Clock func() time.Duration
	// OnDrop, when set, is called (with the append lock held: it must not
	// block) when the table drops a state, so its owner writes a snapshot
	// soon: until one holding the drop is on disk, the dropped producer
	// answers ErrExpired (see Table).
	OnDrop func()
}

func (o TableOptions) withDefaults() TableOptions {
	if o.MaxProducers <= 0 {
		o.MaxProducers = DefaultMaxProducers
	}
	if o.RingBatches <= 0 {
		o.RingBatches = DefaultRingBatches
	}
	o.RingBatches = min(o.RingBatches, MaxRingBatches)
	if o.IdleExpiry <= 0 {
		o.IdleExpiry = DefaultIdleExpiry
	}
	if o.Clock == nil {
		o.Clock = func() time.Duration { return 0 }
	}
	return o
}

// TableStats are a table's size and counters since it was built.
type TableStats struct {
	Producers int // producers with state
	// Evicted counts states dropped to admit a producer to a full table;
	// Expired, states dropped after IdleExpiry without an append.
	Evicted, Expired uint64
	// ExpiredAnswers counts Checks answered ErrExpired.
	ExpiredAnswers uint64
}

// Table is one partition log's producer state. Its methods are called
// with the partition's append lock held, in offset order; only Stats may
// be called without it.
//
// New or expired. A producer without state is new to the table when its
// latest Init came after the table last dropped state (its generation is
// above the table's drop mark): ids and generations only grow, so such an
// incarnation began after anything the table forgot, and a resend cannot
// refer to a record whose state is gone. Its first record is accepted at
// any sequence. Otherwise Check answers ErrExpired: the producer calls
// Init again, which raises its generation above the mark, and from then
// on it is new. The mark rises to the registry's generation whenever the
// table drops a state (eviction, idle expiry) or learns it missed records
// (MarkGap), so it never lets through a producer it may have forgotten.
//
// A dropped state stays dropped across a crash only once a snapshot
// written after the drop is on disk; until then recovery would rebuild
// it from the log, and a producer accepted fresh meanwhile (restarting at
// sequence 0, say) would meet its old sequences again. So a producer
// whose drop is not yet on disk answers ErrExpired even after a new Init,
// until the owner reports the snapshot with Persisted.
type Table struct {
	generations Generations
	opts        TableOptions

	states map[uint64]*state
	// Recency list: head is the latest producer to append, tail the one
	// idle longest.
	head, tail *state
	free       *state // dropped states kept for reuse (linked by newer)

	dropMark uint64 // generation at the latest drop; see Table
	through  uint64 // one past the highest offset recorded

	// drops counts drops; unpersisted maps the ids dropped since the
	// last snapshot on disk to their drop's count, up to MaxProducers
	// ids: past that, overflow holds the count of the latest drop not
	// listed, and every producer without state waits for its snapshot.
	drops, persisted, overflow uint64
	unpersisted                map[uint64]uint64

	evicted, expired, expiredAnswers atomic.Uint64
	producers                        atomic.Int64
}

// state is one producer's position in the log.
type state struct {
	id         uint64
	next       uint64 // the sequence expected next
	lastActive time.Duration
	ring       []batch // the last batches, oldest overwritten first
	newest     int     // index of the newest batch in ring
	newer      *state
	older      *state
}

// batch is a run of sequences stored at consecutive offsets.
type batch struct {
	firstSeq    uint64
	firstOffset uint64
	count       uint32 // 0: an unused slot
}

// NewTable returns an empty table whose producers are judged new or
// expired against generations.
func NewTable(generations Generations, opts TableOptions) *Table {
	return &Table{generations: generations, opts: opts.withDefaults(), states: map[uint64]*state{},
		unpersisted: map[uint64]uint64{}}
}

// Check classifies sequence seq of producer id: new (the zero Verdict),
// a duplicate, or an error: a *GapError (seq is beyond the next one
// expected), ErrExpired (the table dropped the producer's state), or
// ErrUnknown (the registry never issued id).
func (t *Table) Check(id, seq uint64) (Verdict, error) {
	t.expireIdle(t.opts.Clock())
	s := t.states[id]
	if s == nil {
		generation, ok := t.generations.InitGeneration(id)
		switch {
		case !ok:
			return Verdict{}, fmt.Errorf("%w: %d", ErrUnknown, id)
		case generation <= t.dropMark || t.dropPending(id):
			t.expiredAnswers.Add(1)
			return Verdict{}, fmt.Errorf("%w: producer %d has no state on this partition; call ProducerInit again", ErrExpired, id)
		}
		return Verdict{}, nil
	}
	switch {
	case seq == s.next:
		return Verdict{}, nil
	case seq > s.next:
		return Verdict{}, &GapError{Expected: s.next}
	}
	if offset, ok := s.find(seq); ok {
		return Verdict{Duplicate: true, Offset: offset, OffsetKnown: true}, nil
	}
	return Verdict{Duplicate: true}, nil
}

// find returns the offset of seq when one of the ring's batches holds it.
func (s *state) find(seq uint64) (uint64, bool) {
	for i := range s.ring {
		b := &s.ring[i]
		if b.count > 0 && seq >= b.firstSeq && seq-b.firstSeq < uint64(b.count) {
			return b.firstOffset + (seq - b.firstSeq), true
		}
	}
	return 0, false
}

// Record notes that sequence seq of producer id was stored at offset.
// Calls come in offset order, one per stored record of the producer;
// recovery replays the log's records through it. The log is the truth: a
// sequence other than the next one expected can only be stored by a
// fresh start (Check accepted a producer whose state was dropped), so it
// starts the producer's state over there, as the live table did.
func (t *Table) Record(id, seq, offset uint64) { t.RecordAt(id, seq, offset, t.opts.Clock()) }

// RecordAt is Record at broker time now, for a caller that stores many
// records in one instant and reads the clock once for all of them.
func (t *Table) RecordAt(id, seq, offset uint64, now time.Duration) {
	t.expireIdle(now)
	t.through = max(t.through, offset+1)
	s := t.states[id]
	if s == nil {
		s = t.admit(id)
	} else if seq != s.next {
		clear(s.ring)
		s.newest = 0
	}
	s.add(seq, offset)
	s.next = seq + 1
	s.lastActive = now
	t.touch(s)
}

// add puts seq at offset into the ring, extending the newest batch when
// it continues it in both sequence and offset.
func (s *state) add(seq, offset uint64) {
	last := &s.ring[s.newest]
	if last.count > 0 && last.count < ^uint32(0) &&
		last.firstSeq+uint64(last.count) == seq && last.firstOffset+uint64(last.count) == offset {
		last.count++
		return
	}
	if last.count > 0 {
		s.newest = (s.newest + 1) % len(s.ring)
	}
	s.ring[s.newest] = batch{firstSeq: seq, firstOffset: offset, count: 1}
}

// Next returns the next sequence expected from id; false when the table
// holds no state for it.
func (t *Table) Next(id uint64) (uint64, bool) {
	if s := t.states[id]; s != nil {
		return s.next, true
	}
	return 0, false
}

// HighestID returns the highest producer id the table holds state for
// (0 for none).
func (t *Table) HighestID() uint64 {
	var highest uint64
	for id := range t.states {
		highest = max(highest, id)
	}
	return highest
}

// Through returns one past the highest offset recorded: a snapshot of the
// table is only true of a log whose durable end has reached it.
func (t *Table) Through() uint64 { return t.through }

// MarkGap tells the table it did not see some records of its log (a
// retention gap before replay, a damaged span, a snapshot it could not
// use): every producer without state whose latest Init is not newer than
// now answers ErrExpired, never a fresh accept.
func (t *Table) MarkGap() { t.dropMark = max(t.dropMark, t.generations.Generation()) }

// dropPending reports whether id may have been dropped after the last
// snapshot on disk.
func (t *Table) dropPending(id uint64) bool {
	if t.overflow > t.persisted {
		return true
	}
	_, pending := t.unpersisted[id]
	return pending
}

// Drops returns the count of drops so far: read it with the snapshot
// (Encode) and hand it to Persisted once that snapshot is on disk.
func (t *Table) Drops() uint64 { return t.drops }

// Persisted reports that a snapshot taken when Drops returned drops is on
// disk: the producers dropped up to then may start afresh.
func (t *Table) Persisted(drops uint64) {
	if drops <= t.persisted {
		return
	}
	t.persisted = drops
	for id, at := range t.unpersisted {
		if at <= drops {
			delete(t.unpersisted, id)
		}
	}
}

// Stats returns the table's size and counters. Safe without the append
// lock.
func (t *Table) Stats() TableStats {
	return TableStats{Producers: int(t.producers.Load()), Evicted: t.evicted.Load(),
		Expired: t.expired.Load(), ExpiredAnswers: t.expiredAnswers.Load()}
}

// admit makes room for and returns an empty state for id.
func (t *Table) admit(id uint64) *state {
	if len(t.states) >= t.opts.MaxProducers {
		t.drop(t.tail)
		t.evicted.Add(1)
	}
	s := t.free
	if s != nil {
		t.free = s.newer
		clear(s.ring)
		*s = state{ring: s.ring}
	} else {
		s = &state{ring: make([]batch, t.opts.RingBatches)}
	}
	s.id = id
	t.states[id] = s
	t.producers.Store(int64(len(t.states)))
	return s
}

// expireIdle drops the states idle for longer than IdleExpiry.
func (t *Table) expireIdle(now time.Duration) {
	for t.tail != nil && now-t.tail.lastActive > t.opts.IdleExpiry {
		t.drop(t.tail)
		t.expired.Add(1)
	}
}

// drop forgets s and raises the drop mark (see Table).
func (t *Table) drop(s *state) {
	t.unlink(s)
	delete(t.states, s.id)
	t.producers.Store(int64(len(t.states)))
	t.MarkGap()
	t.noteDrop(s.id)
	s.newer, s.older = t.free, nil
	t.free = s
}

// noteDrop remembers that id was dropped and asks for a snapshot.
func (t *Table) noteDrop(id uint64) {
	t.drops++
	if len(t.unpersisted) < t.opts.MaxProducers {
		t.unpersisted[id] = t.drops
	} else {
		t.overflow = t.drops
	}
	if t.opts.OnDrop != nil {
		t.opts.OnDrop()
	}
}

// touch moves s to the head of the recency list.
func (t *Table) touch(s *state) {
	if t.head == s {
		return
	}
	t.unlink(s)
	s.older, s.newer = t.head, nil
	if t.head != nil {
		t.head.newer = s
	}
	t.head = s
	if t.tail == nil {
		t.tail = s
	}
}

// unlink takes s out of the recency list (it may not be in it).
func (t *Table) unlink(s *state) {
	if s.newer != nil {
		s.newer.older = s.older
	} else if t.head == s {
		t.head = s.older
	}
	if s.older != nil {
		s.older.newer = s.newer
	} else if t.tail == s {
		t.tail = s.newer
	}
	s.newer, s.older = nil, nil
}
