package broker

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/ironbus/ironbus/dedup"
	"github.com/ironbus/ironbus/keyindex"
	"github.com/ironbus/ironbus/producer"
	"github.com/ironbus/ironbus/segment"
)

// Partition is one partition of a stream: the unit records are appended
// to. A holder keeps it as long as it likes (it is part of its Stream,
// which is never changed in place); once the stream is removed its log is
// closed and appends fail with ErrShuttingDown.
//
// Appends take a batch of record bodies (record.AppendBody) with their
// CRC32C and return a Ticket that completes when the batch is durable.
// The batch is copied into the partition's staging buffer before the call
// returns, so the caller may reuse its buffers at once. Nothing on this
// path allocates or goes through an interface.
type Partition struct {
	broker *Broker
	log    *segment.Log
	stream string
	owner  string // the identity that created the stream
	index  uint32

	// checkMu serialises the appends that are checked against state
	// (idempotent producers, message ids, expectations) with the offsets
	// they are assigned: a check and its staging happen under it, so a
	// check always sees every record assigned before it (synced or not).
	checkMu sync.Mutex
	// producers is the partition's producer table (nil until opened);
	// dedup its message-id window (nil when the stream keeps none). Both
	// are used under checkMu only.
	producers *producer.Table
	dedup     *dedup.Window
	// subjects is the partition's subject index (keyindex.go): the last
	// offset of each subject, for "expect last subject offset" appends.
	// Put and Last under checkMu; nil when it did not open (then such
	// appends are refused).
	subjects *keyindex.Index

	// replicated says the partition belongs to a replicated stream: its
	// appends go through replication (nil until the server attaches it;
	// appends are refused until then). servedTerm is the leadership term
	// the producer table was last read for, under checkMu.
	replicated  bool
	replication atomic.Pointer[replicationBox]
	servedTerm  uint64
}

// Owner is the identity that created the partition's stream ("" for
// none), whose quotas what it stores counts against.
func (p *Partition) Owner() string { return p.owner }

// Ticket is the durability ticket of an appended batch: Done closes when
// the batch is durable (its covering fdatasync returned) or failed; Err
// then says which, as an engine error. The batch's records have offsets
// First, First+1, … in batch order.
type Ticket struct{ segment.Ticket }

// Err is nil when the batch is durable, else an engine error (ErrFrozen,
// ErrNoSpace, ErrShuttingDown, ErrStorage, …). Call it after Done.
func (t Ticket) Err() error { return storageError(t.Ticket.Err()) }

// Stream is the name of the partition's stream.
func (p *Partition) Stream() string { return p.stream }

// Index is the partition's number in its stream.
func (p *Partition) Index() uint32 { return p.index }

// Log is the partition's log, for reading (segment.Log.NewReader) and
// waiting on its committed end; appends go through the Partition.
func (p *Partition) Log() *segment.Log { return p.log }

// TryAppend appends a batch whose record frames total frameBytes
// (record.FrameSize each) without blocking. ErrFull (unwrapped)
// means the staging buffer has no room now: wait on RoomFor and try
// again. A batch larger than the staging buffer goes in alone. The disk
// budget is checked first (ErrNoSpace, retryable).
func (p *Partition) TryAppend(bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	if err := p.broker.admitRecords(frameBytes, false); err != nil {
		return Ticket{}, storageError(err)
	}
	return p.stageAndFinish(bodies, crcs, false, false)
}

// TryCommit is TryAppend that, when the log is idle, writes and syncs the
// batch on the calling goroutine (segment.Log.TryCommitBatch): the ticket
// is then complete on return, sparing the hand-offs to the appender and
// the committer. For a small batch whose caller waits for it anyway.
func (p *Partition) TryCommit(bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	if err := p.broker.admitRecords(frameBytes, false); err != nil {
		return Ticket{}, storageError(err)
	}
	return p.stageAndFinish(bodies, crcs, true, false)
}

// stageAndFinish stages a batch under the check lock, then (inline, on an
// idle log) writes and syncs it after letting the lock go: other callers
// stage behind it while the fdatasync runs.
func (p *Partition) stageAndFinish(bodies [][]byte, crcs []uint32, inline, atomic bool) (Ticket, error) {
	p.checkMu.Lock()
	if p.replicated {
		if err := p.refreshLocked(); err != nil {
			p.checkMu.Unlock()
			return Ticket{}, err
		}
	}
	ticket, write, err := p.stageLocked(bodies, crcs, inline, atomic)
	p.checkMu.Unlock()
	write.Finish()
	if err != nil {
		return Ticket{}, storageError(err)
	}
	return Ticket{ticket}, nil
}

// stageLocked stages a batch and notes its records' subjects in the
// subject index. With inline, an idle log hands the write and the sync to
// the caller (Finish, after unlocking). REQUIRES: checkMu held: every
// append of the partition stages under it, so the index sees records in
// offset order and a check sees the true head of the log.
func (p *Partition) stageLocked(bodies [][]byte, crcs []uint32, inline, atomic bool) (segment.Ticket, segment.InlineWrite, error) {
	var ticket segment.Ticket
	var write segment.InlineWrite
	var err error
	switch {
	case p.replicated:
		ticket, err = p.proposeLocked(bodies, crcs)
	case inline:
		ticket, write, err = p.log.BeginCommit(bodies, crcs, atomic)
	case atomic:
		ticket, err = p.log.TryAppendAtomic(bodies, crcs)
	default:
		ticket, err = p.log.TryAppendBatch(bodies, crcs)
	}
	if err == nil {
		p.indexSubjects(bodies, ticket.First)
	}
	return ticket, write, err
}

// Append appends a batch, waiting while the staging buffer is full (the
// caller's backpressure) or until ctx ends.
//
// Every append of a partition takes its check lock, so a checked append
// (TryAppendChecked) always compares against the true head of the log.
func (p *Partition) Append(ctx context.Context, bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	for {
		ticket, err := p.TryAppend(bodies, crcs, frameBytes)
		if err != ErrFull {
			return ticket, err
		}
		// Waiting outside the check lock: a blocked append must not hold
		// up the checks of other callers, who would only find it full too.
		select {
		case <-p.RoomFor(frameBytes):
		case <-ctx.Done():
			return Ticket{}, storageError(ctx.Err())
		}
	}
}

// RoomFor returns a channel closed once the staging buffer has room for
// frameBytes more (or the log closed): when to retry after ErrFull.
func (p *Partition) RoomFor(frameBytes int) <-chan struct{} { return p.log.RoomFor(frameBytes) }
