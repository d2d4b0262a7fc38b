package broker

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/producer"
	"github.com/ironbus/ironbus/segment"
)

// Errors of checked appends (each a kind: hasKind knows them).
var (
	// ErrProducerFenced: the record's producer epoch is older than the
	// producer's current one; a newer incarnation holds the name.
	ErrProducerFenced = errors.New("broker: producer fenced")
	// ErrSequenceGap: the producer's sequence skips ahead; the error is
	// also a *producer.GapError naming the sequence expected.
	ErrSequenceGap = errors.New("broker: producer sequence gap")
	// ErrProducerExpired: the partition no longer holds the producer's
	// state, so a resend cannot be told from a new record.
	ErrProducerExpired = errors.New("broker: producer state expired")
	// ErrUnknownProducer: a producer id the broker never issued.
	ErrUnknownProducer = errors.New("broker: unknown producer")
	// ErrExpectationFailed: a conditional append's expectation is false;
	// the error is an *ExpectationError with the actual value.
	ErrExpectationFailed = errors.New("broker: expectation failed")
	// ErrBatchRefused: an atomic batch was refused whole because one of
	// its records was, or because some of its records were duplicates
	// and others not.
	ErrBatchRefused = errors.New("broker: atomic batch refused")
)

// NoOffset is an offset that names no record: "no record yet" for an
// expectation, and the actual value when there is none.
const NoOffset = ^uint64(0)

// ExpectationError is a conditional append refused: Actual is the last
// offset found (NoOffset: none).
type ExpectationError struct {
	What   string // "partition" or "subject"
	Actual uint64
}

func (e *ExpectationError) Error() string {
	if e.Actual == NoOffset {
		return fmt.Sprintf("%v: the %s has no record yet", ErrExpectationFailed, e.What)
	}
	return fmt.Sprintf("%v: the %s's last offset is %d", ErrExpectationFailed, e.What, e.Actual)
}

// Unwrap makes errors.Is(err, ErrExpectationFailed) hold.
func (e *ExpectationError) Unwrap() error { return ErrExpectationFailed }

// Check is what one record of a checked append asks beyond being stored.
// The zero Check asks nothing.
type Check struct {
	// Producer: the record's body carries ProducerID and Sequence, to be
	// checked against the partition's producer table; Epoch is the one
	// the connection was given by InitProducer.
	Producer   bool
	ProducerID uint64
	Sequence   uint64
	Epoch      uint32
	// MessageID is the record's ib-msg-id header (nil: none), deduplicated
	// within the stream's window.
	MessageID []byte
	// Subject is the record's subject, kept in the partition's subject
	// index and compared by ExpectLastSubject.
	Subject []byte
	// ExpectLast: the partition's last assigned offset must be
	// ExpectLastOffset (NoOffset: the partition never had a record).
	ExpectLast       bool
	ExpectLastOffset uint64
	// ExpectLastSubject: the last offset of a record with Subject must be
	// ExpectLastSubjectOffset (NoOffset: none yet).
	ExpectLastSubject       bool
	ExpectLastSubjectOffset uint64
}

// OutcomeKind says what became of one record of a checked append.
type OutcomeKind uint8

// The outcomes of a checked record.
const (
	Stored    OutcomeKind = iota // appended at Offset
	Duplicate                    // stored before: at Offset when OffsetKnown; nothing new stored
	Refused                      // Err says why; nothing stored
)

// Outcome is the fate of one record of a checked append.
type Outcome struct {
	Kind        OutcomeKind
	Offset      uint64
	OffsetKnown bool
	Err         error
}

// CheckedRun is a run of records for one partition, each with its Check.
// The caller fills Bodies, CRCs, Checks and FrameBytes; the append fills
// Outcomes. The scratch slices are kept between runs so a caller reusing
// its CheckedRun allocates nothing.
type CheckedRun struct {
	Bodies     [][]byte
	CRCs       []uint32
	Checks     []Check
	FrameBytes int // of the whole run; what is stored may be less
	// Atomic: the run is one atomic batch: stored whole (in one segment,
	// under one commit frame), answered whole as a duplicate, or refused
	// whole.
	Atomic   bool
	Outcomes []Outcome

	stored     [][]byte
	storedCRCs []uint32
	storedAt   []int // index in the run of each stored record
}

// Reset empties the run, keeping its capacity.
func (r *CheckedRun) Reset() {
	clear(r.Bodies)
	clear(r.Checks)
	clear(r.stored)
	r.Bodies, r.CRCs, r.Checks, r.Outcomes = r.Bodies[:0], r.CRCs[:0], r.Checks[:0], r.Outcomes[:0]
	r.stored, r.storedCRCs, r.storedAt = r.stored[:0], r.storedCRCs[:0], r.storedAt[:0]
	r.FrameBytes, r.Atomic = 0, false
}

// TryAppendChecked is TryAppend for a run whose records carry checks: under
// the partition's check lock, each record is checked against the state
// its predecessors left (the producer table, the message-id window, the
// subject index, the head of the log — records staged but not yet durable
// included), the records that pass are staged as one batch, and the
// state is updated with their offsets. The ticket completes when every
// answer may be sent: the stored records are durable, and so is every
// earlier record an answer names (a duplicate's first copy, the actual
// last offset of a failed expectation). ErrFull (unwrapped) stages
// nothing and changes no state: try the whole run again later.
func (p *Partition) TryAppendChecked(run *CheckedRun) (Ticket, error) {
	return p.appendChecked(run, false)
}

// TryCommitChecked is TryAppendChecked that writes and syncs inline when
// the log is idle (TryCommit).
func (p *Partition) TryCommitChecked(run *CheckedRun) (Ticket, error) {
	return p.appendChecked(run, true)
}

func (p *Partition) appendChecked(run *CheckedRun, inline bool) (Ticket, error) {
	var err error
	if run.Atomic {
		err = p.admitAtomic(run.Bodies, run.CRCs, run.FrameBytes)
	} else {
		err = p.broker.admitRecords(run.FrameBytes, false)
	}
	if err != nil {
		return Ticket{}, storageError(err)
	}
	p.checkMu.Lock()
	if p.replicated {
		if err := p.refreshLocked(); err != nil {
			p.checkMu.Unlock()
			return Ticket{}, err
		}
	}
	head := p.head()
	referenced := p.classify(run, head)
	if run.Atomic {
		wholeBatch(run)
	}
	var ticket Ticket
	if len(run.stored) > 0 {
		var write segment.InlineWrite
		ticket.Ticket, write, err = p.stageLocked(run.stored, run.storedCRCs, inline, run.Atomic)
		if err == nil {
			p.remember(run, ticket.First)
		}
		p.checkMu.Unlock()
		write.Finish()
		if err != nil {
			return Ticket{}, storageError(err)
		}
	} else if referenced != NoOffset {
		ticket.Ticket = p.ticketFor(referenced)
		p.checkMu.Unlock()
	} else {
		ticket.Ticket = segment.CompletedTicket()
		p.checkMu.Unlock()
	}
	for i := range run.Outcomes {
		if o := &run.Outcomes[i]; o.Kind == Stored {
			o.Offset += ticket.First
		} else if o.Kind == Duplicate && o.OffsetKnown && o.Offset >= head {
			o.Offset = o.Offset - head + ticket.First
		}
	}
	return ticket, nil
}

// wholeBatch makes an atomic batch's outcomes all-or-nothing: any refusal
// refuses every record, and duplicates beside new records refuse it too
// (a resend is all duplicates; anything else is a different batch).
func wholeBatch(run *CheckedRun) {
	var refused error
	duplicates := 0
	for i := range run.Outcomes {
		switch o := &run.Outcomes[i]; {
		case o.Kind == Refused && refused == nil:
			refused = fmt.Errorf("%w: record %d of %d: %w", ErrBatchRefused, i+1, len(run.Outcomes), o.Err)
		case o.Kind == Duplicate:
			duplicates++
		}
	}
	if refused == nil && duplicates > 0 && duplicates < len(run.Outcomes) {
		refused = fmt.Errorf("%w: %d of its %d records were stored before and the others not", ErrBatchRefused, duplicates, len(run.Outcomes))
	}
	if refused == nil {
		return
	}
	for i := range run.Outcomes {
		run.Outcomes[i] = Outcome{Kind: Refused, Err: refused}
	}
	run.stored, run.storedCRCs, run.storedAt = run.stored[:0], run.storedCRCs[:0], run.storedAt[:0]
}

// classify decides each record's outcome against the partition's state
// and the records before it in the run, fills run.stored with the records
// that pass, and returns the highest earlier offset an answer names
// (NoOffset: none). Stored outcomes hold their index among the stored
// records, and duplicates of records of this run head plus that index,
// until the batch has its offsets. REQUIRES: p.checkMu held.
func (p *Partition) classify(run *CheckedRun, head uint64) uint64 {
	run.stored, run.storedCRCs, run.storedAt = run.stored[:0], run.storedCRCs[:0], run.storedAt[:0]
	if cap(run.Outcomes) < len(run.Bodies) {
		run.Outcomes = make([]Outcome, len(run.Bodies))
	}
	run.Outcomes = run.Outcomes[:len(run.Bodies)]
	referenced := NoOffset
	refer := func(offset uint64) {
		if offset < head && (referenced == NoOffset || offset > referenced) {
			referenced = offset
		}
	}
	for i := range run.Bodies {
		outcome := p.check(run, i, head)
		run.Outcomes[i] = outcome
		switch { // every outcome is written whole: no clear needed
		case outcome.Kind == Stored:
			outcome.Offset = uint64(len(run.stored))
			run.Outcomes[i] = outcome
			run.stored = append(run.stored, run.Bodies[i])
			run.storedCRCs = append(run.storedCRCs, run.CRCs[i])
			run.storedAt = append(run.storedAt, i)
		case outcome.Kind == Duplicate && outcome.OffsetKnown:
			refer(outcome.Offset)
		case outcome.Kind == Refused:
			var expectation *ExpectationError
			if errors.As(outcome.Err, &expectation) && expectation.Actual != NoOffset {
				refer(expectation.Actual)
			}
		}
	}
	return referenced
}

// check decides one record's outcome: producer dedup first, then the
// message id, then the expectations (a resend is a duplicate, never a
// conflict).
func (p *Partition) check(run *CheckedRun, i int, head uint64) Outcome {
	c := &run.Checks[i]
	if c.Producer {
		if outcome, decided := p.checkProducer(run, c, head); decided {
			return outcome
		}
	}
	if p.replicated && (c.MessageID != nil || c.ExpectLastSubject) {
		return Outcome{Kind: Refused, Err: fmt.Errorf("%w: message-id dedup and subject expectations are not served on replicated streams yet "+
			"(idempotent producers are: they never duplicate across a failover)", ErrInvalidArgument)}
	}
	if c.MessageID != nil && p.dedup != nil {
		if k := run.lastStored(func(o *Check) bool { return bytes.Equal(o.MessageID, c.MessageID) }); k >= 0 {
			return Outcome{Kind: Duplicate, Offset: head + uint64(k), OffsetKnown: true}
		}
		if offset, found := p.dedup.Lookup(c.MessageID); found {
			return Outcome{Kind: Duplicate, Offset: offset, OffsetKnown: true}
		}
	}
	if c.ExpectLast {
		last := NoOffset
		if next := head + uint64(len(run.stored)); next > 0 {
			last = next - 1
		}
		if last != c.ExpectLastOffset {
			return Outcome{Kind: Refused, Err: &ExpectationError{What: "partition", Actual: last}}
		}
	}
	if c.ExpectLastSubject {
		last, err := p.lastOfSubject(run, c.Subject, head)
		if err != nil {
			return Outcome{Kind: Refused, Err: err}
		}
		if last != c.ExpectLastSubjectOffset {
			return Outcome{Kind: Refused, Err: &ExpectationError{What: "subject", Actual: last}}
		}
	}
	return Outcome{Kind: Stored}
}

// checkProducer applies the producer table: decided is false when the
// record is new and the other checks decide.
func (p *Partition) checkProducer(run *CheckedRun, c *Check, head uint64) (Outcome, bool) {
	// A record of the same producer earlier in the run decides the
	// sequence expected (the table knows only what is already staged),
	// and vouches for the epoch it was checked with.
	k := run.lastStored(func(o *Check) bool { return o.Producer && o.ProducerID == c.ProducerID })
	if k < 0 || run.Checks[run.storedAt[k]].Epoch != c.Epoch {
		epoch, issued := p.broker.ProducerEpoch(c.ProducerID)
		switch {
		case !issued:
			return Outcome{Kind: Refused, Err: fmt.Errorf("%w: producer id %d was never issued by this broker", ErrUnknownProducer, c.ProducerID)}, true
		case c.Epoch < epoch:
			return Outcome{Kind: Refused, Err: fmt.Errorf("%w: epoch %d, the producer is at epoch %d", ErrProducerFenced, c.Epoch, epoch)}, true
		}
	}
	if k >= 0 {
		previous := run.Checks[run.storedAt[k]].Sequence
		switch {
		case c.Sequence == previous+1:
			return Outcome{}, false
		case c.Sequence > previous+1:
			return Outcome{Kind: Refused, Err: p.gap(fmt.Errorf("%w: %w", ErrSequenceGap, &producer.GapError{Expected: previous + 1}))}, true
		}
		if j := run.lastStored(func(o *Check) bool { return o.Producer && o.ProducerID == c.ProducerID && o.Sequence == c.Sequence }); j >= 0 {
			return Outcome{Kind: Duplicate, Offset: head + uint64(j), OffsetKnown: true}, true
		}
	}
	if p.producers == nil {
		return Outcome{}, false
	}
	verdict, err := p.producers.Check(c.ProducerID, c.Sequence)
	switch {
	case errors.Is(err, producer.ErrSequenceGap):
		return Outcome{Kind: Refused, Err: p.gap(fmt.Errorf("%w: %w", ErrSequenceGap, err))}, true
	case errors.Is(err, producer.ErrExpired):
		return Outcome{Kind: Refused, Err: fmt.Errorf("%w: %w", ErrProducerExpired, err)}, true
	case err != nil:
		return Outcome{Kind: Refused, Err: fmt.Errorf("%w: %w", ErrUnknownProducer, err)}, true
	case verdict.Duplicate:
		return Outcome{Kind: Duplicate, Offset: verdict.Offset, OffsetKnown: verdict.OffsetKnown}, true
	}
	return Outcome{}, false
}

// gap is the refusal of a record whose producer skipped a sequence. On a
// replicated partition a gap is what a pipelined producer meets while the
// leadership moves (an earlier record refused by a node that was not yet
// leading, a later one taken once it was): it is answered as no leader,
// so the producer resends from the first record not stored, in order;
// nothing is stored either way.
func (p *Partition) gap(err error) error {
	if !p.replicated {
		return err
	}
	return NoLeader(p.stream, p.index, "the producer's sequence skips ahead after a change of leader ("+err.Error()+"); resend from the first record not acknowledged")
}

// lastOfSubject is the last offset of a record with subject: one stored
// earlier in the run, or what the subject index says.
func (p *Partition) lastOfSubject(run *CheckedRun, subject []byte, head uint64) (uint64, error) {
	if k := run.lastStored(func(o *Check) bool { return bytes.Equal(o.Subject, subject) }); k >= 0 {
		return head + uint64(k), nil
	}
	offset, found, err := p.lastSubjectOffset(subject)
	if err != nil || !found {
		return NoOffset, err
	}
	return offset, nil
}

// lastStored returns the index among the stored records of the last one
// whose check matches, or -1.
func (r *CheckedRun) lastStored(match func(*Check) bool) int {
	for k := len(r.storedAt) - 1; k >= 0; k-- {
		if match(&r.Checks[r.storedAt[k]]) {
			return k
		}
	}
	return -1
}

// remember records the stored records' offsets in the partition's state.
// REQUIRES: p.checkMu held.
// The run is staged in one instant, so one clock read serves all its
// records: read per record, the clock costs more than the table's own
// bookkeeping.
func (p *Partition) remember(run *CheckedRun, first uint64) {
	var now time.Duration
	clocked := false
	for k, i := range run.storedAt {
		c, offset := &run.Checks[i], first+uint64(k)
		if c.Producer && p.producers != nil {
			if !clocked {
				now, clocked = p.broker.clock.Now(), true
			}
			p.producers.RecordAt(c.ProducerID, c.Sequence, offset, now)
		}
		if c.MessageID != nil && p.dedup != nil {
			p.dedup.Insert(c.MessageID, offset)
		}
	}
}
