package broker

import (
	"context"
	"fmt"
)

// Atomic batches: every record of the batch becomes visible to readers
// (consumer groups, streaming reads) together with the others or none
// does, and a crash keeps all of them or none. The log writes the batch
// contiguously in one segment under one commit frame
// (segment.Log.AppendAtomic); here the batch is held to the configured
// limits, Config.MaxBatchRecords and Config.MaxBatchBytes, before
// anything is admitted or staged. Other callers' records may come before
// and after the batch; its own offsets are consecutive, First to
// First+Count-1 of its Ticket.

// TryAppendAtomic appends a batch, whose record frames total frameBytes
// (record.FrameSize each), as one atomic batch without blocking. A batch
// over the limits is ErrBatchTooLarge and stores nothing; ErrFull
// (unwrapped) means the staging buffer has no room for the whole batch
// now: wait on RoomFor(frameBytes) and try again. The disk budget is
// checked as for TryAppend (ErrNoSpace, retryable).
func (p *Partition) TryAppendAtomic(bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	if err := p.admitAtomic(bodies, crcs, frameBytes); err != nil {
		return Ticket{}, err
	}
	return p.stageAndFinish(bodies, crcs, false, true)
}

// TryCommitAtomic is TryAppendAtomic that, when the log is idle, writes
// and syncs the batch on the calling goroutine, as TryCommit does.
func (p *Partition) TryCommitAtomic(bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	if err := p.admitAtomic(bodies, crcs, frameBytes); err != nil {
		return Ticket{}, err
	}
	return p.stageAndFinish(bodies, crcs, true, true)
}

// AppendAtomic is TryAppendAtomic that waits while the staging buffer is
// full, or until ctx ends.
func (p *Partition) AppendAtomic(ctx context.Context, bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
	for {
		ticket, err := p.TryAppendAtomic(bodies, crcs, frameBytes)
		if err != ErrFull {
			return ticket, err
		}
		// Waiting outside the check lock, as Append does.
		select {
		case <-p.RoomFor(frameBytes):
		case <-ctx.Done():
			return Ticket{}, storageError(ctx.Err())
		}
	}
}

// admitAtomic holds an atomic batch to the limits, then to the disk
// budget.
func (p *Partition) admitAtomic(bodies [][]byte, crcs []uint32, frameBytes int) error {
	cfg := &p.broker.cfg
	switch {
	case len(bodies) == 0 || len(bodies) != len(crcs):
		return fmt.Errorf("%w: an atomic batch needs at least one record and one CRC per record (%d records, %d CRCs)",
			ErrInvalidArgument, len(bodies), len(crcs))
	case len(bodies) > cfg.MaxBatchRecords:
		return fmt.Errorf("%w: %d records (at most %d)", ErrBatchTooLarge, len(bodies), cfg.MaxBatchRecords)
	case frameBytes > cfg.MaxBatchBytes:
		return fmt.Errorf("%w: %d bytes of records (at most %d)", ErrBatchTooLarge, frameBytes, cfg.MaxBatchBytes)
	}
	if err := p.broker.admitRecords(frameBytes, false); err != nil {
		return storageError(err)
	}
	return nil
}

// BatchLimits are the most records and record-frame bytes one atomic
// batch may have: what an adapter collecting a batch holds it to.
func (b *Broker) BatchLimits() (records, frameBytes int) {
	return b.cfg.MaxBatchRecords, b.cfg.MaxBatchBytes
}
