package uring

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maximumAgainRetries bounds the EAGAIN retries of one submit. EAGAIN means
// the kernel could not allocate a request right now; spinning on it forever
// would hide memory pressure, so past this the error goes to the caller.
const maximumAgainRetries = 64

// GetSQE hands out the next free SQE, zeroed, or nil when the SQ is full
// (submit, then ask again). The whole 64 bytes are cleared because a field
// left from the slot's previous op changes the meaning of the next one.
// Every SQE handed out is submitted by the next Submit*, so it must be
// prepared before then (make an unwanted one a NOP).
func (r *Ring) GetSQE() *SQE {
	q := &r.sq
	if r.fd < 0 || q.handedOut-loadAcquire(q.head) >= q.entries {
		return nil
	}
	sqe := (*SQE)(unsafe.Add(q.sqes, uintptr(q.handedOut&q.mask)*sqeSize))
	q.handedOut++
	*sqe = SQE{}
	return sqe
}

// SQSpace is how many more SQEs GetSQE can hand out before a submit.
func (r *Ring) SQSpace() uint32 {
	if r.fd < 0 {
		return 0
	}
	return r.sq.entries - (r.sq.handedOut - loadAcquire(r.sq.head))
}

// Submit passes every prepared SQE to the kernel without waiting and
// returns how many it took. On a DeferTaskrun ring it also posts the
// completions that are ready.
func (r *Ring) Submit() (int, error) {
	return r.submitAndWait(0, time.Time{})
}

// SubmitAndWait submits, then blocks until at least minimum CQEs are ready
// to reap. It returns the number of SQEs submitted; a signal never cuts the
// wait short.
func (r *Ring) SubmitAndWait(minimum uint32) (int, error) {
	return r.submitAndWait(minimum, time.Time{})
}

// SubmitAndWaitTimeout is SubmitAndWait bounded by d: when fewer than
// minimum CQEs are ready after d, it returns ErrTimeout (the SQEs were still
// submitted). It needs FeatureExtArg (5.11), which Detect requires.
func (r *Ring) SubmitAndWaitTimeout(minimum uint32, d time.Duration) (int, error) {
	if r.features&FeatureExtArg == 0 {
		return 0, fmt.Errorf("uring: timed wait needs IORING_FEAT_EXT_ARG (5.11): %w", ErrUnsupported)
	}
	return r.submitAndWait(minimum, time.Now().Add(d))
}

// submitAndWait is the one io_uring_enter loop. Each pass recomputes what
// to submit from the kernel's SQ head, so after EINTR, EAGAIN or a partial
// submit nothing goes in twice and nothing is left behind. It returns once
// the SQ is drained and minimum CQEs are ready (the ready count is checked,
// not enter's return value: a signal after a submit returns the submitted
// count with the wait cut short). A zero deadline waits without limit.
func (r *Ring) submitAndWait(minimum uint32, deadline time.Time) (int, error) {
	if r.fd < 0 {
		return 0, ErrClosed
	}
	submitted, againRetries := 0, 0
	for {
		call, done, err := r.nextEnter(minimum, deadline)
		if done {
			return submitted, err
		}
		count, errno := r.enter(call)
		switch errno {
		case 0:
			submitted += int(count)
			if r.sq.unconsumed() == 0 && (minimum == 0 || r.CQReady() >= minimum) {
				return submitted, nil
			}
			if count == 0 && call.toSubmit > 0 {
				return submitted, fmt.Errorf("uring: the kernel took none of %d SQEs", call.toSubmit)
			}
		case unix.EINTR:
		case unix.EAGAIN:
			if againRetries++; againRetries > maximumAgainRetries {
				return submitted, os.NewSyscallError("io_uring_enter", errno)
			}
		case unix.ETIME:
			if r.CQReady() >= minimum {
				return submitted, nil // completions raced the timer
			}
			return submitted, ErrTimeout
		case unix.EBUSY:
			return submitted, ErrBusy
		default:
			return submitted, os.NewSyscallError("io_uring_enter", errno)
		}
	}
}

// enterCall is one io_uring_enter's arguments.
type enterCall struct {
	toSubmit, minimum, flags uint32
	argument                 unsafe.Pointer // EXT_ARG block, or nil
}

// nextEnter publishes the SQ and decides the next enter, or that none is
// needed (done, with ErrTimeout when the deadline passed first).
func (r *Ring) nextEnter(minimum uint32, deadline time.Time) (call enterCall, done bool, err error) {
	call.toSubmit = r.sq.publish()
	wait := minimum > 0 && r.CQReady() < minimum
	if wait && !deadline.IsZero() {
		remaining := time.Until(deadline)
		switch {
		case remaining > 0:
			call.argument = r.waitArgument(remaining)
			call.flags = enterExtArg
		case call.toSubmit == 0:
			return call, true, ErrTimeout
		default:
			wait = false // submit what is queued; the next pass reports the timeout
		}
	}
	if wait {
		call.minimum = minimum
	}
	call.flags |= r.enterFlags(wait)
	return call, call.toSubmit == 0 && call.flags == 0, nil
}

// enterFlags decides whether this enter must get events: to wait, to flush
// completions parked in the kernel's overflow list (IORING_SQ_CQ_OVERFLOW)
// or pending task work, and always on a DeferTaskrun ring, whose
// completions are only posted from inside a GETEVENTS enter.
func (r *Ring) enterFlags(wait bool) uint32 {
	if wait || r.flags&SetupDeferTaskrun != 0 || loadAcquire(r.sq.flags)&(sqCQOverflow|sqTaskrun) != 0 {
		return enterGetEvents
	}
	return 0
}

// waitArgument fills the off-heap EXT_ARG block with a relative timeout.
// It lives off-heap because the kernel follows the timespec address inside
// it, which the Go runtime would not know to keep in place.
func (r *Ring) waitArgument(d time.Duration) unsafe.Pointer {
	timestamp := (*Timespec)(unsafe.Pointer(&r.scratch[scratchWaitTimespec]))
	*timestamp = durationTimespec(d)
	argument := (*getEventsArgument)(unsafe.Pointer(&r.scratch[scratchWaitArgument]))
	*argument = getEventsArgument{Timespec: uint64(uintptr(unsafe.Pointer(timestamp)))}
	return unsafe.Pointer(argument)
}

// enter is io_uring_enter(2). It goes through Syscall6, not RawSyscall, so
// the runtime can hand this thread's P to other goroutines while it waits.
func (r *Ring) enter(call enterCall) (uint32, syscall.Errno) {
	size := uintptr(0)
	if call.argument != nil {
		size = unsafe.Sizeof(getEventsArgument{})
	}
	count, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(call.toSubmit),
		uintptr(call.minimum), uintptr(call.flags), uintptr(call.argument), size)
	return uint32(count), errno
}

// publish makes every handed-out SQE visible to the kernel (release store
// of the tail after the SQE writes) and returns how many it has not
// consumed yet.
func (q *submissionQueue) publish() uint32 {
	storeRelease(q.tail, q.handedOut)
	return q.unconsumed()
}

// unconsumed is the number of published SQEs the kernel has not taken.
func (q *submissionQueue) unconsumed() uint32 {
	return q.handedOut - loadAcquire(q.head)
}

// register is io_uring_register(2) for calls whose argument the kernel
// reads or writes only during the call, so Go memory is fine there.
func (r *Ring) register(opcode uintptr, argument unsafe.Pointer, count uintptr) error {
	if r.fd < 0 {
		return ErrClosed
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), opcode, uintptr(argument), count, 0, 0)
	if errno != 0 {
		return os.NewSyscallError(fmt.Sprintf("io_uring_register(%d)", opcode), errno)
	}
	return nil
}
