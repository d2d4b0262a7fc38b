package client_test

import (
	"bytes"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// consume answers a Consume in work mode: every ready record (not acked,
// not leased, past its nack delay) is leased and delivered, up to the
// limits, after any queued gaps.
func (fc *fakeConn) consume(f wire.Frame) {
	b := fc.b
	m, err := wire.DecodeConsume(f.Body)
	if err != nil {
		b.problem("Consume: %v", err)
		return
	}
	if werr := fc.followerRefusal(m.Stream, m.Partition); werr != nil {
		fc.out = wire.Append(fc.out, f.RequestID, werr)
		return
	}
	if m.Mode == wire.ModeStreaming {
		fc.streamBatch(f, m)
		return
	}
	if m.Mode != wire.ModeWork {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeUnsupportedMode, "mode %d", m.Mode))
		return
	}
	b.mu.Lock()
	if b.logOf(m.Stream, 0) == nil {
		b.mu.Unlock()
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeNotFound, "no stream %q", m.Stream))
		return
	}
	for i := range b.gaps {
		fc.out = wire.Append(fc.out, f.RequestID, &b.gaps[i])
	}
	b.gaps = nil
	var delivered uint32
	reason := wire.EndCaughtUp
	for _, partition := range b.consumedPartitions(m) {
		log := b.logOf(m.Stream, partition)
		if log == nil || reason == wire.EndLimit {
			continue
		}
		var n uint32
		n, reason = fc.deliverReady(f.RequestID, log, partition, m, delivered)
		delivered += n
	}
	b.mu.Unlock()
	if delivered == 0 && m.WaitMs > 0 && m.Flags&wire.ConsumeNoWait == 0 {
		id, wait := f.RequestID, time.Duration(m.WaitMs)*time.Millisecond
		go func() { // a long poll that finds nothing new
			time.Sleep(wait)
			fc.write(wire.Append(nil, id, &wire.ConsumeEnd{Reason: wire.EndWaited}))
		}()
		return
	}
	fc.out = wire.Append(fc.out, f.RequestID, &wire.ConsumeEnd{Delivered: delivered, Reason: reason})
}

// deliverReady leases and writes the ready records of one partition, after
// already records of others. A record the filter does not match is
// settled and reported in a coalesced filtered Gap. b.mu is held.
func (fc *fakeConn) deliverReady(id uint32, log *fakeLog, partition uint32, m wire.Consume, already uint32) (uint32, uint8) {
	b := fc.b
	now := time.Now()
	var delivered, size uint32
	skipped := wire.Gap{Partition: partition, Reason: wire.GapFiltered}
	flushGap := func() {
		if skipped.To > skipped.From {
			fc.out = wire.Append(fc.out, id, &skipped)
		}
		skipped.From, skipped.To = 0, 0
	}
	defer flushGap()
	for offset := range log.records {
		r := &log.records[offset]
		if r.acked || r.leased || now.Before(r.availableAt) {
			continue
		}
		if !matches(m.Filter, r.body) {
			r.acked = true
			if skipped.To != uint64(offset) {
				flushGap()
				skipped.From = uint64(offset)
			}
			skipped.To = uint64(offset) + 1
			continue
		}
		if already+delivered == m.MaxRecords || (delivered > 0 && size+uint32(len(r.body)) > m.MaxBytes) {
			return delivered, wire.EndLimit
		}
		b.nextLease++
		r.lease, r.leased = b.nextLease, true
		r.attempts++
		body := r.body
		if b.corrupt[uint64(offset)] {
			body = bytes.Clone(body)
			body[len(body)-1] ^= 0x40
		}
		var flags uint8
		if r.attempts > 1 {
			flags = wire.DeliverRedelivered
		}
		fc.out = wire.Append(fc.out, id, &wire.Deliver{Partition: partition, Offset: uint64(offset), Lease: r.lease, Attempt: r.attempts,
			Flags: flags, Timestamp: r.timestamp, BodyCRC: r.crc, Body: body})
		delivered++
		size += uint32(len(r.body))
	}
	return delivered, wire.EndCaughtUp
}

// ack settles each entry: ok for the current lease, stale for another
// lease, unknown when the record is not leased.
func (fc *fakeConn) ack(f wire.Frame) {
	b := fc.b
	m, err := wire.DecodeAck(f.Body, nil)
	if err != nil {
		b.problem("Ack: %v", err)
		return
	}
	if werr := fc.followerRefusal(m.Stream, m.Partition); werr != nil {
		fc.out = wire.Append(fc.out, f.RequestID, werr)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ackFrames = append(b.ackFrames, fakeAck{partition: m.Partition, entries: len(m.Entries)})
	log := b.logOf(m.Stream, m.Partition)
	statuses := make([]uint8, len(m.Entries))
	if m.Op == wire.AckCommit {
		b.commits[logKey(m.Stream, m.Partition)] = m.Entries[0].Offset
		fc.out = wire.Append(fc.out, f.RequestID, &wire.AckResult{Statuses: statuses})
		return
	}
	for i, e := range m.Entries {
		if log == nil || e.Offset >= uint64(len(log.records)) || !log.records[e.Offset].leased {
			statuses[i] = wire.AckUnknown
			continue
		}
		r := &log.records[e.Offset]
		if r.lease != e.Lease {
			statuses[i] = wire.AckStale
			continue
		}
		r.leased = false
		if m.Op == wire.AckDone {
			r.acked = true
		} else if m.DelayMs != wire.NackDefaultDelay {
			r.availableAt = time.Now().Add(time.Duration(m.DelayMs) * time.Millisecond)
		}
		statuses[i] = wire.AckOK
	}
	fc.out = wire.Append(fc.out, f.RequestID, &wire.AckResult{Statuses: statuses})
}

// streamBatch answers a streaming Consume with one DeliverBatch of every
// record from offset 0, framed as stored; a record marked corrupt has a
// body bit flipped after its checksums were computed, as a bad disk or
// memory would.
func (fc *fakeConn) streamBatch(f wire.Frame, m wire.Consume) {
	b := fc.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logOf(m.Stream, 0) == nil {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeNotFound, "no stream %q", m.Stream))
		return
	}
	var delivered uint32
	for _, partition := range b.consumedPartitions(m) {
		if log := b.logOf(m.Stream, partition); log != nil {
			delivered += fc.streamPartition(f.RequestID, log, partition, m.Filter)
		}
	}
	fc.out = wire.Append(fc.out, f.RequestID, &wire.ConsumeEnd{Delivered: delivered, Reason: wire.EndCaughtUp})
}

// streamPartition writes one partition's records as runs: a DeliverBatch
// for each run of records the filter matches, a filtered Gap for each
// run it does not. b.mu is held.
func (fc *fakeConn) streamPartition(id uint32, log *fakeLog, partition uint32, filter []byte) uint32 {
	b := fc.b
	var delivered uint32
	for start := 0; start < len(log.records); {
		matching := matches(filter, log.records[start].body)
		end := start
		var frames []byte
		for end < len(log.records) && matches(filter, log.records[end].body) == matching {
			r := log.records[end]
			at := len(frames)
			frames = record.AppendFrame(frames, uint64(end), r.timestamp, r.body, r.crc, record.BodyHash(r.body))
			if b.corrupt[uint64(end)] {
				frames[at+record.FrameHeaderSize] ^= 0x40
			}
			end++
		}
		if matching {
			count := uint32(end - start)
			fc.out = wire.Append(fc.out, id, &wire.DeliverBatch{Partition: partition, First: uint64(start), Next: uint64(end), Count: count, Frames: frames})
			delivered += count
		} else {
			fc.out = wire.Append(fc.out, id, &wire.Gap{Partition: partition, From: uint64(start), To: uint64(end), Reason: wire.GapFiltered})
		}
		start = end
	}
	return delivered
}
