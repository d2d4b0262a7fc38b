package ring

import "sync/atomic"

// mpscSlot is one cell of an MPSC ring. Its sequence says what the cell
// holds relative to a position p that maps to it (p & mask == index):
//
//	sequence == p        free, waiting for the producer that claims p
//	sequence == p + 1    published: holds the value pushed at p
//	sequence == p + cap  popped: free for the producer of the next lap
//
// The producer that claims p is the only writer of value until it
// publishes; afterwards the consumer is, until it frees the cell.
type mpscSlot[T any] struct {
	sequence atomic.Uint64
	value    T
}

// MPSC is a bounded multi-producer, single-consumer ring: Vyukov's bounded
// MPMC queue with the dequeue side specialised to one consumer, so popping
// needs no compare-and-swap (see the package documentation).
//
// Any number of goroutines may push concurrently; exactly one goroutine at
// a time may pop (the consumer). Len and Cap are safe from any goroutine.
// An MPSC must not be copied after first use.
type MPSC[T any] struct {
	_ cacheLinePad
	// Read-only after construction and read by every side; padded so the
	// slice header never shares a line with a written field.
	slots []mpscSlot[T]
	mask  uint64
	_     cacheLinePad

	// pushPosition is the next position a producer may claim; producers
	// advance it with compare-and-swap. It sits on its own line because
	// every producer hammers it and the consumer never needs to.
	pushPosition atomic.Uint64
	_            cacheLinePad

	// popPosition is the next position to pop. Only the consumer writes
	// it; it is atomic so Len may read it from any goroutine.
	popPosition atomic.Uint64
	_           cacheLinePad
}

// NewMPSC returns an empty MPSC ring holding at least capacity values; the
// capacity is rounded up to a power of two, and to at least 2 because the
// slot sequence encoding cannot tell "published" from "popped" with one
// slot. All memory the ring will ever use is allocated here. It panics when
// capacity is outside [1, 1<<30].
func NewMPSC[T any](capacity int) *MPSC[T] {
	capacity = roundCapacity(capacity, 2)
	ring := &MPSC[T]{slots: make([]mpscSlot[T], capacity), mask: uint64(capacity - 1)}
	for index := range ring.slots {
		ring.slots[index].sequence.Store(uint64(index))
	}
	return ring
}

// TryPush appends value and reports true, or reports false without waiting
// when the ring is full; the caller applies backpressure. Any goroutine,
// concurrently with other producers and the consumer.
//
// The retry loop is lock-free: a producer retries only because another
// producer's compare-and-swap succeeded, so some push always completes.
func (r *MPSC[T]) TryPush(value T) bool {
	position := r.pushPosition.Load()
	for {
		slot := &r.slots[position&r.mask]
		// Signed, so "the slot is a lap behind" reads as negative across
		// uint64 wraparound.
		lag := int64(slot.sequence.Load() - position)
		switch {
		case lag == 0:
			// The slot is free for this lap: claim the position. Winning
			// the compare-and-swap makes this producer the slot's only
			// writer until it publishes.
			if r.pushPosition.CompareAndSwap(position, position+1) {
				slot.value = value
				slot.sequence.Store(position + 1)
				return true
			}
			position = r.pushPosition.Load()
		case lag < 0:
			// The slot still holds the value pushed one lap ago, so every
			// slot is taken: full.
			return false
		default:
			// Another producer claimed this position since we loaded it.
			position = r.pushPosition.Load()
		}
	}
}

// TryPop removes and returns the oldest value, or reports false without
// waiting when none is ready. Consumer only.
//
// "None ready" includes a producer that has claimed the oldest position
// but not yet published it: values pushed after it stay invisible until it
// does. TryPop never waits for that producer; it reports false and the
// caller polls again later, as it would on an empty ring.
func (r *MPSC[T]) TryPop() (T, bool) {
	var zero T
	position := r.popPosition.Load()
	slot := &r.slots[position&r.mask]
	if slot.sequence.Load() != position+1 {
		return zero, false
	}
	value := slot.value
	r.release(slot, position)
	r.popPosition.Store(position + 1)
	return value, true
}

// PopBatch appends up to cap(destination)-len(destination) ready values to
// destination, oldest first, and returns the extended slice. It stops at
// the first position not yet published, never grows destination (so never
// allocates), and publishes the new pop position once for the batch.
// Consumer only.
func (r *MPSC[T]) PopBatch(destination []T) []T {
	room := cap(destination) - len(destination)
	start := r.popPosition.Load()
	position := start
	for ; room > 0; room-- {
		slot := &r.slots[position&r.mask]
		if slot.sequence.Load() != position+1 {
			break
		}
		destination = append(destination, slot.value)
		r.release(slot, position)
		position++
	}
	if position != start {
		r.popPosition.Store(position)
	}
	return destination
}

// release zeroes a popped slot, so the ring does not keep the value's
// referents alive, and then hands it to the producer of the next lap. The
// zeroing must come first: once the sequence is stored a producer may
// write the slot.
func (r *MPSC[T]) release(slot *mpscSlot[T], position uint64) {
	var zero T
	slot.value = zero
	slot.sequence.Store(position + r.mask + 1)
}

// Len returns the number of positions claimed by producers and not yet
// popped. It is approximate: it counts pushes still in flight (claimed but
// not published), and it is a snapshot that may already be stale. Any
// goroutine.
func (r *MPSC[T]) Len() int {
	popPosition := r.popPosition.Load()
	return occupancy(popPosition, r.pushPosition.Load(), r.mask+1)
}

// Cap returns the number of values the ring holds when full: the requested
// capacity rounded up to a power of two, and at least 2. Any goroutine.
func (r *MPSC[T]) Cap() int {
	return len(r.slots)
}
