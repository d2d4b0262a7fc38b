package arena

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
)

// Slab is a fixed pool of equal-sized buffers carved from one allocation
// made up front. It never allocates after NewSlab: when every buffer is
// held, Get reports false and the caller applies backpressure (stops
// reading a connection) instead of growing memory with the backlog.
//
// Free buffers sit on a stack of indexes behind a mutex. A lock-free stack
// needs an ABA tag and is easy to get subtly wrong; a slab mostly serves
// one reactor, so the mutex is uncontended (tens of nanoseconds, see
// BenchmarkSlabGetRelease) and obviously correct. The stack also hands out
// the most recently released buffer first, which is still warm in cache.
//
// All methods are safe for concurrent use.
type Slab struct {
	name       string
	bufferSize int
	count      int
	offHeap    bool
	// memory is written once by NewSlab and never reassigned, so Bytes
	// reads it without the lock. After Close it may be unmapped; the
	// generations below keep stale Buffers from reaching it.
	memory []byte
	// lazy slabs (NewLazySlab) have no memory up front: buffer i is
	// mapped into pieces[i] by the first Get that hands it out and kept
	// until Close. The holder maps it outside the lock; the next holder
	// sees the slice through the free-list mutex (happens-before).
	lazy   bool
	pieces [][]byte
	// mapFailures counts lazy Gets that found a free buffer but could not
	// map it (the system is out of memory or address space).
	mapFailures atomic.Int64
	// generations[i] advances on every release of buffer i, so a stale
	// copy of a Buffer (released already) no longer matches. Atomic because
	// Bytes checks it without the lock.
	generations   []atomic.Uint32
	staleReleases atomic.Int64
	exhaustions   atomic.Int64

	mu struct {
		sync.Mutex
		free   []int32 // indexes of free buffers; cap == count, never reallocated
		closed bool
	}
}

// Buffer is one buffer of a Slab, held from Get until Release. It is a
// small value (a pointer and two integers); copies refer to the same
// buffer, and only the first Release of any copy counts.
type Buffer struct {
	slab       *Slab
	index      int32
	generation uint32
}

// NewSlab allocates count buffers of bufferSize bytes each, in one piece,
// and registers the bytes with budget under name and knob. With offHeap the
// memory is an anonymous private mapping outside the Go heap (on unix; a
// Go slice elsewhere, see OffHeap): the kind the kernel may write into
// asynchronously. Otherwise it is one Go []byte.
//
// The registered size is rounded up to whole pages, because that is what
// the kernel or the Go allocator actually reserves. Bookkeeping (8 bytes
// per buffer on the Go heap, under GOMEMLIMIT) is not counted.
func NewSlab(budget *Budget, name, knob string, bufferSize, count int, offHeap bool) (*Slab, error) {
	if budget == nil {
		return nil, fmt.Errorf("%w: slab %q has no budget to register with", ErrInvalidArgument, name)
	}
	if bufferSize <= 0 || count <= 0 || count > math.MaxInt32 {
		return nil, fmt.Errorf("%w: slab %q needs a positive buffer size and 1 to %d buffers, got %d × %d",
			ErrInvalidArgument, name, math.MaxInt32, count, bufferSize)
	}
	if bufferSize > math.MaxInt/count {
		return nil, fmt.Errorf("%w: slab %q of %d × %d bytes overflows", ErrInvalidArgument, name, count, bufferSize)
	}
	size := bufferSize * count
	slab := &Slab{
		name:        name,
		bufferSize:  bufferSize,
		count:       count,
		offHeap:     offHeap && offHeapSupported,
		generations: make([]atomic.Uint32, count),
	}
	if slab.offHeap {
		memory, err := mapAnonymous(size)
		if err != nil {
			return nil, fmt.Errorf("arena: map %s off-heap for slab %q: %w", FormatBytes(int64(size)), name, err)
		}
		slab.memory = memory
	} else {
		slab.memory = make([]byte, size)
	}
	// Fill the stack so that index 0 is handed out first: predictable for
	// tests and for anyone reading a memory dump.
	slab.mu.free = make([]int32, count)
	for position := range slab.mu.free {
		slab.mu.free[position] = int32(count - 1 - position)
	}
	budget.Register(name, knob, roundUpToPage(int64(size)))
	return slab, nil
}

// NewLazySlab is NewSlab for pools whose worst case is large and rarely
// reached, such as the append staging of every stream the broker may
// serve: the budget counts all count buffers, but each is mapped (off the
// Go heap) only when first handed out, and then kept for reuse until
// Close. Reserving the worst case up front would cost address space a
// 32-bit device does not have, and a small device's overcommit check
// refuses mappings larger than its memory. Get on a lazy slab may make
// one mmap system call; it still never grows past count buffers.
//
// On platforms without anonymous mappings the buffers are Go slices,
// allocated on first Get (see OffHeap).
func NewLazySlab(budget *Budget, name, knob string, bufferSize, count int) (*Slab, error) {
	if budget == nil {
		return nil, fmt.Errorf("%w: slab %q has no budget to register with", ErrInvalidArgument, name)
	}
	if bufferSize <= 0 || count <= 0 || count > math.MaxInt32 || bufferSize > math.MaxInt/count {
		return nil, fmt.Errorf("%w: slab %q needs a positive buffer size and 1 to %d buffers, got %d × %d",
			ErrInvalidArgument, name, math.MaxInt32, count, bufferSize)
	}
	slab := &Slab{name: name, bufferSize: bufferSize, count: count, offHeap: offHeapSupported, lazy: true,
		pieces: make([][]byte, count), generations: make([]atomic.Uint32, count)}
	slab.mu.free = make([]int32, count)
	for position := range slab.mu.free {
		slab.mu.free[position] = int32(count - 1 - position)
	}
	budget.Register(name, knob, int64(count)*roundUpToPage(int64(bufferSize)))
	return slab, nil
}

// Get returns a free buffer, or false when every buffer is held (or the
// slab is closed). It never allocates: exhaustion is the caller's signal
// to apply backpressure, and it is counted in Exhaustions.
func (slab *Slab) Get() (Buffer, bool) {
	slab.mu.Lock()
	last := len(slab.mu.free) - 1
	if last < 0 || slab.mu.closed {
		closed := slab.mu.closed
		slab.mu.Unlock()
		if !closed {
			slab.exhaustions.Add(1)
		}
		return Buffer{}, false
	}
	index := slab.mu.free[last]
	slab.mu.free = slab.mu.free[:last]
	slab.mu.Unlock()
	if slab.lazy && slab.pieces[index] == nil && !slab.mapPiece(index) {
		return Buffer{}, false
	}
	// Only the holder's Release advances the generation, and we are the
	// holder now, so reading it after unlocking is safe.
	return Buffer{slab: slab, index: index, generation: slab.generations[index].Load()}, true
}

// mapPiece maps buffer index of a lazy slab for its first holder, or puts
// the index back and reports false when the system refuses the memory.
func (slab *Slab) mapPiece(index int32) bool {
	if !slab.offHeap {
		slab.pieces[index] = make([]byte, slab.bufferSize)
		return true
	}
	piece, err := mapAnonymous(slab.bufferSize)
	if err != nil {
		slab.mapFailures.Add(1)
		slab.mu.Lock()
		slab.mu.free = append(slab.mu.free, index)
		slab.mu.Unlock()
		return false
	}
	slab.pieces[index] = piece[:slab.bufferSize:slab.bufferSize]
	return true
}

// Bytes returns the whole buffer (BufferSize bytes, capacity capped so an
// append cannot spill into the neighbour). The bytes are valid until
// Release; after Release the memory belongs to the next Get. Bytes of a
// released (stale) or zero Buffer is nil, so a late use fails loudly
// instead of scribbling on another holder's data.
func (buffer Buffer) Bytes() []byte {
	slab := buffer.slab
	if slab == nil || slab.generations[buffer.index].Load() != buffer.generation {
		return nil
	}
	if slab.lazy {
		return slab.pieces[buffer.index]
	}
	start := int(buffer.index) * slab.bufferSize
	end := start + slab.bufferSize
	return slab.memory[start:end:end]
}

// Index is the buffer's position in its slab, fixed for the slab's life.
// It is the token to hand the kernel (io_uring user_data, a provided-buffer
// id) instead of a Go pointer.
func (buffer Buffer) Index() int {
	return int(buffer.index)
}

// Release returns the buffer to its slab. Releasing twice, releasing a
// stale copy, or releasing the zero Buffer does not touch the free list:
// it returns an error wrapping ErrStaleRelease and is counted in
// StaleReleases. We chose that over panicking because the broken release
// itself is harmless once detected (nobody gets a buffer twice), while a
// panic would drop every connection of the process; the counter makes the
// bug visible in metrics and tests assert on the error.
func (buffer Buffer) Release() error {
	slab := buffer.slab
	if slab == nil {
		return fmt.Errorf("%w: zero Buffer", ErrStaleRelease)
	}
	slab.mu.Lock()
	if !slab.generations[buffer.index].CompareAndSwap(buffer.generation, buffer.generation+1) {
		slab.mu.Unlock()
		slab.staleReleases.Add(1)
		return fmt.Errorf("%w: buffer %d of slab %q was already released", ErrStaleRelease, buffer.index, slab.name)
	}
	slab.mu.free = append(slab.mu.free, buffer.index)
	slab.mu.Unlock()
	return nil
}

// Close frees the slab's memory (unmaps it when off-heap). It refuses with
// an error wrapping ErrInUse while any buffer is held, because the holder
// (or the kernel, mid-I/O) may still write into it; release everything
// first (after cancelling and draining in-flight I/O). Close is explicit on
// purpose: there is no finalizer to fall back on. Closing twice is a no-op.
func (slab *Slab) Close() error {
	slab.mu.Lock()
	defer slab.mu.Unlock()
	if slab.mu.closed {
		return nil
	}
	if held := slab.count - len(slab.mu.free); held > 0 {
		return fmt.Errorf("%w: %d of %d buffers of slab %q are still held", ErrInUse, held, slab.count, slab.name)
	}
	slab.mu.closed = true
	if !slab.offHeap {
		return nil // the Go heap reclaims it once the Slab is unreachable
	}
	if slab.lazy {
		var failed error
		for index, piece := range slab.pieces {
			if piece != nil {
				failed = errors.Join(failed, unmapAnonymous(piece[:cap(piece)]))
				slab.pieces[index] = nil
			}
		}
		if failed != nil {
			return fmt.Errorf("arena: unmap slab %q: %w", slab.name, failed)
		}
		return nil
	}
	if err := unmapAnonymous(slab.memory); err != nil {
		return fmt.Errorf("arena: unmap slab %q: %w", slab.name, err)
	}
	return nil
}

// InUse returns how many buffers are held right now.
func (slab *Slab) InUse() int {
	slab.mu.Lock()
	defer slab.mu.Unlock()
	return slab.count - len(slab.mu.free)
}

// Capacity returns the number of buffers in the slab.
func (slab *Slab) Capacity() int { return slab.count }

// BufferSize returns the size of every buffer, in bytes.
func (slab *Slab) BufferSize() int { return slab.bufferSize }

// Name returns the name the slab registered with its budget.
func (slab *Slab) Name() string { return slab.name }

// OffHeap reports whether the memory really is outside the Go heap. It is
// false when NewSlab was asked for a heap slab, or on platforms without
// anonymous mappings, where such memory must only serve synchronous
// system calls.
func (slab *Slab) OffHeap() bool { return slab.offHeap }

// MapFailures counts the Gets of a lazy slab that found a free buffer but
// could not map its memory: the system itself is out of memory.
func (slab *Slab) MapFailures() int64 { return slab.mapFailures.Load() }

// Exhaustions counts the Get calls that found no free buffer: how often
// callers had to apply backpressure.
func (slab *Slab) Exhaustions() int64 { return slab.exhaustions.Load() }

// StaleReleases counts the releases that were ignored because the buffer
// was not held (a double release: always a bug in the caller).
func (slab *Slab) StaleReleases() int64 { return slab.staleReleases.Load() }

// roundUpToPage rounds size up to a whole number of memory pages.
func roundUpToPage(size int64) int64 {
	page := int64(os.Getpagesize())
	if size > math.MaxInt64-page {
		return size
	}
	return (size + page - 1) / page * page
}
