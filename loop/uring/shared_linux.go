package uring

// This is the only file that touches words the kernel shares with us, and
// the only one that uses raw sync/atomic on them. Why raw atomics: the words
// live in mmap'd ring memory, not in Go variables, so the typed atomics
// (atomic.Uint32) cannot be laid over them; the kernel's side is
// smp_load_acquire / smp_store_release (liburing's io_uring_smp_*), and Go's
// atomics are sequentially consistent, which is stronger than acquire and
// release and therefore sufficient. Plain loads and stores would let the
// compiler or CPU reorder the SQE writes after the tail publication, or the
// CQE reads before the tail observation.
//
// The race detector does not shadow mmap'd memory, so it neither sees nor
// excuses these accesses: correctness rests on the orderings below.

import (
	"sync/atomic"
	"unsafe"
)

// loadAcquire reads a word the kernel writes (SQ head, CQ tail, SQ flags,
// overflow counter) so that everything the kernel wrote before it, such as
// CQE contents, is visible afterwards.
func loadAcquire(word *uint32) uint32 {
	return atomic.LoadUint32(word)
}

// storeRelease publishes a word the kernel reads (SQ tail, CQ head) after
// every earlier write, so the kernel never sees the new tail before the SQE
// it covers, nor a freed CQ slot before we have copied its CQE out.
func storeRelease(word *uint32, value uint32) {
	atomic.StoreUint32(word, value)
}

// storeBufferRingTail publishes the 16-bit tail of a provided-buffer ring.
// Go has no 16-bit atomics, and the tail shares a naturally aligned 32-bit
// word with bufs[0].bid (struct io_uring_buf_ring overlays the tail on
// bufs[0].resv). Only this process writes that bid, so re-storing its
// current value together with the new tail in one 32-bit release store is
// exact on either byte order: the tail is composed at its memory position.
func storeBufferRingTail(ring unsafe.Pointer, tail uint16) {
	word := (*uint32)(unsafe.Add(ring, bufferRingTailWordOffset))
	value := *word // plain read: only this process writes bufs[0].bid
	*(*uint16)(unsafe.Add(unsafe.Pointer(&value), 2)) = tail
	atomic.StoreUint32(word, value)
}
