package segment

import (
	"fmt"
	"sync"
)

// NextOffset is the offset the next appended record gets: every record
// below it has been assigned, committed or not. A caller that serialises
// its own appends to the log (a check followed by its append) reads the
// head of the log here.
func (l *Log) NextOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.nextOffset
}

// TicketFor returns a ticket that completes once the record at offset,
// already assigned (below NextOffset), is committed, or fails with it:
// for an answer that speaks of an earlier record (a duplicate is "stored
// at offset") and so must not be sent before that record is durable. It
// is complete at once when the record is already committed.
func (l *Log) TicketFor(offset uint64) Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.failure != nil {
		return Ticket{First: offset, Count: 1, b: doneBatch(l.mu.failure)}
	}
	if offset < l.committed.Load().next {
		return Ticket{First: offset, Count: 1, b: doneBatch(nil)}
	}
	for _, b := range l.mu.inflight {
		if offset >= b.first && offset < b.end() {
			return Ticket{First: offset, Count: 1, b: b}
		}
	}
	if b := l.mu.staging; b.count > 0 && offset >= b.first && offset < b.end() {
		return Ticket{First: offset, Count: 1, b: b}
	}
	// Past every batch and not committed: not assigned yet, a caller's
	// bug. Failing the answer is safer than claiming durability.
	return Ticket{First: offset, Count: 1, b: doneBatch(fmt.Errorf("%w: offset %d is not assigned yet", ErrOffsetOutOfRange, offset))}
}

// doneBatch stands for records whose fate was settled before TicketFor:
// done, failed with err or (nil) committed, of no log.
func doneBatch(err error) *batch {
	b := &batch{done: make(chan struct{}), completed: true, err: err}
	close(b.done)
	return b
}

// CompletedTicket is a ticket of no records, complete without error: for
// an answer that waits on nothing.
func CompletedTicket() Ticket { return Ticket{b: doneBatch(nil)} }

// ExternalTicket is a ticket for records whose fate another component
// decides (a replicated partition: committed on a majority, or not):
// complete settles it, once, with nil (committed) or the error every
// record failed with; later calls do nothing. OnDone callbacks run on
// the goroutine that calls complete.
func ExternalTicket(first, count uint64) (Ticket, func(error)) {
	b := &batch{first: first, count: count, failFrom: first, done: make(chan struct{}), external: &sync.Mutex{}}
	complete := func(err error) {
		b.external.Lock()
		if b.completed {
			b.external.Unlock()
			return
		}
		b.err, b.completed = err, true
		notify := b.notify
		b.notify = nil
		close(b.done)
		b.external.Unlock()
		for _, fn := range notify {
			fn()
		}
	}
	return Ticket{First: first, Count: count, b: b}, complete
}
