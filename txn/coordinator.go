package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Sink is what a commit needs of the partitions it writes to and the
// groups it moves; the engine implements it.
type Sink interface {
	// Head returns target's durable end: the offset its next record
	// would get once everything staged before the call is durable, or
	// less (a lower bound is enough for a floor).
	Head(target Target) (uint64, error)
	// Append appends bodies to target, in order, and returns once all of
	// them are durable, with the offset of the first.
	Append(target Target, bodies [][]byte, crcs []uint32) (uint64, error)
	// Scan calls fn with the offset and body of every durable record of
	// target from offset from on (below its first retained offset it
	// starts at that). body is valid during the call only.
	Scan(target Target, from uint64, fn func(offset uint64, body []byte)) error
	// CheckGroups says whether ApplyGroups could apply commits (each a
	// streaming group's position within its partition) without applying
	// them.
	CheckGroups(commits []GroupCommit) error
	// ApplyGroups moves each group's position forward to its offset (never
	// back: applying twice changes nothing) and returns once the positions
	// are durable.
	ApplyGroups(commits []GroupCommit) error
}

// Config configures a Coordinator. Zero limits take their defaults.
type Config struct {
	FS  vfs.FS
	Dir string // the coordinator's directory, <data-dir>/txn
	// Storage configures the coordinator's segment log (the data logs'
	// options; its segment size is capped at MaxSegmentSize).
	Storage segment.Options
	Sink    Sink
	// Clock is a monotonic clock (time since an arbitrary origin):
	// timeouts run on it, never on the wall clock.
	Clock func() time.Duration
	// MaxOpen bounds the open transactions (DefaultMaxOpen): the RAM of
	// the index is a function of it.
	MaxOpen int
	// MaxRecords and MaxBytes bound one transaction's records and their
	// body bytes (DefaultMaxRecords, DefaultMaxBytes).
	MaxRecords int
	MaxBytes   int64
	// DefaultTimeout is a transaction's timeout when TxnBegin asks for
	// none; MaxTimeout caps what it may ask for.
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// MaxEnded and MaxEndedRanges bound the ended transactions whose
	// outcome is kept to answer a repeated end, and the ranges they hold
	// (EndedPerOpen and RangesPerOpen × MaxOpen).
	MaxEnded       int
	MaxEndedRanges int
	// SweepInterval is how often timed-out transactions are aborted
	// (1 s; negative: never, the caller calls Expire).
	SweepInterval time.Duration
	Logger        *slog.Logger
}

// Defaults and caps.
const (
	DefaultMaxOpen        = 1024
	DefaultMaxRecords     = 1000
	DefaultMaxBytes       = 1 << 20
	DefaultTimeout        = time.Minute
	DefaultMaxTimeout     = 15 * time.Minute
	EndedPerOpen          = 4
	RangesPerOpen         = 16
	MaxRecordsLimit       = 1 << 16
	MaxSegmentSize        = 8 << 20
	defaultSweepInterval  = time.Second
	coordinatorLogName    = "coordinator"
	coordinatorLogReading = 256
)

// Memory per entry, for MemoryBytes: an open transaction's index entry
// (with an identity name of typical length) and a kept range (with its
// stream name).
const (
	openEntryBytes  = 256
	endedEntryBytes = 96
	rangeBytes      = 200
)

// MemoryBytes bounds what a coordinator with maxOpen open transactions
// (0: DefaultMaxOpen) and the default outcome bounds holds in RAM.
func MemoryBytes(maxOpen int) int64 {
	if maxOpen <= 0 {
		maxOpen = DefaultMaxOpen
	}
	return int64(maxOpen) * (openEntryBytes + EndedPerOpen*endedEntryBytes + RangesPerOpen*rangeBytes)
}

func (c Config) withDefaults() (Config, error) {
	if c.FS == nil {
		c.FS = vfs.OS{}
	}
	if c.Sink == nil || c.Clock == nil || c.Dir == "" {
		return c, fmt.Errorf("%w: txn.Config needs a Dir, a Sink and a Clock", ErrMalformed)
	}
	if c.MaxOpen <= 0 {
		c.MaxOpen = DefaultMaxOpen
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	c.MaxRecords = min(c.MaxRecords, MaxRecordsLimit)
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.MaxEnded <= 0 {
		c.MaxEnded = EndedPerOpen * c.MaxOpen
	}
	if c.MaxEndedRanges <= 0 {
		c.MaxEndedRanges = RangesPerOpen * c.MaxOpen
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = defaultSweepInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Storage.SegmentSize <= 0 || c.Storage.SegmentSize > MaxSegmentSize {
		c.Storage.SegmentSize = MaxSegmentSize
	}
	c.Storage.OnSeal = nil
	return c, nil
}

// Coordinator owns the transaction log of a data directory and the index
// of its open transactions. Safe for concurrent use.
type Coordinator struct {
	cfg    Config
	dir    *segment.Dir
	log    *segment.Log
	ctx    context.Context
	cancel context.CancelFunc
	swept  chan struct{}

	mu     sync.Mutex
	open   map[uint64]*openTxn
	ended  endedSet
	closed bool
}

// openTxn is an open transaction in the index: its payload stays on disk.
type openTxn struct {
	id       uint64
	owner    uint64
	identity string
	began    time.Duration
	deadline time.Duration
	first    uint64 // the coordinator-log offset of its BEGIN
	records  uint32
	bytes    int64
	last     segment.Ticket // its latest record's append (zero: none)
	// committing is set while a commit runs; intent, once its commit
	// intent is durable: from then on it can only be rolled forward.
	committing bool
	intent     *entry
}

// Outcome is how a transaction ended.
type Outcome struct {
	Committed bool
	Ranges    []Range // committed: where its records went, per target in publish order
	Reason    uint8   // aborted: why (Reason*)
}

// Open opens the coordinator log in cfg.Dir (creating it) and recovers:
// every transaction of the log ends committed or aborted before Open
// returns. One with a durable commit intent is rolled forward (the copies
// its targets lack are appended, its group commits applied); one without
// is aborted. The Sink must serve every target already.
func Open(cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := segment.Open(cfg.FS, cfg.Dir, cfg.Storage)
	if err != nil {
		return nil, fmt.Errorf("txn: coordinator directory: %w", err)
	}
	l, err := dir.OpenLog(segment.LogID{Stream: coordinatorLogName})
	if err != nil {
		_ = dir.Close()
		return nil, fmt.Errorf("txn: coordinator log: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, dir: dir, log: l, ctx: ctx, cancel: cancel, swept: make(chan struct{}),
		open: map[uint64]*openTxn{}, ended: newEndedSet(cfg.MaxEnded, cfg.MaxEndedRanges)}
	if err := c.recover(); err != nil {
		cancel()
		_ = dir.Close()
		return nil, err
	}
	if cfg.SweepInterval > 0 {
		go c.sweep(cfg.SweepInterval)
	} else {
		close(c.swept)
	}
	return c, nil
}

// Close stops the sweeper and closes the log (a final sync). Open
// transactions are left to the next Open, which aborts them.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	<-c.swept
	return c.dir.Close()
}

// Begin opens a transaction owned by connection owner (authenticated as
// identity, "" for none) that aborts after timeout (0: the default; capped
// at MaxTimeout). Its BEGIN record is staged, not awaited: the
// transaction's first record is durable only after it. It never blocks: a
// full staging buffer is an error wrapping segment.ErrFull.
func (c *Coordinator) Begin(owner uint64, identity string, timeout time.Duration) (uint64, error) {
	if timeout <= 0 {
		timeout = c.cfg.DefaultTimeout
	}
	timeout = min(timeout, c.cfg.MaxTimeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	if len(c.open) >= c.cfg.MaxOpen {
		return 0, fmt.Errorf("%w: %d are open (the broker's limit)", ErrTooManyOpen, len(c.open))
	}
	// A BEGIN carries id 0: a transaction's id is its BEGIN's offset plus
	// one, unique for the life of the data directory (offsets are never
	// reused), so a reference in a target never names two transactions.
	ticket, err := c.stage(encodeBegin(0, identity, uint32(min(timeout.Milliseconds(), 1<<32-1))))
	if err != nil {
		return 0, err
	}
	now := c.cfg.Clock()
	t := &openTxn{id: ticket.First + 1, owner: owner, identity: identity, began: now, deadline: now + timeout, first: ticket.First}
	c.open[t.id] = t
	return t.id, nil
}

// Append adds a record for target to open transaction id of owner and
// returns the ticket of its append to the coordinator log (the record is
// durable when it completes) and its index in the transaction. A record
// over the transaction's limits aborts it (ErrAborted wrapping
// ErrTooLarge). It never blocks: a full staging buffer is an error
// wrapping segment.ErrFull that changes nothing (retry after RoomFor).
func (c *Coordinator) Append(owner, id uint64, target Target, body []byte, bodyCRC uint32) (segment.Ticket, uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.openLocked(owner, id)
	if err != nil {
		return segment.Ticket{}, 0, err
	}
	if t.committing || t.intent != nil {
		return segment.Ticket{}, 0, fmt.Errorf("%w: transaction %d is being committed", ErrUnknown, id)
	}
	if int(t.records) >= c.cfg.MaxRecords || t.bytes+int64(len(body)) > c.cfg.MaxBytes {
		c.abortLocked(t, ReasonRefused)
		return segment.Ticket{}, 0, fmt.Errorf("%w: %w: a transaction holds at most %d records and %d body bytes",
			ErrAborted, ErrTooLarge, c.cfg.MaxRecords, c.cfg.MaxBytes)
	}
	index := t.records
	ticket, err := c.stage(encodeRecord(id, index, target, bodyCRC, body))
	if err != nil {
		return segment.Ticket{}, 0, err
	}
	t.records++
	t.bytes += int64(len(body))
	t.last = ticket
	return ticket, index, nil
}

// openLocked finds owner's open transaction id, aborting it first when
// its timeout passed. REQUIRES: c.mu held.
func (c *Coordinator) openLocked(owner, id uint64) (*openTxn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	t := c.open[id]
	if t == nil {
		if ended, ok := c.ended.get(id); ok && !ended.outcome.Committed {
			return nil, fmt.Errorf("%w: transaction %d (%s)", ErrAborted, id, reasonText(ended.outcome.Reason))
		}
		return nil, fmt.Errorf("%w: %d", ErrUnknown, id)
	}
	if t.owner != owner {
		return nil, fmt.Errorf("%w: %d (it belongs to another connection)", ErrUnknown, id)
	}
	if !t.committing && t.intent == nil && c.cfg.Clock() >= t.deadline {
		c.abortLocked(t, ReasonTimeout)
		return nil, fmt.Errorf("%w: transaction %d passed its timeout", ErrAborted, id)
	}
	return t, nil
}

// abortLocked ends t aborted. Its ABORTED record is staged, not awaited:
// a transaction without a durable commit intent is aborted by recovery
// anyway. REQUIRES: c.mu held.
func (c *Coordinator) abortLocked(t *openTxn, reason uint8) {
	delete(c.open, t.id)
	c.ended.add(t.id, t.identity, Outcome{Reason: reason})
	if _, err := c.stage(encodeAborted(t.id, reason)); err != nil {
		c.cfg.Logger.Warn("transaction abort record not written; recovery aborts it", "txn", t.id, "error", err.Error())
	}
}

// End ends transaction id of owner: commit makes all its records visible
// and applies commits (all or none, also across a crash), otherwise it is
// aborted. Ending an ended transaction again, from any connection of the
// same identity, returns its outcome: a commit is never applied twice.
// A commit asked of an aborted transaction is ErrAborted.
func (c *Coordinator) End(owner uint64, identity string, id uint64, commit bool, commits []GroupCommit) (Outcome, error) {
	c.mu.Lock()
	if c.open[id] == nil {
		ended, ok := c.ended.get(id)
		c.mu.Unlock()
		switch {
		case !ok || ended.identity != identity:
			return Outcome{}, fmt.Errorf("%w: %d", ErrUnknown, id)
		case commit && !ended.outcome.Committed:
			return ended.outcome, fmt.Errorf("%w: transaction %d (%s)", ErrAborted, id, reasonText(ended.outcome.Reason))
		}
		return ended.outcome, nil
	}
	t := c.open[id]
	if t.intent == nil || t.identity != identity {
		var err error
		if t, err = c.openLocked(owner, id); err != nil {
			c.mu.Unlock()
			return Outcome{}, err
		}
	}
	// else its commit is decided (the intent is durable): any connection
	// of its identity may finish it and learn the outcome, as for an
	// ended one.
	if t.committing {
		c.mu.Unlock()
		return Outcome{}, fmt.Errorf("%w: transaction %d", ErrCommitting, id)
	}
	if !commit && t.intent == nil {
		delete(c.open, id)
		c.ended.add(id, t.identity, Outcome{Reason: ReasonRequested})
		ticket, err := c.stage(encodeAborted(id, ReasonRequested))
		c.mu.Unlock()
		if err == nil {
			err = ticket.Wait(c.ctx)
		}
		// Not durable is aborted too (recovery aborts it): report it
		// aborted either way.
		if err != nil {
			c.cfg.Logger.Warn("transaction abort record not durable; recovery aborts it", "txn", id, "error", err.Error())
		}
		return Outcome{Reason: ReasonRequested}, nil
	}
	// A commit, or an abort of a transaction whose commit intent is
	// durable (that one can only go forward).
	t.committing = true
	c.mu.Unlock()
	return c.finish(t, commits)
}

// finish runs t's commit (t.committing set by the caller) and records
// its outcome.
func (c *Coordinator) finish(t *openTxn, commits []GroupCommit) (Outcome, error) {
	ranges, err := c.commit(t, commits)
	c.mu.Lock()
	t.committing = false
	if err == nil {
		delete(c.open, t.id)
		c.ended.add(t.id, t.identity, Outcome{Committed: true, Ranges: ranges})
	}
	c.mu.Unlock()
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Committed: true, Ranges: ranges}, nil
}

// retryIntents rolls forward the transactions whose commit intent is
// durable but whose commit failed (a target was frozen or full): they
// can only go forward, and nobody may be waiting to ask.
func (c *Coordinator) retryIntents() {
	c.mu.Lock()
	var due []*openTxn
	for _, t := range c.open {
		if t.intent != nil && !t.committing {
			t.committing = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		if _, err := c.finish(t, nil); err != nil {
			c.cfg.Logger.Warn("committed transaction not rolled forward yet; retrying", "txn", t.id, "error", err.Error())
		}
	}
}

// commit runs a commit outside the lock: the records durable, the group
// commits checked, the intent durable, the copies durable in their
// targets, the groups moved, and the COMMITTED record durable. A failure
// after the intent leaves t to be rolled forward by the next End or by
// recovery.
func (c *Coordinator) commit(t *openTxn, commits []GroupCommit) ([]Range, error) {
	if t.intent == nil {
		if t.records > 0 {
			if err := t.last.Wait(c.ctx); err != nil {
				return nil, fmt.Errorf("txn: a record of transaction %d is not durable: %w", t.id, err)
			}
		}
		if err := c.cfg.Sink.CheckGroups(commits); err != nil {
			return nil, err
		}
	}
	records, err := c.readRecords(t.id, t.first)
	if err != nil {
		return nil, err
	}
	scan := t.intent != nil
	if t.intent == nil {
		intent := &entry{kind: kindIntent, id: t.id, commits: commits}
		for _, target := range targetsOf(records) {
			head, err := c.cfg.Sink.Head(target)
			if errors.Is(err, ErrTargetGone) {
				continue // removed with its stream: its records go with it
			}
			if err != nil {
				return nil, err
			}
			intent.floors = append(intent.floors, Floor{Target: target, Offset: head})
		}
		if err := c.writeSync(encodeIntent(t.id, intent.floors, intent.commits)); err != nil {
			// Perhaps durable: from here the transaction only goes forward.
			c.mu.Lock()
			t.intent = intent
			c.mu.Unlock()
			return nil, err
		}
		c.mu.Lock()
		t.intent = intent
		c.mu.Unlock()
	}
	ranges, err := c.rollForward(t.id, records, t.intent, scan)
	if err != nil {
		return nil, err
	}
	if err := c.writeSync(encodeCommitted(t.id, ranges)); err != nil {
		return nil, err
	}
	return ranges, nil
}

// stored is one record of a transaction, read back from the log.
type stored struct {
	index   uint32
	target  Target
	bodyCRC uint32
	body    []byte
}

// readRecords reads transaction id's records back from the log, from its
// BEGIN at first to the durable end, in index order (a record appended
// twice counts once).
func (c *Coordinator) readRecords(id, first uint64) ([]stored, error) {
	var records []stored
	err := c.scanLog(first, func(_ uint64, e entry) {
		if e.kind == kindRecord && e.id == id {
			records = append(records, stored{index: e.index, target: e.target, bodyCRC: e.bodyCRC, body: slices.Clone(e.body)})
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(records, func(a, b stored) int { return int(int64(a.index) - int64(b.index)) })
	records = slices.CompactFunc(records, func(a, b stored) bool { return a.index == b.index })
	return records, nil
}

// targetsOf lists the targets of records in the order they first appear.
func targetsOf(records []stored) []Target {
	var targets []Target
	for _, r := range records {
		if !slices.Contains(targets, r.target) {
			targets = append(targets, r.target)
		}
	}
	return targets
}

// rollForward makes every record of the transaction present once in its
// target and applies its group commits. With scan, the copies a target
// already holds (found from the intent's floor by their reference, and
// byte for byte what the copy would be, so a record someone else
// published with a forged reference never stands in for one) are kept
// and only the missing ones appended: a crash or a failure between the
// intent and COMMITTED never costs a second copy.
func (c *Coordinator) rollForward(id uint64, records []stored, intent *entry, scan bool) ([]Range, error) {
	var ranges []Range
	for _, floor := range intent.floors {
		r, err := c.rollForwardTarget(id, records, floor, scan)
		if errors.Is(err, ErrTargetGone) {
			c.cfg.Logger.Warn("transaction target gone; its records there are dropped with it", "txn", id, "target", floor.Target.String())
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.Count > 0 {
			ranges = append(ranges, r)
		}
	}
	if err := c.cfg.Sink.ApplyGroups(intent.commits); err != nil {
		return nil, fmt.Errorf("txn: group commits of transaction %d: %w", id, err)
	}
	return ranges, nil
}

// rollForwardTarget makes the transaction's records for one target
// present there once and returns where they are.
func (c *Coordinator) rollForwardTarget(id uint64, records []stored, floor Floor, scan bool) (Range, error) {
	copies := map[uint32][]byte{}
	var order []uint32
	crcs := map[uint32]uint32{}
	for _, r := range records {
		if r.target != floor.Target {
			continue
		}
		body, crc, err := Reframe(r.body, id, r.index)
		if err != nil {
			return Range{}, err
		}
		copies[r.index], crcs[r.index] = body, crc
		order = append(order, r.index)
	}
	result := Range{Target: floor.Target, First: ^uint64(0), Count: uint32(len(order))}
	found := map[uint32]uint64{}
	if scan && len(order) > 0 {
		err := c.cfg.Sink.Scan(floor.Target, floor.Offset, func(offset uint64, body []byte) {
			ref, index, ok := Reference(body)
			if !ok || ref != id {
				return
			}
			if _, seen := found[index]; !seen && bytes.Equal(body, copies[index]) {
				found[index] = offset
			}
		})
		if err != nil {
			return Range{}, err
		}
	}
	var missing [][]byte
	var missingCRCs []uint32
	for _, index := range order {
		if offset, ok := found[index]; ok {
			result.First = min(result.First, offset)
			continue
		}
		missing, missingCRCs = append(missing, copies[index]), append(missingCRCs, crcs[index])
	}
	if len(missing) > 0 {
		at, err := c.cfg.Sink.Append(floor.Target, missing, missingCRCs)
		if err != nil {
			return Range{}, fmt.Errorf("txn: commit of transaction %d to %s: %w", id, floor.Target, err)
		}
		result.First = min(result.First, at)
	}
	return result, nil
}

// Expire aborts every open transaction whose timeout passed (not one
// whose commit began) and returns how many.
func (c *Coordinator) Expire() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock()
	expired := 0
	for _, t := range c.open {
		if !t.committing && t.intent == nil && now >= t.deadline {
			c.abortLocked(t, ReasonTimeout)
			expired++
		}
	}
	if expired > 0 {
		c.cfg.Logger.Info("transactions aborted by their timeout", "count", expired)
	}
	return expired
}

func (c *Coordinator) sweep(interval time.Duration) {
	defer close(c.swept)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-ticker.C:
			c.Expire()
			c.retryIntents()
			c.Reclaim()
		}
	}
}

// Reclaim deletes the coordinator log's sealed segments that hold nothing
// an open transaction needs (every record below the oldest open BEGIN),
// and returns how many. The outcomes of transactions ended in them are
// forgotten at the next start; ids stay unique, as offsets are never
// reused.
func (c *Coordinator) Reclaim() int {
	c.mu.Lock()
	floor := c.log.Committed()
	for _, t := range c.open {
		floor = min(floor, t.first)
	}
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0
	}
	removed, err := c.log.DeleteBefore(floor)
	if err != nil {
		c.cfg.Logger.Warn("coordinator log segments not reclaimed", "error", err.Error())
	}
	return removed
}

// Info describes an open transaction for the operator.
type Info struct {
	ID         uint64
	Identity   string
	Records    uint32
	Bytes      int64
	Age        time.Duration // since it began (0 when read offline)
	Remaining  time.Duration // until its timeout (0 when read offline)
	Committing bool          // its commit intent is written, or its commit runs
}

// OpenTransactions lists the open transactions by id.
func (c *Coordinator) OpenTransactions() []Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock()
	infos := make([]Info, 0, len(c.open))
	for _, t := range c.open {
		infos = append(infos, Info{ID: t.id, Identity: t.identity, Records: t.records, Bytes: t.bytes,
			Age: now - t.began, Remaining: max(t.deadline-now, 0), Committing: t.committing || t.intent != nil})
	}
	slices.SortFunc(infos, func(a, b Info) int { return cmpUint64(a.ID, b.ID) })
	return infos
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stage stages one coordinator record without blocking: it runs under
// c.mu, and on an adapter's reader. A full staging buffer is an error
// wrapping segment.ErrFull (RoomFor says when to retry).
func (c *Coordinator) stage(body []byte) (segment.Ticket, error) {
	ticket, err := c.log.TryAppend(body, record.Checksum(body))
	if err != nil {
		return segment.Ticket{}, fmt.Errorf("txn: coordinator log: %w", err)
	}
	return ticket, nil
}

// RoomFor returns a channel closed once the coordinator log's staging
// buffer has room for a record of bodyBytes: when to retry after an
// Append or Begin failed with segment.ErrFull.
func (c *Coordinator) RoomFor(bodyBytes int) <-chan struct{} {
	return c.log.RoomFor(record.FrameSize(bodyBytes + 64))
}

// writeSync writes one coordinator record, waiting while the staging
// buffer is full, and waits until it is durable. Never under c.mu.
func (c *Coordinator) writeSync(body []byte) error {
	ticket, err := c.log.Append(c.ctx, body, record.Checksum(body))
	if err != nil {
		return fmt.Errorf("txn: coordinator log: %w", err)
	}
	if err := ticket.Wait(c.ctx); err != nil {
		return fmt.Errorf("txn: coordinator log: %w", err)
	}
	return nil
}

func reasonText(reason uint8) string {
	switch reason {
	case ReasonRequested:
		return "aborted by its owner"
	case ReasonTimeout:
		return "its timeout passed"
	case ReasonRefused:
		return "a record of it was refused"
	case ReasonRestart:
		return "the broker restarted before its commit"
	}
	return "aborted"
}
