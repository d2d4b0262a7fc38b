package ring

import "sync/atomic"

// SPSC is a bounded single-producer, single-consumer ring: Lamport's
// wait-free circular buffer with FastForward-style cache-line separation
// and MCRingBuffer-style cached positions (see the package documentation).
//
// Exactly one goroutine at a time may push (the producer) and exactly one
// may pop (the consumer); Len and Cap are safe from any goroutine. An SPSC
// must not be copied after first use.
type SPSC[T any] struct {
	_ cacheLinePad
	// Read-only after construction and read by both sides; padded on both
	// sides so the slice header never shares a line with a written field.
	slots []T
	mask  uint64
	_     cacheLinePad

	// Consumer side. popPosition is the next position to pop; only the
	// consumer writes it, and the producer reads it only when its cached
	// copy says the ring is full. cachedPushPosition is the consumer's last
	// look at pushPosition: it may lag, never lead, so a stale value can
	// only make the ring look emptier than it is.
	popPosition        atomic.Uint64
	cachedPushPosition uint64
	_                  cacheLinePad

	// Producer side, mirroring the consumer side: a stale
	// cachedPopPosition can only make the ring look fuller than it is.
	pushPosition      atomic.Uint64
	cachedPopPosition uint64
	_                 cacheLinePad
}

// NewSPSC returns an empty SPSC ring holding at least capacity values; the
// capacity is rounded up to a power of two. All memory the ring will ever
// use is allocated here. It panics when capacity is outside [1, 1<<30].
func NewSPSC[T any](capacity int) *SPSC[T] {
	capacity = roundCapacity(capacity, 1)
	return &SPSC[T]{slots: make([]T, capacity), mask: uint64(capacity - 1)}
}

// TryPush appends value and reports true, or reports false without waiting
// when the ring is full; the caller applies backpressure. Producer only.
func (r *SPSC[T]) TryPush(value T) bool {
	position := r.pushPosition.Load()
	if position-r.cachedPopPosition > r.mask {
		// Full by the cached view; only now pay for reading the
		// consumer's cache line, once.
		r.cachedPopPosition = r.popPosition.Load()
		if position-r.cachedPopPosition > r.mask {
			return false
		}
	}
	r.slots[position&r.mask] = value
	// Publishing the position after the slot write is what makes the
	// value visible to the consumer (see the package documentation).
	r.pushPosition.Store(position + 1)
	return true
}

// TryPop removes and returns the oldest value, or reports false without
// waiting when the ring is empty. Consumer only.
func (r *SPSC[T]) TryPop() (T, bool) {
	var zero T
	position := r.popPosition.Load()
	if position == r.cachedPushPosition {
		r.cachedPushPosition = r.pushPosition.Load()
		if position == r.cachedPushPosition {
			return zero, false
		}
	}
	slot := &r.slots[position&r.mask]
	value := *slot
	// Zero the slot so the ring does not keep the value's referents
	// alive until the producer laps it.
	*slot = zero
	r.popPosition.Store(position + 1)
	return value, true
}

// PopBatch appends up to cap(destination)-len(destination) values to
// destination, oldest first, and returns the extended slice. It never
// grows destination, so it never allocates, and it publishes the new pop
// position once for the whole batch. Consumer only.
func (r *SPSC[T]) PopBatch(destination []T) []T {
	room := uint64(cap(destination) - len(destination))
	position := r.popPosition.Load()
	available := r.cachedPushPosition - position
	if available < room {
		r.cachedPushPosition = r.pushPosition.Load()
		available = r.cachedPushPosition - position
	}
	count := min(available, room)
	if count == 0 {
		return destination
	}
	// The batch is at most two contiguous runs: up to the end of the slot
	// array, then from its start.
	start := position & r.mask
	end := min(start+count, uint64(len(r.slots)))
	destination = append(destination, r.slots[start:end]...)
	clear(r.slots[start:end])
	if wrapped := count - (end - start); wrapped > 0 {
		destination = append(destination, r.slots[:wrapped]...)
		clear(r.slots[:wrapped])
	}
	r.popPosition.Store(position + count)
	return destination
}

// Len returns the number of values in the ring. It is exact when called by
// the producer or the consumer while the other side is idle, and otherwise
// a snapshot that may already be stale. Any goroutine.
func (r *SPSC[T]) Len() int {
	popPosition := r.popPosition.Load()
	return occupancy(popPosition, r.pushPosition.Load(), r.mask+1)
}

// Cap returns the number of values the ring holds when full: the requested
// capacity rounded up to a power of two. Any goroutine.
func (r *SPSC[T]) Cap() int {
	return len(r.slots)
}
