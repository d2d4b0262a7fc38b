package consumer

import (
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
)

// Delivery is one record handed to a consumer. Body is a copy the caller
// owns. Lease is zero for types without leases (broadcast, streaming).
type Delivery struct {
	Offset      uint64
	Lease       uint64
	Attempt     uint32 // 1 on the first delivery
	Redelivered bool
	Timestamp   int64
	BodyCRC     uint32
	Body        []byte
}

// Gap is a range of offsets the group will never deliver: retention, a
// disk-full drop or a quarantine removed them before the group got there.
type Gap struct {
	From, To uint64 // To exclusive
	Reason   string
}

// Count returns how many offsets the gap covers.
func (g Gap) Count() uint64 { return g.To - g.From }

// Stats is a snapshot of a group's state, for metrics and tests.
type Stats struct {
	Type                Type
	Committed, Next     uint64
	Members             int
	Leased              int // live leases (credit in use)
	Unsettled           int // leased + waiting + parked + moving to the dead-letter queue
	AckedAheadRanges    int
	DeadLettered        uint64
	DeadLetterFailures  uint64
	LastDeadLetterError string
	// Delivered counts records handed to consumers since the group was
	// opened, Redelivered those among them handed out before; Acked
	// counts records settled by an ack, or passed by a broadcast or
	// streaming cursor. A streaming group's reads are not counted: they
	// hold no group state.
	Delivered   uint64
	Redelivered uint64
	Acked       uint64
}

// Group is one consumer group on one log. Its methods are safe for
// concurrent use.
//
// Lock order: checkpointMu before mu. Nothing blocks on I/O other than a
// record read while holding mu; checkpoint writes and dead-letter appends
// run with mu released.
type Group struct {
	name string
	log  *segment.Log
	opts Options
	kind Type
	// filter is the group's subject pattern, nil for none; fixed at
	// creation, so read without a lock.
	filter *subject.Pattern

	checkpointMu sync.Mutex // serializes checkpoint writes so an older state never lands last
	// created is closed once a new group's first checkpoint was tried
	// (written, or failed and left dirty), and at once for a group that
	// was on disk already.
	created     chan struct{}
	createdOnce sync.Once

	mu         sync.Mutex
	closed     bool
	start      StartPosition // how the group was created, kept for the record
	reader     *segment.Reader
	next       uint64  // lowest offset never read by the group
	committed  uint64  // every offset below is done
	done       spanSet // done above committed: acked, terminated, dead-lettered, gaps
	leases     map[uint64]*lease
	deadlines  deadlineQueue
	pending    map[uint64]*pendingRecord // waiting for (re)delivery
	due        pendingQueue
	restored   map[uint64]uint32 // delivery counts from the checkpoint, not yet re-read
	moves      map[uint64]*move  // records on their way to the dead-letter queue
	members    map[uint64]struct{}
	keys       keyRouter
	tokenMaker rand.ChaCha8
	highWater  uint64 // broadcast: one past the highest offset ever delivered
	reading    uint64 // broadcast: the attached reader, 0 when none
	dirty      bool
	acksSince  int
	stats      Stats
}

const checkpointPrefix = "group-"

// Open loads the group name on log, or creates it with opts.Type and
// opts.Start when it has no checkpoint yet. Opening an existing group as
// another type fails with ErrTypeMismatch.
func Open(log *segment.Log, name string, opts Options) (*Group, error) {
	if err := segment.ValidateStreamName(name); err != nil || len(name)+len(checkpointPrefix) > segment.MaxStreamNameLength {
		return nil, fmt.Errorf("%w: %q (1-%d letters, digits, '-', '_' or '.')", ErrInvalidName, name,
			segment.MaxStreamNameLength-len(checkpointPrefix))
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Group{name: name, log: log, opts: opts, kind: opts.Type, leases: map[uint64]*lease{},
		pending: map[uint64]*pendingRecord{}, restored: map[uint64]uint32{}, moves: map[uint64]*move{},
		members: map[uint64]struct{}{}, keys: keyRouter{keys: map[uint64]*keyState{}}, created: make(chan struct{})}
	var seed [32]byte
	_, _ = cryptorand.Read(seed[:]) // never fails: the runtime aborts first
	g.tokenMaker.Seed(seed)
	data, err := log.ReadCheckpoint(checkpointPrefix + name)
	var st state
	if err == nil {
		st, err = decodeState(data)
	}
	switch {
	case errors.Is(err, segment.ErrCorruptCheckpoint), errors.Is(err, ErrCorruptCheckpoint):
		// Both copies are damaged (the log reported it). The safe position
		// is the oldest record held: everything is delivered again, nothing
		// is skipped. A group that refused to open would stall for good.
		g.opts.Start = StartPosition{Kind: StartEarliest}
		return g, g.create()
	case err == nil:
		if st.Type != opts.Type {
			return nil, fmt.Errorf("%w: group %s is a %s group, opened as %s", ErrTypeMismatch, name, st.Type, opts.Type)
		}
		if opts.Filter != "" && st.Filter != opts.Filter {
			return nil, fmt.Errorf("%w: group %s has subject filter %s, opened with filter %q", ErrFilterMismatch, name,
				describeFilter(st.Filter), opts.Filter)
		}
		if g.filter, err = compileFilter(st.Filter); err != nil {
			return nil, err
		}
		g.restore(st)
		g.markCreated()
		return g, nil
	case errors.Is(err, segment.ErrNotFound):
		return g, g.create()
	default:
		return nil, fmt.Errorf("consumer: group %s: %w", name, err)
	}
}

// create positions a new group and persists its type at once, so a later
// Open with another type is refused. A failed write (disk full, frozen
// log) does not stop consumption: the state stays dirty and the next
// checkpoint tries again.
func (g *Group) create() error {
	filter, err := compileFilter(g.opts.Filter)
	if err != nil {
		return err
	}
	g.filter = filter
	start, err := g.startOffset(g.opts.Start)
	if err != nil {
		return fmt.Errorf("consumer: group %s: start position: %w", g.name, err)
	}
	g.start = g.opts.Start
	g.next, g.committed, g.highWater = start, start, start
	g.dirty = true
	if g.opts.CreateInBackground {
		return nil // the caller's next Checkpoint writes it
	}
	_ = g.Checkpoint()
	return nil
}

// Created is closed once a new group's first checkpoint has been tried
// (with Options.CreateInBackground, by the caller's first Checkpoint after
// Open), or the group was closed; it is closed already for a group Open
// found on disk. A caller that must not deliver through a group whose
// creation a power cut could still undo waits for it.
func (g *Group) Created() <-chan struct{} { return g.created }

// markCreated closes created once.
func (g *Group) markCreated() { g.createdOnce.Do(func() { close(g.created) }) }

// startOffset resolves a start position against what the log holds now.
func (g *Group) startOffset(start StartPosition) (uint64, error) {
	first, end := g.log.FirstOffset(), g.log.Committed()
	switch start.Kind {
	case StartLatest:
		return end, nil
	case StartOffset:
		return min(max(start.Offset, first), end), nil
	case StartTime:
		offset, err := g.log.OffsetForTime(start.Time)
		return max(offset, first), err
	}
	return first, nil
}

// restore installs a decoded checkpoint. Delivery counts and pending
// dead-letter moves come back; leases do not (their holders are gone), so
// every record that was unsettled is delivered again, counted.
func (g *Group) restore(st state) {
	end := g.log.Committed()
	// A log that came back shorter (a torn tail dropped) must not leave
	// the cursor past offsets that will be written again.
	g.committed = min(st.Committed, end)
	g.start = st.Start
	for _, span := range st.Done {
		if span.From < end {
			g.done.add(span.From, min(span.To, end))
		}
	}
	g.committed = g.done.advance(g.committed)
	for _, c := range st.Counts {
		if _, done := g.done.contains(c.Offset); !done && c.Offset >= g.committed && c.Offset < end {
			g.restored[c.Offset] = c.Deliveries
		}
	}
	for _, m := range st.Moves {
		if g.opts.DeadLetters == nil {
			g.restored[m.Offset] = m.Attempts // no queue to finish the move: deliver it again
			continue
		}
		g.moves[m.Offset] = &move{offset: m.Offset, attempts: m.Attempts, reason: m.Reason,
			deadLetterEnd: m.DeadLetterEnd, intent: true, mayExist: true}
	}
	g.next, g.highWater = g.committed, g.committed
}

// compileFilter compiles a group's pattern; "" is no filter.
func compileFilter(pattern string) (*subject.Pattern, error) {
	if pattern == "" {
		return nil, nil
	}
	compiled, err := subject.Compile([]byte(pattern))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	return compiled, nil
}

// describeFilter names a filter in a message.
func describeFilter(pattern string) string {
	if pattern == "" {
		return "none"
	}
	return fmt.Sprintf("%q", pattern)
}

// Filter returns the group's subject pattern, "" when it has none.
func (g *Group) Filter() string { return g.filterPattern() }

func (g *Group) filterPattern() string {
	if g.filter == nil {
		return ""
	}
	return g.filter.String()
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Type returns the group's type.
func (g *Group) Type() Type { return g.kind }

// Log returns the log the group reads (the streaming tier reads it
// directly from the committed position).
func (g *Group) Log() *segment.Log { return g.log }

// Committed returns the group's cursor: every offset below it is done.
func (g *Group) Committed() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.committed
}

// Next returns the lowest offset the group has never read: new records
// at or after it wake a waiting consumer.
func (g *Group) Next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next
}

// Stats returns a snapshot of the group's state.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Type, s.Committed, s.Next, s.Members = g.kind, g.committed, g.next, len(g.members)
	s.Leased, s.Unsettled, s.AckedAheadRanges = len(g.leases), g.unsettledLocked(), g.done.len()
	return s
}

// unsettledLocked counts records delivered or read but not done.
// REQUIRES: g.mu held.
func (g *Group) unsettledLocked() int { return len(g.leases) + len(g.pending) + len(g.moves) }

// Release ends owner's membership: its connection closed. Its leases go
// back for immediate redelivery (waiting out the visibility timeout helps
// no one), a key-shared group hands its keys to the remaining members,
// and a broadcast group loses its reader. When the last member leaves,
// the group checkpoints (a clean disconnect loses no acked work).
func (g *Group) Release(owner uint64) {
	g.mu.Lock()
	_, member := g.members[owner]
	delete(g.members, owner)
	switch {
	case g.kind.leased():
		now := g.opts.Now()
		for offset, l := range g.leases {
			if l.owner == owner {
				g.lapseLocked(offset, l, now)
			}
		}
	case g.kind == TypeBroadcast && g.reading == owner:
		g.reading = 0
		g.next = g.committed // what was not acked goes to the next reader
	}
	last := member && len(g.members) == 0
	g.mu.Unlock()
	if last {
		_ = g.Checkpoint()
	}
}

// NextDue returns the next instant at which a record becomes deliverable
// through time alone: a nack delay running out, or a lease expiring. It
// ignores what is already due but blocked (no credit, a busy key), so a
// caller that waits until the answer never spins.
func (g *Group) NextDue() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.kind.leased() {
		return time.Time{}, false
	}
	now := g.opts.Now()
	var next time.Time
	found := false
	consider := func(t time.Time) {
		if t.After(now) && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	if l, ok := g.earliestLeaseLocked(); ok {
		consider(l)
	}
	if len(g.leases) < g.opts.MaxInFlight {
		for _, p := range g.due {
			consider(p.due)
		}
	}
	if g.hasMoveRetryLocked() {
		for _, m := range g.moves {
			consider(m.retryAt)
		}
	}
	return next, found
}

// Close checkpoints and releases the group's reader.
func (g *Group) Close() error {
	defer g.markCreated() // whatever the checkpoint did: nobody waits on a closed group
	err := g.Checkpoint()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.closeReaderLocked()
	return err
}

func (g *Group) closeReaderLocked() {
	if g.reader != nil {
		g.reader.Close()
		g.reader = nil
	}
}

// readerAtLocked returns the group's reader positioned at offset.
// REQUIRES: g.mu held.
func (g *Group) readerAtLocked(offset uint64) *segment.Reader {
	if g.reader == nil || g.reader.Offset() != offset {
		g.closeReaderLocked()
		g.reader = filteredReader(g.log, offset, g.matcher(nil))
	}
	return g.reader
}

// readOne reads the record at offset; io.EOF or a gap entry mean the log
// no longer holds it.
func readOne(log *segment.Log, offset uint64) (segment.Entry, error) {
	r := log.NewReader(offset)
	defer r.Close()
	entry, err := r.Next()
	if err == nil && entry.Gap == nil {
		entry.Body = append([]byte(nil), entry.Body...)
		entry.Frame = nil
	}
	return entry, err
}

// gone reports whether a readOne result means the record was removed.
func gone(entry segment.Entry, err error) bool {
	return errors.Is(err, io.EOF) || (err == nil && entry.Gap != nil)
}

// addGap appends gap to gaps, merging it with an adjacent one of the same
// reason, so one removal is reported as one gap.
func addGap(gaps []Gap, gap Gap) []Gap {
	if n := len(gaps); n > 0 && gaps[n-1].To == gap.From && gaps[n-1].Reason == gap.Reason {
		gaps[n-1].To = gap.To
		return gaps
	}
	return append(gaps, gap)
}
