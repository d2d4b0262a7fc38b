// Package arena owns IronBus's preallocated memory and the RAM budget that
// bounds it.
//
// What it owns:
//   - Budget: every pool registers the bytes it may ever hold, each as a
//     line naming the knob that sizes it ("connection read buffers",
//     "--max-connections × 64 KiB"). At boot the broker calls
//     Budget.Check(--ram-ceiling) and refuses to start when the sum exceeds
//     the ceiling, with a message listing each line, so memory is a
//     function of configuration and never of backlog (invariant I8).
//   - Slab: count buffers of one size, allocated up front in one piece,
//     for connection read buffers and append buffers. Get hands a buffer
//     out, Release takes it back.
//   - SharedPool: a byte capacity shared by many connections for the rare
//     large frame, with FIFO admission, so no connection has to reserve the
//     worst case for itself.
//   - ReadRSS and ReadAnonymous, to measure what the process really holds
//     in tests and benchmarks.
//
// Lifetime rule: a Buffer's bytes are valid until Release; after Release
// the memory belongs to the next Get. The same holds for a Lease. Nothing
// here is released implicitly: there are no finalizers, and a Slab is
// freed only by an explicit Close, which refuses while any buffer is held.
// Whoever hands a buffer to the kernel (an io_uring read, a provided-buffer
// ring) releases it only after the completion arrives, and at shutdown
// only after cancelling and draining in-flight operations.
//
// Why off-heap: the kernel writes into these buffers, sometimes long after
// the system call that submitted them (io_uring). The Go GC does not move
// heap objects, but goroutine stacks move, and an address passed as a
// uintptr hides the reference from escape analysis and the GC, so a Go
// buffer can be moved or freed while the kernel still holds its address.
// An anonymous private mapping (unix.Mmap with MAP_ANON|MAP_PRIVATE) is
// invisible to the runtime: it never moves and is never collected. The
// same property means it is outside GOMEMLIMIT, which is why the Budget
// counts it explicitly: the runtime will not bound it for us. Heap slabs
// (and off-heap slabs on platforms without mmap, see Slab.OffHeap) are for
// synchronous I/O only.
//
// Invariants:
//   - A pool never grows past its budget: all memory of a Slab is
//     allocated in NewSlab, and a SharedPool never leases more than its
//     capacity.
//   - Exhaustion is reported, not hidden by allocation: Get returns false
//     and counts it; the caller applies backpressure.
//   - No buffer is held by two holders at once: a double release is
//     detected by a per-buffer generation, ignored, counted and returned as
//     ErrStaleRelease.
//   - No finalizers; release and close are explicit.
package arena
