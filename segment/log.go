package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Log is one durable, ordered log: a partition of a stream. Producers call
// Append from any goroutine; a single appender goroutine per log writes
// batches into the active segment (invariant I5, one writer per log), and
// the directory's committer makes them durable with one fdatasync per
// cycle. A Ticket reports when its records are committed: in
// DurabilitySync, only after the fdatasync that covers them (I2).
//
// Lock order: writeMu, then Log.mu, then segment.mu. The appender never
// holds Log.mu while it writes or syncs.
type Log struct {
	id         LogID
	dir        *Dir
	path       string
	fs         vfs.FS
	opts       *Options
	streamHash uint64

	mu struct {
		sync.Mutex
		staging     *batch
		nextOffset  uint64 // offset the next appended record gets
		failure     error  // sticky: set when the log freezes
		closed      bool
		wakePending bool
		spaceFreed  chan struct{} // closed when the appender takes the staging batch
		newData     chan struct{} // closed when the committed mark advances
		// spaceWaited and dataWaited say someone holds spaceFreed or
		// newData: only then is it closed and renewed, so an event nobody
		// waits for (every batch of a producer-only log) allocates nothing.
		spaceWaited bool
		dataWaited  bool
		inflight    []*batch // taken by the appender, not yet committed
		free        [][]byte // staging buffers no batch holds (staging.go)
		written     mark     // what the appender has written
		dirty       bool     // queued at the committer
		// dirtySince is when the log was last queued at the committer,
		// the start of its linger (linger.go; set only with a linger).
		dirtySince time.Time
		// sealing seals the records this log stages under encryption;
		// drawn at the first one (encryption.go), dropped when offsets
		// are handed out again.
		sealing *record.SealingKey
		// replicated: a RaftLog writes the log (raftlog.go); producers'
		// appends are refused.
		replicated bool
	}
	committed atomic.Pointer[mark]
	segments  atomic.Pointer[segmentSet]
	setMu     sync.Mutex // serialises changes to the segment set
	open      *openSealed
	maintMu   sync.Mutex // serialises damage repair of sealed segments
	compactMu sync.Mutex // one compaction of the log at a time (compact.go)

	runtimeMu     sync.Mutex
	runtimeEvents []LossEvent // damage found after open, by reads

	// runBuffers recycles the buffers runs of the active segment are read
	// into: a fresh one per run would be zeroed and faulted in each time
	// (a sync.Pool loses them at every collection). At most
	// maxRunBuffers are kept.
	runBuffers struct {
		sync.Mutex
		free []*[]byte
	}

	// ownedBuffers are the staging buffers taken from
	// Options.StagingBuffers, released by Close.
	ownedBuffers []arena.Buffer

	// liveReads: readers view the active segment through a live mapping
	// (segment.liveViewLocked). Set before the appender starts.
	liveReads bool

	// writeMu is the write token (I5): the appender's state and the
	// active segment's file belong to whoever holds it, the appender
	// goroutine or a TryCommitBatch writing inline.
	writeMu  sync.Mutex
	app      appender
	wake     chan struct{}   // nudges the appender; never closed
	seals    chan chan error // SealActive requests to the appender (purge.go)
	stop     chan struct{}   // closed by Close to stop the appender
	finished chan struct{}   // closed when the appender goroutine exits
	report   LogReport

	// raftState is the replica's state file, open for writing once a
	// RaftLog wrote it (raftstate.go); guarded by the write token.
	raftState vfs.File

	// zeroFilled: the file system refused fallocate and the log's
	// segments were zero-filled instead (zeroahead.go).
	zeroFilled atomic.Bool

	// syncedNext is the offset below which the last fdatasync of the log
	// covered every record: the committer's count of records per sync.
	syncedNext atomic.Uint64
	// roundRecords is, with a commit linger, how many records one round
	// of the log's syncs gathers: what its last fdatasync covered, or one
	// more than were written while it ran if that is more (linger.go).
	roundRecords atomic.Uint64
	// appendedRecords and appendedBytes count what the appender wrote
	// since the log opened (Counters).
	appendedRecords atomic.Uint64
	appendedBytes   atomic.Uint64
}

// Counters is what a log has written since it opened.
type Counters struct {
	AppendedRecords uint64
	AppendedBytes   uint64
}

// Counters returns what the log has written since it opened: two atomic
// loads, so a metrics scrape can call it at any rate.
func (l *Log) Counters() Counters {
	return Counters{AppendedRecords: l.appendedRecords.Load(), AppendedBytes: l.appendedBytes.Load()}
}

// mark is a position in the log: every offset below next is covered, and
// the covered bytes of seg (the segment holding the last of them) end at pos.
type mark struct {
	next uint64
	seg  *segment
	pos  int64
}

// batch is a group of records the appender writes with one write and one
// commit frame (or several when it spans a segment roll).
type batch struct {
	buf      []byte // record frames
	owned    []byte // the log's staging buffer buf was started on (nil: heap)
	slab     []byte // direct I/O: the aligned allocation buf starts in
	slabAt   int    // direct I/O: where buf starts in slab
	first    uint64
	count    uint64
	done     chan struct{}
	err      error  // set before done closes
	failFrom uint64 // with err: records below this offset were committed
	// atomic lists the atomic batches of several records staged in buf,
	// in order: the writer never cuts one (atomic.go). Nil for a batch
	// that holds none, which is every batch of a log without them.
	atomic []atomicSpan

	// log guards completed and notify with its mu. Once completed is set
	// no callback is added: those in notify run after done closes.
	// external guards them instead for a batch of no log that completes
	// later (ExternalTicket).
	log       *Log
	external  *sync.Mutex
	completed bool
	notify    []func()
}

func (b *batch) end() uint64 { return b.first + b.count }

// finishLocked marks batches complete: Ticket.OnDone now calls at once
// instead of adding to their lists. REQUIRES: l.mu held.
func finishLocked(batches []*batch) []*batch {
	for _, b := range batches {
		b.completed = true
	}
	return batches
}

// complete closes the done channel of batches marked complete and runs
// their callbacks. Called without l.mu.
func complete(batches []*batch) {
	for _, b := range batches {
		close(b.done)
		for _, fn := range b.notify {
			fn()
		}
	}
}

// Ticket tracks appended records until they are committed.
type Ticket struct {
	// First is the offset of the first record; Count records follow it.
	First uint64
	Count uint64
	b     *batch
}

// Done is closed when the records are committed or have failed.
func (t Ticket) Done() <-chan struct{} { return t.b.done }

// OnDone arranges for fn to run once the records are committed or have
// failed, right after Done closes, on the goroutine that completed them
// (the committer, an inline commit, a failing write); it runs at once, on
// the caller's goroutine, when they already are. fn must be quick and must
// not block: it delays every other completion of the batch. A consumer of
// many tickets wakes itself with it instead of parking a goroutine on each
// Done.
func (t Ticket) OnDone(fn func()) {
	b := t.b
	if b.external != nil {
		b.external.Lock()
		if !b.completed {
			b.notify = append(b.notify, fn)
			b.external.Unlock()
			return
		}
		b.external.Unlock()
		fn()
		return
	}
	if b.log == nil {
		<-b.done // a batch of no log is never handed out unfinished
		fn()
		return
	}
	b.log.mu.Lock()
	if b.completed {
		b.log.mu.Unlock()
		fn()
		return
	}
	b.notify = append(b.notify, fn)
	b.log.mu.Unlock()
}

// Err reports the outcome once Done is closed: nil when every record of the
// ticket is committed (durable, under DurabilitySync).
func (t Ticket) Err() error {
	select {
	case <-t.b.done:
	default:
		return errors.New("segment: ticket not done")
	}
	if t.b.err != nil && t.First+t.Count > t.b.failFrom {
		return t.b.err
	}
	return nil
}

// Wait blocks until the records are committed or failed, or ctx ends.
func (t Ticket) Wait(ctx context.Context) error {
	select {
	case <-t.b.done:
		return t.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ID returns the log's identity.
func (l *Log) ID() LogID { return l.id }

// Path is the log's directory, where state derived from it (a subject
// index) is kept beside its segments.
func (l *Log) Path() string { return l.path }

// Append adds one record whose body the producer framed and checksummed
// (bodyCRC is the CRC32C of body). It blocks while the staging buffer is
// full (backpressure) and returns a Ticket that reports when the record is
// committed. The body is copied; the caller may reuse it at once.
func (l *Log) Append(ctx context.Context, body []byte, bodyCRC uint32) (Ticket, error) {
	return l.append(ctx, [][]byte{body}, []uint32{bodyCRC}, true, false)
}

// AppendBatch adds several records that are committed together; the
// ticket covers all of them.
func (l *Log) AppendBatch(ctx context.Context, bodies [][]byte, crcs []uint32) (Ticket, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, fmt.Errorf("segment: AppendBatch needs one CRC per body and at least one body")
	}
	return l.append(ctx, bodies, crcs, true, false)
}

// TryAppend is Append that returns ErrFull instead of blocking.
func (l *Log) TryAppend(body []byte, bodyCRC uint32) (Ticket, error) {
	return l.append(context.Background(), [][]byte{body}, []uint32{bodyCRC}, false, false)
}

// TryAppendBatch is AppendBatch that returns ErrFull instead of blocking,
// for callers that must never block (event loops): they wait on RoomFor.
func (l *Log) TryAppendBatch(bodies [][]byte, crcs []uint32) (Ticket, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, fmt.Errorf("segment: TryAppendBatch needs one CRC per body and at least one body")
	}
	return l.append(context.Background(), bodies, crcs, false, false)
}

// RoomFor returns a channel that is closed once frameBytes of records fit
// in the staging batch: already closed when they fit now, else closed when
// the appender takes the current batch. It never misses a wake-up, because
// it is decided under the same lock as the append.
func (l *Log) RoomFor(frameBytes int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	staged := len(l.mu.staging.buf)
	if staged == 0 || staged+frameBytes <= l.opts.StagingBytes || l.writableLocked() != nil {
		return closedChannel
	}
	l.mu.spaceWaited = true
	return l.mu.spaceFreed
}

var closedChannel = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// TryCommitBatch is TryAppendBatch that, when the log is idle (nothing
// staged, nothing written and not yet durable), writes the records and
// makes them durable on the caller's goroutine before it returns, so the
// ticket is already done: a lone awaited record skips the hand-offs to the
// appender and to the committer, each a goroutine wake-up that costs more
// than the write itself on a small machine. The caller is blocked for one
// write and one fdatasync. When the log is busy it stages the records
// exactly as TryAppendBatch does, and they join the next group commit.
// Only DurabilitySync commits inline; the other levels acknowledge after
// the write anyway. Behind a device whose fdatasync stalls (one running
// for over 2 ms, or the last one over 20 ms) it only stages: a caller
// that serves others should not wait on a failing disk. Under a commit
// linger on a busy log it only stages too, so the committer can gather
// the record with others (linger.go).
func (l *Log) TryCommitBatch(bodies [][]byte, crcs []uint32) (Ticket, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, fmt.Errorf("segment: TryCommitBatch needs one CRC per body and at least one body")
	}
	return l.tryCommit(bodies, crcs, false)
}

// tryCommit is TryCommitBatch, of an atomic batch when atomic is set.
func (l *Log) tryCommit(bodies [][]byte, crcs []uint32, atomic bool) (Ticket, error) {
	ticket, write, err := l.beginCommit(bodies, crcs, atomic)
	write.Finish()
	return ticket, err
}

// InlineWrite is a batch staged by BeginCommit for its caller to write
// and sync: the log's write token is held until Finish.
type InlineWrite struct {
	log   *Log
	taken *batch
}

// Finish writes and fdatasyncs the batch on the calling goroutine; the
// ticket is then complete. A zero InlineWrite (the batch was only staged,
// for the appender) does nothing.
func (w InlineWrite) Finish() {
	if w.taken == nil {
		return
	}
	w.log.app.writeTaken(w.taken)
	w.log.writeMu.Unlock()
	// The token is free again, so the appender can write the batches
	// staged meanwhile while this sync is in flight.
	w.log.dir.committer.syncLog(w.log)
}

// BeginCommit is TryCommitBatch in two steps: it stages the records
// (their offsets are assigned when it returns) and, when the log is idle,
// hands the write and the sync to the caller, who calls Finish at once.
// Between the two the caller may note the offsets under a lock of its own
// without holding that lock across the sync.
func (l *Log) BeginCommit(bodies [][]byte, crcs []uint32, atomic bool) (Ticket, InlineWrite, error) {
	if len(bodies) != len(crcs) || len(bodies) == 0 {
		return Ticket{}, InlineWrite{}, fmt.Errorf("segment: BeginCommit needs one CRC per body and at least one body")
	}
	return l.beginCommit(bodies, crcs, atomic)
}

func (l *Log) beginCommit(bodies [][]byte, crcs []uint32, atomic bool) (Ticket, InlineWrite, error) {
	if l.opts.Durability != DurabilitySync || l.stop == nil || !l.dir.committer.inlineHealthy() || l.lingers() || !l.writeMu.TryLock() {
		ticket, err := l.append(context.Background(), bodies, crcs, false, atomic)
		return ticket, InlineWrite{}, err
	}
	ticket, taken, err := l.stage(context.Background(), bodies, crcs, false, true, atomic)
	if taken == nil {
		l.writeMu.Unlock()
		return ticket, InlineWrite{}, err
	}
	return ticket, InlineWrite{log: l, taken: taken}, nil
}

func (l *Log) append(ctx context.Context, bodies [][]byte, crcs []uint32, block, atomic bool) (Ticket, error) {
	ticket, _, err := l.stage(ctx, bodies, crcs, block, false, atomic)
	return ticket, err
}

// stage copies the records into the staging batch. With inline (the
// caller holds the write token) and the log idle, it also takes the batch
// for the caller to write, marks the log dirty so the write does not
// queue it at the committer, and wakes no one; otherwise it wakes the
// appender as every append does. With atomic, the records are one atomic
// batch (atomic.go): refused when larger than MaxAtomicBytes, and marked
// so that the writer never cuts them apart.
func (l *Log) stage(ctx context.Context, bodies [][]byte, crcs []uint32, block, inline, atomic bool) (Ticket, *batch, error) {
	frameBytes, large := 0, false
	encrypted := l.opts.Encryption != nil
	for _, body := range bodies {
		if len(body) > int(l.opts.MaxRecordBytes) {
			return Ticket{}, nil, fmt.Errorf("%w: body of %d bytes (maximum %d)", ErrRecordTooLarge, len(body), l.opts.MaxRecordBytes)
		}
		if encrypted {
			frameBytes += record.EncryptedFrameSize(len(body))
			continue
		}
		frameBytes += record.FrameSize(len(body))
		large = large || len(body) >= record.BodyHashThreshold
	}
	if atomic {
		if err := l.checkAtomic(len(bodies), frameBytes); err != nil {
			return Ticket{}, nil, err
		}
	}
	// Large bodies are hashed before taking the lock (an encrypted frame
	// hashes its envelope as it seals it); small ones have no hash, so the
	// common batch allocates nothing here.
	var hashes []uint64
	if large {
		hashes = make([]uint64, len(bodies))
		for i, body := range bodies {
			hashes[i] = record.BodyHash(body)
		}
	}
	now := l.opts.Clock.Now().UnixNano()
	l.mu.Lock()
	if err := l.waitForRoomLocked(ctx, frameBytes, block); err != nil {
		l.mu.Unlock()
		return Ticket{}, nil, err
	}
	var sealing *record.SealingKey
	if encrypted {
		var err error
		if sealing, err = l.sealingKeyLocked(); err != nil {
			l.mu.Unlock()
			return Ticket{}, nil, err
		}
	}
	b := l.mu.staging
	inline = inline && b.count == 0 && len(l.mu.inflight) == 0
	first, start := l.mu.nextOffset, len(b.buf)
	if b.count == 0 {
		b.first = first
	}
	for i, body := range bodies {
		if sealing != nil {
			b.buf = record.AppendEncryptedFrame(b.buf, l.mu.nextOffset, now, body, crcs[i], sealing)
			l.mu.nextOffset++
			continue
		}
		var hash uint64
		if hashes != nil {
			hash = hashes[i]
		}
		b.buf = record.AppendFrame(b.buf, l.mu.nextOffset, now, body, crcs[i], hash)
		l.mu.nextOffset++
	}
	b.count += uint64(len(bodies))
	if atomic && len(bodies) > 1 {
		b.atomic = append(b.atomic, atomicSpan{start: start, end: len(b.buf), first: first})
	}
	ticket := Ticket{First: first, Count: uint64(len(bodies)), b: b}
	if inline {
		if taken := l.takeStagingLocked(); taken != nil {
			l.mu.dirty = true
			l.mu.Unlock()
			return ticket, taken, nil
		}
	}
	wake := !l.mu.wakePending
	l.mu.wakePending = true
	l.mu.Unlock()
	if wake {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return ticket, nil, nil
}

// waitForRoomLocked blocks until the staging batch can take frameBytes
// more (an empty batch takes any record). REQUIRES: l.mu held; returns with
// it held.
func (l *Log) waitForRoomLocked(ctx context.Context, frameBytes int, block bool) error {
	for {
		if err := l.writableLocked(); err != nil {
			return err
		}
		staged := len(l.mu.staging.buf)
		if staged == 0 || staged+frameBytes <= l.opts.StagingBytes {
			return nil
		}
		if !block {
			return ErrFull
		}
		freed := l.mu.spaceFreed
		l.mu.spaceWaited = true
		l.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			l.mu.Lock()
			return ctx.Err()
		}
		l.mu.Lock()
	}
}

// writableLocked reports why appends are refused, if they are.
// REQUIRES: l.mu held.
func (l *Log) writableLocked() error {
	switch {
	case l.mu.failure != nil:
		return l.mu.failure
	case l.mu.closed:
		return ErrClosed
	case l.opts.ReadOnly:
		return ErrReadOnly
	case l.mu.replicated:
		return ErrReplicated
	}
	return nil
}

// Committed returns the offset one past the last committed record: every
// offset below it is acknowledged and readable.
func (l *Log) Committed() uint64 { return l.committed.Load().next }

// WaitCommitted blocks until the committed offset passes after, the log
// freezes or closes, or ctx ends. It returns the new committed offset.
func (l *Log) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	for {
		l.mu.Lock()
		next, failure, closed, ch := l.committed.Load().next, l.mu.failure, l.mu.closed, l.mu.newData
		l.mu.dataWaited = true
		l.mu.Unlock()
		switch {
		case next > after:
			return next, nil
		case failure != nil:
			return next, failure
		case closed:
			return next, ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return next, ctx.Err()
		}
	}
}

// FirstOffset returns the lowest offset the log still holds (or would
// hold: equal to Committed when the log is empty).
func (l *Log) FirstOffset() uint64 {
	set := l.segments.Load()
	if len(set.segments) == 0 {
		return l.Committed()
	}
	return set.segments[0].base
}

// CommittedChange returns a channel that is closed once the committed
// mark passes after, or the log freezes or closes; it is closed already
// when one of those has happened. A caller waiting on many logs selects
// on their channels instead of parking a goroutine in WaitCommitted per
// log.
func (l *Log) CommittedChange(after uint64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.committed.Load().next > after || l.mu.failure != nil || l.mu.closed {
		return closedChannel
	}
	l.mu.dataWaited = true
	return l.mu.newData
}

// Halted returns why the committed mark can no longer move: the error
// that froze the log, or ErrClosed; nil while it can.
func (l *Log) Halted() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mu.failure != nil:
		return l.mu.failure
	case l.mu.closed:
		return ErrClosed
	}
	return nil
}

// Err returns the error that froze the log, or nil.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.failure
}

// advanceCommitted publishes a new committed mark and completes every batch
// it covers. Marks only move forward, and never after the log froze: a
// sync that succeeds after one failed proves nothing about the bytes
// written before the failure.
func (l *Log) advanceCommitted(m mark) {
	var scratch [4]*batch // most advances complete one batch or a few
	done := scratch[:0]
	l.mu.Lock()
	if m.next <= l.committed.Load().next || l.mu.failure != nil {
		l.mu.Unlock()
		return
	}
	l.committed.Store(&m)
	done = l.popCoveredLocked(done, m.next)
	l.signalDataLocked()
	l.mu.Unlock()
	complete(done)
}

// popCoveredLocked removes the in-flight batches every record of which is
// below next and appends them to dst. REQUIRES: l.mu held.
func (l *Log) popCoveredLocked(dst []*batch, next uint64) []*batch {
	n := 0
	for n < len(l.mu.inflight) && l.mu.inflight[n].end() <= next {
		n++
	}
	done := append(dst, finishLocked(l.mu.inflight[:n])...)
	l.mu.inflight = append(l.mu.inflight[:0], l.mu.inflight[n:]...)
	return done
}

// freeze makes the log read-only for good: the error is sticky, every
// batch not yet committed fails, and no write or sync is ever retried
// (after a failed fdatasync the kernel may have dropped the dirty pages, so
// a later success would prove nothing).
func (l *Log) freeze(cause error) {
	l.mu.Lock()
	if l.mu.failure != nil {
		l.mu.Unlock()
		return
	}
	l.mu.failure = freezeError(cause)
	failed := l.failAllLocked(l.mu.failure)
	l.mu.Unlock()
	complete(failed)
	l.opts.Logger.Error("log frozen read-only", "log", l.id.String(), "error", cause.Error())
}

// failAllLocked fails every uncommitted batch and wakes everyone waiting
// for room or for new data, so they see the error. REQUIRES: l.mu held; the
// caller closes the returned batches' done channels after unlocking.
func (l *Log) failAllLocked(err error) []*batch {
	failed := append([]*batch(nil), l.mu.inflight...)
	l.mu.inflight = nil
	if l.mu.staging.count > 0 {
		failed = append(failed, l.mu.staging)
		l.giveBackLocked(l.mu.staging)
		l.mu.staging = l.newStagingLocked(0)
	}
	for _, b := range failed {
		b.err = err
		b.failFrom = b.first
	}
	l.wakeWaitersLocked()
	return finishLocked(failed)
}

// wakeWaitersLocked wakes appenders blocked on a full staging buffer and
// readers blocked in WaitCommitted. REQUIRES: l.mu held.
func (l *Log) wakeWaitersLocked() {
	l.signalSpaceLocked()
	l.signalDataLocked()
}

// signalSpaceLocked wakes those waiting for room in the staging buffer.
// REQUIRES: l.mu held.
func (l *Log) signalSpaceLocked() {
	if l.mu.spaceWaited {
		close(l.mu.spaceFreed)
		l.mu.spaceFreed, l.mu.spaceWaited = make(chan struct{}), false
	}
}

// signalDataLocked wakes those waiting for the committed mark to move.
// REQUIRES: l.mu held.
func (l *Log) signalDataLocked() {
	if l.mu.dataWaited {
		close(l.mu.newData)
		l.mu.newData, l.mu.dataWaited = make(chan struct{}), false
	}
}

// failFrom fails the records of the batch being written from offset on,
// and every staged record after them, without freezing: used for ENOSPC,
// where nothing acknowledged is at risk and a later append may succeed.
// Offsets from `from` on are reused by the next append, which is safe
// because none of them was ever written behind a commit frame.
func (l *Log) failFrom(b *batch, from uint64, err error) {
	var failed []*batch
	l.mu.Lock()
	b.err, b.failFrom = err, from
	b.count = from - b.first
	if b.count == 0 {
		for i, in := range l.mu.inflight {
			if in == b {
				l.mu.inflight = append(l.mu.inflight[:i], l.mu.inflight[i+1:]...)
				break
			}
		}
		failed = append(failed, b)
	}
	if l.mu.staging.count > 0 {
		staged := l.mu.staging
		staged.err, staged.failFrom = err, staged.first
		failed = append(failed, staged)
		l.giveBackLocked(staged)
		l.mu.staging = l.newStagingLocked(0)
	}
	l.wakeWaitersLocked()
	l.mu.nextOffset = from
	l.mu.sealing = nil // offsets from `from` on are sealed again: under a new salt
	// The part of b already written may be committed already: complete it
	// now rather than wait for a mark that will not move past it.
	failed = l.popCoveredLocked(finishLocked(failed), l.committed.Load().next)
	l.mu.Unlock()
	complete(failed)
}

func (l *Log) newBatch(buf []byte) *batch {
	return &batch{buf: buf[:0], done: make(chan struct{}), log: l}
}

// Close stops accepting appends, writes and commits what is staged, and
// releases the log's files. It does not seal the active segment: the next
// open resumes appending to it, without scanning it when the clean-stop
// marker Close leaves is intact (cleanstop.go).
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.finished
	}
	// An inline commit may still be writing: the files stay until it is
	// done with them.
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if !l.opts.ReadOnly && l.Err() == nil {
		l.syncNow()
		if err := l.writeCleanStop(); err != nil {
			// Only the next open's speed is at stake: it scans.
			l.opts.Logger.Warn("clean-stop marker not written", "log", l.id.String(), "error", err.Error())
		}
	}
	l.dir.forget(l)
	l.setMu.Lock() // a compaction swapping a segment in finishes first
	set := l.segments.Swap(&segmentSet{})
	l.setMu.Unlock()
	for _, seg := range set.segments {
		seg.release()
	}
	l.app.closeFiles()
	closeQuietly(l.raftState)
	l.raftState = nil
	l.mu.Lock()
	failed := l.failAllLocked(ErrClosed)
	l.mu.Unlock()
	complete(failed)
	l.releaseStagingBuffers()
	return nil
}

// Info is a snapshot of a log for reports and tools.
type Info struct {
	ID          LogID
	FirstOffset uint64
	Committed   uint64
	Segments    int
	Bytes       int64
	Frozen      string
	Durability  string
	IOMode      string
}

// Info returns a snapshot of the log.
func (l *Log) Info() Info {
	info := Info{ID: l.id, FirstOffset: l.FirstOffset(), Committed: l.Committed(),
		Durability: l.opts.Durability.String(), IOMode: l.app.mode.String()}
	for _, seg := range l.segments.Load().segments {
		info.Segments++
		info.Bytes += seg.stats().Bytes
	}
	if err := l.Err(); err != nil {
		info.Frozen = err.Error()
	}
	return info
}

// Report returns what recovery found when the log opened, followed by any
// damage reads have found since.
func (l *Log) Report() LogReport {
	report := l.report
	report.Events = append([]LossEvent(nil), report.Events...)
	l.runtimeMu.Lock()
	for _, ev := range l.runtimeEvents {
		report.add(ev)
	}
	l.runtimeMu.Unlock()
	if report.Outcome != OutcomeFrozen {
		report.finish(nil, timeZero, timeZero)
		report.DurationMicros = l.report.DurationMicros
	}
	report.KnownGaps = 0
	for _, seg := range l.segments.Load().segments {
		report.KnownGaps += seg.stats().KnownGaps
	}
	return report
}

var timeZero time.Time
