package client_test

import (
	"bytes"
	"time"

	"github.com/ironbus/ironbus/segment/format"
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
	if m.Mode == wire.ModeStreaming {
		fc.streamBatch(f, m)
		return
	}
	if m.Mode != wire.ModeWork {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeUnsupportedMode, "mode %d", m.Mode))
		return
	}
	b.mu.Lock()
	log := b.logs[string(m.Stream)]
	if log == nil {
		b.mu.Unlock()
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeNotFound, "no stream %q", m.Stream))
		return
	}
	for i := range b.gaps {
		fc.out = wire.Append(fc.out, f.RequestID, &b.gaps[i])
	}
	b.gaps = nil
	delivered, reason := fc.deliverReady(f.RequestID, log, m)
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

// deliverReady leases and writes the ready records. b.mu is held.
func (fc *fakeConn) deliverReady(id uint32, log *fakeLog, m wire.Consume) (uint32, uint8) {
	b := fc.b
	now := time.Now()
	var delivered, size uint32
	for offset := range log.records {
		r := &log.records[offset]
		if r.acked || r.leased || now.Before(r.availableAt) {
			continue
		}
		if delivered == m.MaxRecords || (delivered > 0 && size+uint32(len(r.body)) > m.MaxBytes) {
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
		fc.out = wire.Append(fc.out, id, &wire.Deliver{Offset: uint64(offset), Lease: r.lease, Attempt: r.attempts,
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
	b.mu.Lock()
	defer b.mu.Unlock()
	log := b.logs[string(m.Stream)]
	statuses := make([]uint8, len(m.Entries))
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
	log := b.logs[string(m.Stream)]
	if log == nil {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeNotFound, "no stream %q", m.Stream))
		return
	}
	var frames []byte
	for offset, r := range log.records {
		at := len(frames)
		frames = format.AppendRecord(frames, uint64(offset), r.timestamp, r.body, r.crc, format.BodyHash(r.body))
		if b.corrupt[uint64(offset)] {
			frames[at+format.RecordHeaderSize] ^= 0x40
		}
	}
	count := uint32(len(log.records))
	fc.out = wire.Append(fc.out, f.RequestID, &wire.DeliverBatch{Partition: m.Partition, First: 0, Next: uint64(count), Count: count, Frames: frames})
	fc.out = wire.Append(fc.out, f.RequestID, &wire.ConsumeEnd{Delivered: count, Reason: wire.EndCaughtUp})
}
