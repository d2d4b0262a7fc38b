package client

import (
	"context"
	"errors"
	"sync"

	"github.com/ironbus/ironbus/wire"
)

// awaitedProducer is the producer identity that a Client's Produce and
// ProduceTo calls share. Sequences are numbered and written under one
// lock, so the broker receives each partition's sequences in order even
// from concurrent callers.
type awaitedProducer struct {
	initMu sync.Mutex // serialises ProducerInit: two at once would fence each other

	mu    sync.Mutex // guards what follows
	name  string
	ready bool // id and epoch are current
	off   bool // the broker does not serve ProducerInit
	id    uint64
	epoch uint32
	// positions are the next sequences the broker reported at the last
	// ProducerInit, for partitions not numbered yet.
	positions map[streamPartition]uint64
	sequences map[streamPartition]*sequenceState
}

// streamPartition names one partition log.
type streamPartition struct {
	stream    string
	partition uint32
}

// sequenceState is where an awaited identity's sequence stands on one
// partition. generation counts the resets that a sequence gap caused: a
// gap reported for a record numbered before the latest reset says
// nothing new.
type sequenceState struct {
	next       uint64
	generation uint64
}

// maxGapRetries bounds how often one Produce is renumbered after gaps
// that concurrent callers' refusals caused. Each such gap follows a
// verdict on another caller's record (a refused conditional append), so
// the callers as a whole make progress; one record may still be
// renumbered once per caller ahead of it, round after round, when many
// conditional writers share the Client and most of them lose. The bound
// is far above that and stops only a broker that keeps refusing a
// correctly renumbered record.
const maxGapRetries = 256

// awaitedStamp decides whether a record to t is sent idempotently and to
// which partition; it initialises the Client's identity on first use. A
// conditional record goes to its computed partition even unstamped: an
// expectation names one partition.
func (c *Client) awaitedStamp(ctx context.Context, t target, stream string, r *Record) (uint32, bool, error) {
	if !c.producersServed() || t.bySubject {
		return t.partition, false, nil
	}
	conditional := r.ExpectLastOffset.set || r.ExpectLastSubjectOffset.set
	if c.opts.Idempotence == IdempotenceOff && !conditional {
		return t.partition, false, nil
	}
	key := r.Key
	var count uint32
	if t.partition == AnyPartition {
		var err error
		if count, err = c.partitionCount(ctx, stream); err != nil {
			return 0, false, err
		}
	}
	partition, ok := stampedPartition(t, key, count)
	if !ok {
		return t.partition, false, nil
	}
	if c.opts.Idempotence == IdempotenceOff {
		return partition, false, nil
	}
	ready, err := c.awaited.ensure(ctx, c)
	if err != nil || !ready {
		return partition, false, err
	}
	return partition, true, nil
}

// ensure makes the identity current, sending ProducerInit when it is not;
// false means the broker does not serve it.
func (a *awaitedProducer) ensure(ctx context.Context, c *Client) (bool, error) {
	a.mu.Lock()
	ready, off := a.ready, a.off
	a.mu.Unlock()
	if ready || off {
		return ready, nil
	}
	a.initMu.Lock()
	defer a.initMu.Unlock()
	a.mu.Lock()
	if a.name == "" {
		a.name = randomProducerName()
	}
	name, ready := a.name, a.ready
	a.mu.Unlock()
	if ready {
		return true, nil
	}
	info, err := c.producerInit(ctx, name)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case notServed(err):
		a.off = true
		return false, nil
	case err != nil:
		return false, err
	}
	if info.ID != a.id {
		clear(a.sequences) // another identity: its sequences start afresh
	}
	a.id, a.epoch, a.ready = info.ID, info.Epoch, true
	a.positions = map[streamPartition]uint64{}
	for _, p := range info.Positions {
		a.positions[streamPartition{string(p.Stream), p.Partition}] = p.NextSequence
	}
	return true, nil
}

// produceStamped sends the idempotent record enc holds to log and waits
// for its answer, renumbering it after a gap it did not cause.
func (c *Client) produceStamped(ctx context.Context, enc *encoder, log streamPartition) (Ack, error) {
	for retries := 0; ; retries++ {
		if err := c.acquireWindow(ctx); err != nil {
			return Ack{}, err
		}
		cl := getCall()
		a := &c.awaited
		a.mu.Lock()
		state := a.sequenceLocked(log)
		sequence, generation, epoch := state.next, state.generation, a.epoch
		enc.msg.Options.Epoch = epoch
		enc.msg.BodyCRC = restamp(enc.body, a.id, sequence)
		id, err := c.register(entry{kind: kindProduce, call: cl})
		if err == nil {
			state.next++
			c.enqueueAwaited(id, &enc.msg)
		}
		a.mu.Unlock()
		if err != nil {
			<-c.window
			putCall(cl)
			return Ack{}, err
		}
		if err := c.await(ctx, id, cl); err != nil {
			return Ack{}, err
		}
		ack, err := cl.ack, cl.err
		putCall(cl)
		if err == nil || !a.refused(log, err, sequence, generation, epoch) || retries == maxGapRetries {
			return ack, err
		}
	}
}

// sequenceLocked returns the state of log, seeding a new one from the
// broker's positions.
func (a *awaitedProducer) sequenceLocked(log streamPartition) *sequenceState {
	state := a.sequences[log]
	if state == nil {
		if a.sequences == nil {
			a.sequences = map[streamPartition]*sequenceState{}
		}
		state = &sequenceState{next: a.positions[log]}
		a.sequences[log] = state
	}
	return state
}

// refused updates the sequence of log after the broker refused sequence
// (numbered in generation, sent with epoch) with err, and reports whether
// the record should be renumbered and sent again: after a gap, or a fence
// by this Client's own newer ProducerInit, neither of which stores
// anything.
func (a *awaitedProducer) refused(log streamPartition, err error, sequence, generation uint64, epoch uint32) bool {
	code, werr := wireCode(err)
	if errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrClosed) {
		// The record may be stored (the error may wrap the broker's
		// closing Error, which is no refusal of this record): its sequence
		// stays used.
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	state := a.sequenceLocked(log)
	switch code {
	case wire.CodeSequenceGap:
		if !werr.HasValue || werr.Value >= sequence {
			return false // not a gap this client can repair
		}
		if state.generation == generation {
			// Every record numbered since was sent after this one, so it
			// reached the broker later and met the same gap: numbering
			// resumes where the broker stands.
			state.next, state.generation = werr.Value, state.generation+1
		}
		return true
	case wire.CodeProducerFenced:
		if a.ready && epoch != a.epoch {
			return true // fenced by this Client's own later ProducerInit
		}
		a.ready = false
	case wire.CodeUnknownProducer:
		a.ready = false
		clear(a.sequences)
	case wire.CodeProducerExpired:
		a.ready = false
		delete(a.sequences, log)
	case 0:
		// The context or the connection: the record may be stored, so its
		// sequence stays used; a gap on the next record repairs it if not.
	default:
		// Refused and not stored (not_leader included: a member refuses
		// before it appends anything). It was the newest record numbered
		// here and was sent once, so no later sequence exists: reuse its
		// own.
		if state.generation == generation && state.next == sequence+1 {
			state.next = sequence
		}
	}
	return false
}
