package uring

import "unsafe"

// Completions are read in place: the CQE is copied out of the ring, then
// the head moves past it with a release store, after which the kernel may
// reuse the slot. Reap often: a multishot SQE posts many CQEs, and a full
// CQ parks completions in the kernel's overflow list (IORING_SQ_CQ_OVERFLOW)
// until the next Submit* flushes them.

// CQReady is the number of CQEs posted and not yet reaped.
func (r *Ring) CQReady() uint32 {
	if r.fd < 0 {
		return 0
	}
	return loadAcquire(r.cq.tail) - r.cq.head
}

// PeekCQE returns the oldest unreaped CQE without consuming it; SeenCQE
// consumes it. ok is false when none is ready (on a DeferTaskrun ring,
// completions appear only after a Submit*).
func (r *Ring) PeekCQE() (cqe CQE, ok bool) {
	if r.fd < 0 || r.cq.head == loadAcquire(r.cq.tail) {
		return CQE{}, false
	}
	return r.cq.at(r.cq.head), true
}

// SeenCQE consumes the CQE PeekCQE returned.
func (r *Ring) SeenCQE() {
	r.AdvanceCQ(1)
}

// AdvanceCQ consumes n CQEs, handing their slots back to the kernel.
func (r *Ring) AdvanceCQ(n uint32) {
	r.cq.head += n
	storeRelease(r.cq.sharedHead, r.cq.head)
}

// ForEachCQE calls fn for each ready CQE in order and consumes them with a
// single head update, which is cheaper than SeenCQE per CQE. fn returning
// false stops the walk after that CQE (it is consumed too). It returns the
// number consumed. fn must not call PeekCQE, SeenCQE or AdvanceCQ.
func (r *Ring) ForEachCQE(fn func(CQE) bool) int {
	if r.fd < 0 {
		return 0
	}
	head, tail := r.cq.head, loadAcquire(r.cq.tail)
	for head != tail {
		cqe := r.cq.at(head)
		head++
		if !fn(cqe) {
			break
		}
	}
	consumed := head - r.cq.head
	if consumed > 0 {
		r.AdvanceCQ(consumed)
	}
	return int(consumed)
}

// at copies the CQE at ring position index.
func (q *completionQueue) at(index uint32) CQE {
	return *(*CQE)(unsafe.Add(q.cqes, uintptr(index&q.mask)*cqeSize))
}
