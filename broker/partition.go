package broker

import (
	"context"
	"sync"

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
	ticket, err := p.log.TryAppendBatch(bodies, crcs)
	if err != nil {
		return Ticket{}, storageError(err)
	}
	return Ticket{ticket}, nil
}

// TryCommit is TryAppend that, when the log is idle, writes and syncs the
// batch on the calling goroutine (segment.Log.TryCommitBatch): the ticket
// is then complete on return, sparing the hand-offs to the appender and
// the committer. For a small batch whose caller waits for it anyway.
func (p *Partition) TryCommit(bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	if err := p.broker.admitRecords(frameBytes, false); err != nil {
		return Ticket{}, storageError(err)
	}
	ticket, err := p.log.TryCommitBatch(bodies, crcs)
	if err != nil {
		return Ticket{}, storageError(err)
	}
	return Ticket{ticket}, nil
}

// Append appends a batch, waiting while the staging buffer is full (the
// caller's backpressure) or until ctx ends.
func (p *Partition) Append(ctx context.Context, bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	if err := p.broker.admitRecords(frameBytes, false); err != nil {
		return Ticket{}, storageError(err)
	}
	ticket, err := p.log.AppendBatch(ctx, bodies, crcs)
	if err != nil {
		return Ticket{}, storageError(err)
	}
	return Ticket{ticket}, nil
}

// RoomFor returns a channel closed once the staging buffer has room for
// frameBytes more (or the log closed): when to retry after ErrFull.
func (p *Partition) RoomFor(frameBytes int) <-chan struct{} { return p.log.RoomFor(frameBytes) }
