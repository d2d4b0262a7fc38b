package session

import (
	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// openBatch is the connection's atomic batch being collected: records
// published with the batch option, copied here (the read buffer they
// arrived in moves on) until the one with the commit flag arrives, then
// appended as one atomic, checked run. One batch is open at a time; its
// bytes are admitted by the large-record pool, so every connection's
// open batch together is bounded by that pool (I8).
type openBatch struct {
	open    bool
	id      uint32
	part    *broker.Partition
	data    []byte // the records' bodies, back to back
	ends    []int  // where each body ends in data
	crcs    []uint32
	ids     []uint32
	silent  []bool
	checks  []broker.Check
	bytes   int         // record-frame bytes, the unit of the limits
	failure *wire.Error // set once refused: its later records get it too
	leases  []arena.Lease
	bodies  [][]byte // scratch: views of data for the append
}

// batchRecord handles a record of an atomic batch.
func (s *session) batchRecord(frame wire.Frame, p *wire.Produce, part *broker.Partition, check broker.Check, silent bool, frameBytes int) (outcome, error) {
	b := &s.batch
	o := &p.Options
	if b.open && o.BatchID != b.id {
		s.failBatch(wire.NewError(wire.CodeBatchIncomplete, "atomic batch %d ended without its commit: a record of batch %d came first; none of it was stored", b.id, o.BatchID))
		s.closeBatch()
	}
	if !b.open {
		if !s.flushRun() { // the batch's records follow what came before them
			return outcomePaused, nil
		}
		*b = openBatch{open: true, id: o.BatchID, part: part, data: b.data[:0], ends: b.ends[:0], crcs: b.crcs[:0],
			ids: b.ids[:0], silent: b.silent[:0], checks: b.checks[:0], leases: b.leases[:0], bodies: b.bodies[:0]}
	}
	commit := o.BatchFlags&wire.BatchCommit != 0
	if b.failure == nil {
		b.failure = s.batchRefusal(part, frameBytes, !commit)
	}
	if b.failure != nil {
		s.refuse(frame.RequestID, silent, b.failure)
		if commit {
			s.closeBatch()
		}
		return outcomeDone, nil
	}
	if !commit {
		s.keepBatchRecord(frame.RequestID, p, check, silent, frameBytes)
		return outcomeDone, nil
	}
	return s.commitBatch(frame, p, check, silent, frameBytes)
}

// batchRefusal says why the next record cannot join the open batch, or
// nil; a refusal fails the records already in it. A record to be kept
// (copied) takes its room from the large-record pool; the commit record
// is appended from the read buffer and takes none.
func (s *session) batchRefusal(part *broker.Partition, frameBytes int, keep bool) *wire.Error {
	b := &s.batch
	maxRecords, maxBytes := s.engine.BatchLimits()
	var refusal *wire.Error
	switch {
	case part != b.part:
		refusal = wire.NewError(wire.CodeInvalidRequest, "atomic batch %d spans partitions; every record of a batch goes to one partition", b.id)
	case len(b.ids)+1 > maxRecords || b.bytes+frameBytes > maxBytes:
		refusal = wire.NewError(wire.CodeBatchIncomplete, "atomic batch %d is over the broker's limits (%d records, %d bytes of records); none of it was stored", b.id, maxRecords, maxBytes)
	case keep && s.cfg.LargeRecords != nil:
		if pool := s.cfg.LargeRecords; pool != nil {
			lease, ok := pool.TryAcquire(frameBytes)
			if !ok {
				refusal = wire.NewError(wire.CodeBusy, "no memory to hold atomic batch %d now; none of it was stored", b.id)
			} else {
				b.leases = append(b.leases, lease)
			}
		}
	}
	if refusal != nil {
		s.failBatch(refusal)
	}
	return refusal
}

// keepBatchRecord copies a record into the open batch.
func (s *session) keepBatchRecord(id uint32, p *wire.Produce, check broker.Check, silent bool, frameBytes int) {
	b := &s.batch
	start := len(b.data)
	b.data = append(b.data, p.Body...)
	b.ends = append(b.ends, len(b.data))
	b.crcs = append(b.crcs, p.BodyCRC)
	b.ids = append(b.ids, id)
	b.silent = append(b.silent, silent)
	// The check's slices alias the read buffer, which moves on: point
	// them at the copy (a body that passed CheckRecord parses again).
	if view, err := record.Parse(b.data[start:]); err == nil {
		check.Subject, check.MessageID = view.Subject, view.MessageID()
	}
	b.checks = append(b.checks, check)
	b.bytes += frameBytes
}

// commitBatch appends the open batch with its last record (still in the
// read buffer) as one atomic run. Without credits or staging room it
// pauses, keeping the batch, and the commit frame comes back later.
func (s *session) commitBatch(frame wire.Frame, p *wire.Produce, check broker.Check, silent bool, frameBytes int) (outcome, error) {
	if !s.flushRun() {
		return outcomePaused, nil
	}
	b := &s.batch
	n := len(b.ids) + 1
	if !s.out.credits.tryAcquire(n) {
		if s.out.credits.isBroken() {
			s.closeBatch()
			return outcomeDone, nil
		}
		s.conn.PauseReading()
		s.out.credits.whenAvailable(n, s.conn.ResumeReading)
		return outcomePaused, nil
	}
	run := &s.checked
	run.Reset()
	start := 0
	for _, end := range b.ends {
		run.Bodies = append(run.Bodies, b.data[start:end])
		start = end
	}
	run.Bodies = append(run.Bodies, p.Body)
	run.CRCs = append(append(run.CRCs, b.crcs...), p.BodyCRC)
	run.Checks = append(append(run.Checks, b.checks...), check)
	run.FrameBytes, run.Atomic = b.bytes+frameBytes, true
	ticket, err := b.part.TryAppendChecked(run)
	if err == broker.ErrFull {
		s.out.credits.release(n)
		s.conn.PauseReading()
		go s.resumeWhen(b.part.RoomFor(run.FrameBytes))
		run.Reset()
		return outcomePaused, nil
	}
	s.ids = append(append(s.ids[:0], b.ids...), frame.RequestID)
	s.silent = append(append(s.silent[:0], b.silent...), silent)
	for _, quiet := range s.silent {
		if quiet {
			s.silentCount++
		}
	}
	if err != nil {
		s.out.credits.release(n)
		failure := wireError(err)
		for i, id := range s.ids {
			if !s.silent[i] {
				s.reply(id, failure)
			}
		}
	} else {
		s.runChecked = true
		s.out.pushAcks(ticket, b.part.Index(), s.ids, s.runAnswers(ticket.First))
	}
	s.releaseBatchWhenWritten(ticket, err == nil)
	s.resetRun()
	s.closeBatch()
	return outcomeDone, nil
}

// failBatch answers every record of the open batch with refusal.
func (s *session) failBatch(refusal *wire.Error) {
	b := &s.batch
	for i, id := range b.ids {
		s.refuse(id, b.silent[i], refusal)
	}
	b.ids, b.silent = b.ids[:0], b.silent[:0]
}

// releaseBatchWhenWritten gives the batch's memory admissions back once
// its records are staged and written (or at once when nothing was
// staged).
func (s *session) releaseBatchWhenWritten(ticket broker.Ticket, staged bool) {
	leases := append([]arena.Lease(nil), s.batch.leases...)
	s.batch.leases = s.batch.leases[:0]
	release := func() {
		for _, lease := range leases {
			_ = lease.Release()
		}
	}
	if staged {
		ticket.OnDone(release)
		return
	}
	release()
}

// closeBatch ends the open batch, giving back what it held.
func (s *session) closeBatch() {
	b := &s.batch
	for _, lease := range b.leases {
		_ = lease.Release()
	}
	*b = openBatch{data: b.data[:0], ends: b.ends[:0], crcs: b.crcs[:0], ids: b.ids[:0], silent: b.silent[:0],
		checks: b.checks[:0], leases: b.leases[:0], bodies: b.bodies[:0]}
}
