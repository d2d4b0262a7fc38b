package client_test

import (
	"bytes"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// The fake broker's idempotent producers, message ids, conditional
// appends and atomic batches, by the rules of docs/WIRE.md: sequences
// are dense per producer and partition, a resend of a stored sequence is
// answered with the first copy's offset flagged duplicate, a sequence
// past the next one is a gap naming the next one.

// fakeProducers is the fake's producer table. b.mu guards it.
type fakeProducers struct {
	names   map[string]uint64 // name → producer id
	epochs  map[uint64]uint32 // producer id → current epoch
	next    map[fakeSeqKey]uint64
	offsets map[fakeOffsetKey]uint64
	msgIDs  map[string]uint64 // log key + "\x00" + message id → offset
	inits   int               // ProducerInit frames answered
	dups    int               // duplicates answered
	gaps    int               // sequence gaps answered
}

type fakeSeqKey struct {
	producer  uint64
	stream    string
	partition uint32
}

type fakeOffsetKey struct {
	fakeSeqKey
	sequence uint64
}

// pendingPart is a record of an open atomic batch, stored at its commit.
type pendingPart struct {
	id        uint32
	m         wire.Produce
	stream    []byte
	partition uint32
}

func (fp *fakeProducers) init() {
	if fp.names == nil {
		fp.names, fp.epochs = map[string]uint64{}, map[uint64]uint32{}
		fp.next, fp.offsets, fp.msgIDs = map[fakeSeqKey]uint64{}, map[fakeOffsetKey]uint64{}, map[string]uint64{}
	}
}

// producerInit answers ProducerInit: the name's id (new names get the
// next id, from 7 so ids and epochs differ in tests), a raised epoch and
// the positions of the producer.
func (fc *fakeConn) producerInit(f wire.Frame) {
	b := fc.b
	m, err := wire.DecodeProducerInit(f.Body)
	if err != nil {
		b.problem("ProducerInit: %v", err)
		return
	}
	if b.noProducers {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeUnknownType, "fake: no ProducerInit"))
		return
	}
	b.mu.Lock()
	fp := &b.producers
	fp.init()
	fp.inits++
	id, ok := fp.names[string(m.Name)]
	if !ok {
		id = uint64(len(fp.names) + 7)
		fp.names[string(m.Name)] = id
	}
	fp.epochs[id]++
	info := &wire.ProducerInfo{ID: id, Epoch: fp.epochs[id]}
	if b.cluster != nil {
		b.cluster.announced(fc, id, info.Epoch)
	}
	for key, next := range fp.next {
		if key.producer == id && !b.noPositions {
			info.Positions = append(info.Positions, wire.ProducerPosition{Stream: []byte(key.stream), Partition: key.partition, NextSequence: next})
		}
	}
	b.mu.Unlock()
	fc.out = wire.Append(fc.out, f.RequestID, info)
}

// checkProduce applies a Produce's checks and options. handled reports
// that the record is answered (r, unless nil: an atomic batch answers at
// its commit) and must not be stored now. b.mu is held.
func (fc *fakeConn) checkProduce(id uint32, m wire.Produce, stream []byte, partition uint32) (r *reply, handled bool) {
	b := fc.b
	fp := &b.producers
	fp.init()
	view, err := record.Parse(m.Body)
	if err != nil {
		return &reply{id: id, err: wire.NewError(wire.CodeMalformed, "body: %v", err)}, true
	}
	o := m.Options
	key := fakeSeqKey{producer: view.ProducerID, stream: string(stream), partition: partition}
	if o.Idempotent && b.forget != nil && b.forget(b.produced) {
		delete(fp.next, key)
		return &reply{id: id, err: wire.NewError(wire.CodeProducerExpired, "forgotten")}, true
	}
	if o.Idempotent {
		epoch, known := fp.epochs[view.ProducerID]
		next, state := fp.next[key]
		switch {
		case !view.HasProducer:
			return &reply{id: id, err: wire.NewError(wire.CodeInvalidRequest, "producer option without a producer id")}, true
		case !known:
			return &reply{id: id, err: wire.NewError(wire.CodeUnknownProducer, "producer %d", view.ProducerID)}, true
		case b.cluster != nil && b.cluster.fenced(fc, key, o.Epoch):
			return &reply{id: id, err: wire.NewError(wire.CodeProducerFenced, "epoch %d is not the connection's, or older than the partition's", o.Epoch)}, true
		case b.cluster == nil && o.Epoch < epoch:
			return &reply{id: id, err: wire.NewError(wire.CodeProducerFenced, "epoch %d < %d", o.Epoch, epoch)}, true
		case !state && view.Sequence > 0:
			// A known producer without state here sends a later sequence:
			// its state was dropped, and a resend cannot be told apart.
			return &reply{id: id, err: wire.NewError(wire.CodeProducerExpired, "no state for producer %d", view.ProducerID)}, true
		case view.Sequence < next:
			fp.dups++
			offset := fp.offsets[fakeOffsetKey{key, view.Sequence}]
			return &reply{id: id, ack: wire.ProduceAck{Partition: partition, Offset: offset, Flags: wire.AckDuplicate}}, true
		case view.Sequence > next:
			fp.gaps++
			werr := wire.NewError(wire.CodeSequenceGap, "sequence %d, expected %d", view.Sequence, next)
			werr.HasValue, werr.Value = true, next
			return &reply{id: id, err: werr}, true
		}
	}
	logID := logKey(stream, partition)
	if msgID, ok := messageID(view); ok {
		if offset, dup := fp.msgIDs[logID+"\x00"+msgID]; dup {
			fp.dups++
			return &reply{id: id, ack: wire.ProduceAck{Partition: partition, Offset: offset, Flags: wire.AckDuplicate}}, true
		}
	}
	werr := b.expectations(o, stream, partition, view.Subject)
	if o.Batch && (werr != nil || fc.atomicFailed) {
		// A refused part refuses the whole batch: nothing of it is stored,
		// and each of its records is answered batch_incomplete.
		refusal := wire.NewError(wire.CodeBatchIncomplete, "batch refused: %v", werr)
		for _, part := range fc.atomic {
			fc.batch = append(fc.batch, reply{id: part.id, err: refusal})
		}
		fc.atomic, fc.atomicFailed = nil, o.BatchFlags&wire.BatchCommit == 0
		werr = refusal
	}
	if werr != nil {
		return &reply{id: id, err: werr}, true
	}
	if o.Batch {
		m.Body, m.Stream = bytes.Clone(m.Body), bytes.Clone(m.Stream)
		fc.atomic = append(fc.atomic, pendingPart{id: id, m: m, stream: bytes.Clone(stream), partition: partition})
		if o.BatchFlags&wire.BatchCommit != 0 {
			parts := fc.atomic
			fc.atomic = nil
			for _, part := range parts {
				fc.store(part.id, part.m, part.stream, part.partition, func(r reply) { fc.batch = append(fc.batch, r) })
			}
		}
		return nil, true
	}
	return nil, false
}

// expectations checks a conditional append. b.mu is held.
func (b *fakeBroker) expectations(o wire.ProduceOptions, stream []byte, partition uint32, subject []byte) *wire.Error {
	log := b.logOf(stream, partition)
	last, lastOfSubject := wire.ExpectNone, wire.ExpectNone
	if log != nil {
		if len(log.records) > 0 {
			last = uint64(len(log.records) - 1)
		}
		for offset := len(log.records) - 1; offset >= 0; offset-- {
			if view, err := record.Parse(log.records[offset].body); err == nil && bytes.Equal(view.Subject, subject) {
				lastOfSubject = uint64(offset)
				break
			}
		}
	}
	fail := func(actual uint64) *wire.Error {
		werr := wire.NewError(wire.CodeExpectationFailed, "last offset %d", actual)
		werr.HasValue, werr.Value = true, actual
		return werr
	}
	switch {
	case o.HasExpectLastOffset && o.ExpectLastOffset != last:
		return fail(last)
	case o.HasExpectLastSubjectOffset && o.ExpectLastSubjectOffset != lastOfSubject:
		return fail(lastOfSubject)
	}
	return nil
}

// noteStored records a stored record's sequence and message id. b.mu is
// held.
func (b *fakeBroker) noteStored(m wire.Produce, stream []byte, partition uint32, offset uint64) {
	view, err := record.Parse(m.Body)
	if err != nil {
		return
	}
	fp := &b.producers
	fp.init()
	if m.Options.Idempotent && view.HasProducer {
		key := fakeSeqKey{producer: view.ProducerID, stream: string(stream), partition: partition}
		fp.next[key] = view.Sequence + 1
		fp.offsets[fakeOffsetKey{key, view.Sequence}] = offset
	}
	if msgID, ok := messageID(view); ok {
		fp.msgIDs[logKey(stream, partition)+"\x00"+msgID] = offset
	}
}

func messageID(view record.View) (string, bool) {
	for name, value := range view.Headers() {
		if string(name) == client.MessageIDHeader {
			return string(value), true
		}
	}
	return "", false
}

// streamInfo answers StreamAdmin info: the configured partition count,
// not_found for a stream not configured.
func (fc *fakeConn) streamInfo(f wire.Frame, m wire.StreamAdmin) {
	var count uint32
	fc.b.locked(func() { count = fc.b.partitions[string(m.Stream)] })
	if count == 0 {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeNotFound, "no stream %q", m.Stream))
		return
	}
	state := wire.StreamState{Name: bytes.Clone(m.Stream), Partitions: make([]wire.StreamPartition, count)}
	fc.out = wire.Append(fc.out, f.RequestID, &wire.StreamList{Streams: []wire.StreamState{state}})
}
