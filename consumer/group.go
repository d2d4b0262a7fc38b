package consumer

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ironbus/ironbus/segment"
)

// Defaults.
const (
	DefaultVisibility  = 30 * time.Second
	DefaultMaxInFlight = 8192
)

// DefaultBackoff is the nack delay schedule, indexed by attempt.
var DefaultBackoff = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond,
	2 * time.Second, 10 * time.Second, 30 * time.Second}

// Sentinel errors.
var (
	ErrInvalidName = errors.New("consumer: invalid group name")
	ErrClosed      = errors.New("consumer: group closed")
)

// Status is the outcome of an ack or nack of one record.
type Status uint8

// Statuses.
const (
	StatusOK      Status = iota // done
	StatusStale                 // the lease token is not the current one: fenced
	StatusUnknown               // the record is not leased (already done, or never delivered)
)

// Options configure a group.
type Options struct {
	Visibility  time.Duration
	MaxInFlight int
	Backoff     []time.Duration
	// Now is the monotonic clock for lease deadlines; time.Now by default.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Visibility <= 0 {
		o.Visibility = DefaultVisibility
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if len(o.Backoff) == 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Delivery is one record handed to a consumer under a lease. Body is a
// copy the caller owns.
type Delivery struct {
	Offset      uint64
	Lease       uint64
	Attempt     uint32
	Redelivered bool
	Timestamp   int64
	BodyCRC     uint32
	Body        []byte
}

// Gap is a range of offsets the group will never deliver.
type Gap struct {
	From, To uint64 // To exclusive
	Reason   string
}

type lease struct {
	token    uint64
	owner    uint64
	deadline time.Time
	attempt  uint32
}

// Group is one work group on one log. Its methods are safe for concurrent
// use.
type Group struct {
	name string
	log  *segment.Log
	opts Options

	mu         sync.Mutex
	closed     bool
	reader     *segment.Reader // positioned at next
	next       uint64          // lowest offset never delivered
	committed  uint64          // every offset below is done
	done       map[uint64]struct{}
	skipped    []Gap // gaps above committed, in order
	leases     map[uint64]*lease
	redeliver  redeliveryQueue
	generation uint64
	dirty      bool
}

const checkpointPrefix = "group-"

// Open loads (or creates) the group name on log. A new group starts at the
// earliest offset the log still holds.
func Open(log *segment.Log, name string, opts Options) (*Group, error) {
	if err := segment.ValidateStreamName(name); err != nil || len(name)+len(checkpointPrefix) > segment.MaxStreamNameLength {
		return nil, fmt.Errorf("%w: %q (1-%d letters, digits, '-', '_' or '.')", ErrInvalidName, name,
			segment.MaxStreamNameLength-len(checkpointPrefix))
	}
	g := &Group{name: name, log: log, opts: opts.withDefaults(), done: map[uint64]struct{}{},
		leases: map[uint64]*lease{}}
	cursor := log.FirstOffset()
	data, err := log.ReadCheckpoint(checkpointPrefix + name)
	switch {
	case err == nil && len(data) == 9 && data[0] == 1:
		cursor = max(binary.LittleEndian.Uint64(data[1:9]), cursor)
	case err == nil:
		return nil, fmt.Errorf("consumer: group %s: checkpoint of %d bytes is not version 1", name, len(data))
	case !errors.Is(err, segment.ErrNotFound):
		return nil, fmt.Errorf("consumer: group %s: %w", name, err)
	}
	cursor = min(cursor, log.Committed())
	g.next, g.committed = cursor, cursor
	return g, nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Fetch leases up to max records (and about maxBytes of bodies; at least
// one record whatever its size) to owner, redeliveries first. Gaps the
// group crossed are returned once.
func (g *Group) Fetch(owner uint64, max, maxBytes int, visibility time.Duration) ([]Delivery, []Gap, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, nil, ErrClosed
	}
	if visibility <= 0 {
		visibility = g.opts.Visibility
	}
	now := g.opts.Now()
	g.expireLocked(now)
	f := fetch{owner: owner, max: max, maxBytes: maxBytes, deadline: now.Add(visibility)}
	if err := g.redeliverLocked(&f, now); err != nil {
		return f.deliveries, f.gaps, err
	}
	err := g.deliverNewLocked(&f)
	return f.deliveries, f.gaps, err
}

type fetch struct {
	owner      uint64
	max        int
	maxBytes   int
	bytes      int
	deadline   time.Time
	deliveries []Delivery
	gaps       []Gap
}

func (f *fetch) full() bool {
	return len(f.deliveries) >= f.max || (len(f.deliveries) > 0 && f.bytes >= f.maxBytes)
}

// expireLocked turns leases past their deadline into due redeliveries.
// REQUIRES: g.mu held.
func (g *Group) expireLocked(now time.Time) {
	for offset, l := range g.leases {
		if !now.Before(l.deadline) {
			delete(g.leases, offset)
			heap.Push(&g.redeliver, redelivery{offset: offset, due: now, attempt: l.attempt})
		}
	}
}

// redeliverLocked hands out due redeliveries. REQUIRES: g.mu held.
func (g *Group) redeliverLocked(f *fetch, now time.Time) error {
	for g.redeliver.Len() > 0 && !f.full() && len(g.leases) < g.opts.MaxInFlight {
		top := g.redeliver[0]
		if top.due.After(now) {
			return nil
		}
		heap.Pop(&g.redeliver)
		entry, err := readOne(g.log, top.offset)
		if errors.Is(err, io.EOF) || (err == nil && entry.Gap != nil) {
			g.markDoneLocked(top.offset) // removed by retention meanwhile
			continue
		}
		if err != nil {
			heap.Push(&g.redeliver, top)
			return err
		}
		g.leaseLocked(f, entry, top.attempt+1, true)
	}
	return nil
}

// deliverNewLocked hands out records never delivered. REQUIRES: g.mu held.
func (g *Group) deliverNewLocked(f *fetch) error {
	if g.reader == nil || g.reader.Offset() != g.next {
		g.closeReaderLocked()
		g.reader = g.log.NewReader(g.next)
	}
	for !f.full() && len(g.leases) < g.opts.MaxInFlight {
		entry, err := g.reader.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if entry.Gap != nil {
			gap := Gap{From: entry.Gap.From, To: entry.Gap.To, Reason: entry.Gap.Reason}
			f.gaps = append(f.gaps, gap)
			g.next = gap.To
			g.skipped = append(g.skipped, gap)
			g.advanceLocked()
			continue
		}
		g.next = entry.Offset + 1
		g.leaseLocked(f, entry, 1, false)
	}
	return nil
}

// leaseLocked records a lease and adds the delivery. REQUIRES: g.mu held.
func (g *Group) leaseLocked(f *fetch, entry segment.Entry, attempt uint32, redelivered bool) {
	g.generation++
	g.leases[entry.Offset] = &lease{token: g.generation, owner: f.owner, deadline: f.deadline, attempt: attempt}
	f.deliveries = append(f.deliveries, Delivery{Offset: entry.Offset, Lease: g.generation, Attempt: attempt,
		Redelivered: redelivered, Timestamp: entry.Timestamp, BodyCRC: entry.BodyCRC,
		Body: append([]byte(nil), entry.Body...)})
	f.bytes += len(entry.Body)
}

// readOne reads the record at offset.
func readOne(log *segment.Log, offset uint64) (segment.Entry, error) {
	r := log.NewReader(offset)
	defer r.Close()
	entry, err := r.Next()
	if err == nil && entry.Gap == nil {
		entry.Body = append([]byte(nil), entry.Body...)
	}
	return entry, err
}

// Ack marks the leased record done.
func (g *Group) Ack(offset, token uint64) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	status := g.checkLeaseLocked(offset, token)
	if status == StatusOK {
		delete(g.leases, offset)
		g.markDoneLocked(offset)
	}
	return status
}

// Nack returns the leased record for redelivery after delay; a negative
// delay uses the group's backoff for the record's attempt.
func (g *Group) Nack(offset, token uint64, delay time.Duration) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	status := g.checkLeaseLocked(offset, token)
	if status != StatusOK {
		return status
	}
	l := g.leases[offset]
	delete(g.leases, offset)
	if delay < 0 {
		delay = g.opts.Backoff[min(int(l.attempt), len(g.opts.Backoff))-1]
	}
	heap.Push(&g.redeliver, redelivery{offset: offset, due: g.opts.Now().Add(delay), attempt: l.attempt})
	return StatusOK
}

func (g *Group) checkLeaseLocked(offset, token uint64) Status {
	l, ok := g.leases[offset]
	switch {
	case !ok:
		return StatusUnknown
	case l.token != token:
		return StatusStale
	}
	return StatusOK
}

// Release returns every lease owner holds for immediate redelivery: its
// connection closed, so waiting out the visibility timeout helps no one.
func (g *Group) Release(owner uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Now()
	for offset, l := range g.leases {
		if l.owner == owner {
			delete(g.leases, offset)
			heap.Push(&g.redeliver, redelivery{offset: offset, due: now, attempt: l.attempt})
		}
	}
}

// markDoneLocked records offset as done and advances the cursor.
// REQUIRES: g.mu held.
func (g *Group) markDoneLocked(offset uint64) {
	if offset >= g.committed {
		g.done[offset] = struct{}{}
	}
	g.advanceLocked()
}

// advanceLocked moves the cursor over done offsets and gaps.
// REQUIRES: g.mu held.
func (g *Group) advanceLocked() {
	before := g.committed
	for {
		if _, ok := g.done[g.committed]; ok {
			delete(g.done, g.committed)
			g.committed++
			continue
		}
		if len(g.skipped) > 0 && g.skipped[0].From <= g.committed {
			g.committed = max(g.committed, g.skipped[0].To)
			g.skipped = g.skipped[1:]
			continue
		}
		break
	}
	if g.committed != before {
		g.dirty = true
	}
}

// Committed returns the group's cursor: every offset below it is done.
func (g *Group) Committed() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.committed
}

// NextDue returns when the earliest waiting redelivery becomes due, if any.
func (g *Group) NextDue() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.redeliver.Len() == 0 {
		return time.Time{}, false
	}
	return g.redeliver[0].due, true
}

// Next returns the lowest offset the group has never delivered.
func (g *Group) Next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next
}

// Checkpoint persists the cursor when it moved since the last checkpoint.
func (g *Group) Checkpoint() error {
	g.mu.Lock()
	if !g.dirty {
		g.mu.Unlock()
		return nil
	}
	data := binary.LittleEndian.AppendUint64([]byte{1}, g.committed)
	g.dirty = false
	g.mu.Unlock()
	if err := g.log.WriteCheckpoint(checkpointPrefix+g.name, data); err != nil {
		g.mu.Lock()
		g.dirty = true
		g.mu.Unlock()
		return err
	}
	return nil
}

// Close checkpoints and releases the group's reader.
func (g *Group) Close() error {
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

type redelivery struct {
	offset  uint64
	due     time.Time
	attempt uint32
}

// redeliveryQueue is a min-heap by due time, then offset.
type redeliveryQueue []redelivery

func (q redeliveryQueue) Len() int { return len(q) }
func (q redeliveryQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].offset < q[j].offset
}
func (q redeliveryQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *redeliveryQueue) Push(x any)   { *q = append(*q, x.(redelivery)) }
func (q *redeliveryQueue) Pop() any {
	old := *q
	item := old[len(old)-1]
	*q = old[:len(old)-1]
	return item
}
