// Package ring owns IronBus's bounded lock-free rings. There are two, both
// bounded, both cache-line padded:
//
//   - SPSC: one producer, one consumer. Each connection's produce
//     completions travel on one, from the session's reader to the
//     connection's writer (the wire session).
//   - MPSC: many producers, one consumer. Each reactor's task queue is
//     one: the flushes, resumes and closes other goroutines post to it
//     (completions coming back to the reactor), with a locked overflow list
//     behind it so no task is ever refused. A log's submissions go through
//     the appender's staging buffer instead, which copies each frame once,
//     straight into the batch (docs/BENCHMARKS.md, "Rings").
//
// # Invariants
//
//   - A ring never blocks: nothing parks, sleeps, takes a lock or spins
//     waiting for the other side. SPSC's methods and MPSC's consumer
//     methods finish in a bounded number of steps (wait-free); MPSC's
//     TryPush retries only when another producer's push succeeded
//     (lock-free). Waiting, when a caller wants it, belongs to the caller's
//     event loop and its wakeup path (package loop).
//   - A ring never allocates after construction. NewSPSC and NewMPSC
//     allocate every slot; TryPush, TryPop, PopBatch, Len and Cap allocate
//     nothing (the tests check with testing.AllocsPerRun).
//   - A full ring is reported, never hidden: TryPush returns false and the
//     caller applies backpressure (the reactor stops reading that
//     connection). A ring never drops, overwrites or grows.
//   - A popped slot is zeroed before it is handed back to producers, so a
//     ring never keeps a request's buffers alive after it is consumed.
//   - Order: SPSC is FIFO. MPSC is FIFO in claim order, so the values of any
//     one producer come out in the order that producer pushed them.
//
// # Who may call which method
//
// The single-producer and single-consumer contracts are the caller's
// responsibility: the ring does not check them, because checking would cost
// the shared write it exists to avoid. "One goroutine at a time" means the
// role may move between goroutines only through a happens-before edge
// (a channel send, a mutex, the loop's own hand-off).
//
//	method         SPSC                      MPSC
//	TryPush        the one producer          any goroutine, concurrently
//	TryPop         the one consumer          the one consumer
//	PopBatch       the one consumer          the one consumer
//	Len, Cap       any goroutine             any goroutine
//
// Len is a snapshot: by the time it returns, either side may have moved.
// For MPSC it also counts pushes that are claimed but not yet published.
// Use it for metrics and tests, not to decide whether TryPush will succeed.
//
// # SPSC: Lamport's ring with cached positions
//
// SPSC is the wait-free single-producer single-consumer circular buffer
// whose correctness Lamport proved in "Specifying Concurrent Program
// Modules" (ACM TOPLAS 5(2), 1983). Two free-running counters, pushPosition
// and popPosition, are each written by one side only; slot
// position&(capacity-1) holds the value pushed at that position, the ring
// is empty when the two are equal and full when they differ by the
// capacity. Capacities are powers of two so the modulo is a mask and the
// counters never need resetting (uint64 positions do not wrap in the life
// of a process).
//
// Two refinements make it cheap on a multi-core machine. First, as in
// FastForward (Giacomoni, Moseley and Vachharajani, "FastForward for
// Efficient Pipeline Parallelism", PPoPP 2008), the fields each side writes
// live on their own cache line, away from the other side's and from the
// read-only slice header, so the two cores do not steal a line from each
// other on every operation. Second, as in MCRingBuffer (Lee, Bu and
// Chandranmenon, "A Lock-Free, Cache-Efficient Shared Ring Buffer for
// Multi-Core Architectures", ANCS 2009), each side keeps a private copy of
// the other side's counter and rereads the shared one only when its copy
// says the ring is full (producer) or empty (consumer). In steady state a
// push or pop then touches only its own line plus the slot, and the other
// side's line is read about once per lap rather than once per operation.
// A copy can only lag the real counter, and a lagging copy errs safe: the
// producer may think the ring fuller than it is, the consumer emptier, and
// each rereads before reporting full or empty.
//
// # MPSC: Vyukov's bounded queue with one consumer
//
// MPSC is Dmitry Vyukov's bounded MPMC queue
// (https://www.1024cores.net/home/lock-free-algorithms/queues/bounded-mpmc-queue)
// with the dequeue side restricted to one consumer. Each slot carries a
// sequence number that says which lap it belongs to and whether it is free
// or published. A producer loads pushPosition, checks that the slot for
// that position is free for this lap (sequence == position), claims the
// position with a compare-and-swap on pushPosition, writes the value and
// then publishes it by storing sequence = position+1. The consumer reads
// only a slot whose sequence says published, copies the value out, zeroes
// the slot and frees it for the next lap by storing sequence =
// position+capacity. Because there is one consumer, popPosition is advanced
// with a plain atomic store, not a compare-and-swap. Producers never read
// popPosition: the slot sequences carry everything they need, so producers
// and the consumer share no counter, only the slots they hand over.
//
// Producers are lock-free: a producer retries only when another producer's
// compare-and-swap succeeded. Like every array queue of this family it is
// not lock-free for the consumer in the strict sense: a producer preempted
// between its compare-and-swap and its publish hides the values pushed
// after it until it resumes. The consumer does not wait for it; TryPop and
// PopBatch report nothing ready, exactly as on an empty ring, and the
// caller polls again on its next loop turn. The capacity is at least 2
// because with one slot "published" (position+1) and "free for the next
// lap" (position+capacity) would be the same number.
//
// # Memory ordering
//
// Every shared index and sequence is a typed atomic (atomic.Uint64);
// values in slots are plain fields. The Go memory model
// (https://go.dev/ref/mem) makes sync/atomic operations sequentially
// consistent and says that if an atomic operation B observes the effect of
// an atomic operation A, then A is synchronized before B. That is all the
// hand-overs need, in both directions:
//
//   - Producer to consumer. The producer writes the slot, then stores
//     pushPosition (SPSC) or the slot's sequence (MPSC). The consumer loads
//     that atomic, sees the new value, and only then reads the slot. The
//     plain write is sequenced before the store, the store is synchronized
//     before the load, the load is sequenced before the plain read: the
//     read happens after the write and sees it.
//   - Consumer to producer. The consumer reads and zeroes the slot, then
//     stores popPosition (SPSC) or the slot's next-lap sequence (MPSC). A
//     producer writes that slot only after loading the atomic and seeing the
//     consumer's store, so the producer's write happens after the
//     consumer's read and zeroing: a value is never overwritten before it
//     is consumed, and the zeroing never clobbers the next value.
//   - Producer to producer (MPSC). The compare-and-swap on pushPosition
//     gives each position to exactly one producer, and that producer
//     checked, by an atomic load that observed the consumer's release, that
//     the slot is free for this lap.
//
// The algorithms need only acquire loads and release stores; Go offers no
// weaker orderings, and sequential consistency is strictly stronger, so it
// is sufficient. What it costs is a locked instruction per store on amd64
// (loads stay plain moves); the cached positions above and PopBatch's
// single store per batch are how the rings keep the number of stores down.
// The race detector understands sync/atomic, so `go test -race` checks
// these edges directly. Typed atomics also guarantee 64-bit alignment on
// 32-bit platforms, which raw atomic.LoadUint64 on a plain field does not.
//
// # Cache-line layout
//
// A full cache line (64 bytes) of padding sits before the read-only slice
// header, after it, and after each group of fields that one side writes.
// A full line, rather than padding to the next line boundary, keeps two
// groups apart whatever alignment the allocator gives the ring.
package ring
