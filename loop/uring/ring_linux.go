package uring

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is one io_uring instance: its fd, the three kernel mappings and an
// off-heap scratch area. A Ring belongs to one goroutine, the loop that
// owns it: no method is safe for concurrent use. With SingleIssuer or
// DeferTaskrun that goroutine must also stay on one OS thread
// (runtime.LockOSThread) from New, or from Enable, until Close.
type Ring struct {
	fd       int
	flags    uint32 // Setup* flags the ring was created with
	features uint32 // Feature* bits reported by the kernel
	sq       submissionQueue
	cq       completionQueue
	// The mappings. completionMemory is nil when the CQ ring shares the
	// SQ ring's mapping (FeatureSingleMmap).
	ringMemory       []byte
	completionMemory []byte
	sqeMemory        []byte
	// scratch is anonymous off-heap memory for what the kernel reads by
	// address outside a system call's argument list: the wait argument,
	// its timespec, and one Timespec per SQE slot for PrepTimeout.
	scratch []byte
}

// submissionQueue points into the SQ ring mapping.
type submissionQueue struct {
	head    *uint32 // kernel-written: next SQE it will consume
	tail    *uint32 // ours: end of the published SQEs
	flags   *uint32 // kernel-written: sqCQOverflow, sqTaskrun
	dropped *uint32 // kernel-written: invalid SQEs skipped
	mask    uint32
	entries uint32
	sqes    unsafe.Pointer
	// handedOut is the next SQE GetSQE gives away (liburing's sqe_tail);
	// it becomes the shared tail at the next submit.
	handedOut uint32
}

// completionQueue points into the CQ ring mapping.
type completionQueue struct {
	sharedHead *uint32 // ours: CQEs before it may be overwritten
	tail       *uint32 // kernel-written: end of the posted CQEs
	overflow   *uint32 // kernel-written: CQEs lost for good
	mask       uint32
	entries    uint32
	cqes       unsafe.Pointer
	head       uint32 // our copy of *sharedHead; only we write it
}

// Scratch layout: the wait argument, the wait timespec, then one Timespec
// per SQE slot.
const (
	scratchWaitArgument = 0
	scratchWaitTimespec = 32
	scratchTimespecs    = 64
	timespecSize        = 16
)

// New sets up a ring with at least entries SQEs (the kernel rounds up to a
// power of two) and maps it. Close releases it.
func New(entries uint32, options Options) (*Ring, error) {
	return newRing(entries, options, systemSetup)
}

// systemSetup is io_uring_setup(2).
func systemSetup(entries uint32, params *Params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(params)), 0)
	if errno != 0 {
		return -1, os.NewSyscallError("io_uring_setup", errno)
	}
	return int(fd), nil
}

// newRing is New with the setup call supplied, so Detect can be tested
// against a refusing kernel.
func newRing(entries uint32, options Options, setup SetupFunc) (*Ring, error) {
	params, err := options.params(entries)
	if err != nil {
		return nil, err
	}
	fd, err := setup(entries, &params)
	if err != nil {
		return nil, err
	}
	r := &Ring{fd: fd, flags: params.Flags, features: params.Features}
	if err := r.mapRings(&params); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// params turns Options into io_uring_setup flags.
func (options Options) params(entries uint32) (Params, error) {
	var params Params
	if entries == 0 {
		return params, errors.New("uring: a ring needs at least one entry")
	}
	if options.CQSize != 0 {
		if options.CQSize < 2*entries {
			return params, fmt.Errorf("uring: CQ size %d is below twice the SQ size %d", options.CQSize, entries)
		}
		params.Flags |= SetupCQSize
		params.CQEntries = options.CQSize
	}
	if options.DeferTaskrun {
		params.Flags |= SetupDeferTaskrun | SetupSingleIssuer
	}
	if options.SingleIssuer {
		params.Flags |= SetupSingleIssuer
	}
	if options.CoopTaskrun {
		params.Flags |= SetupCoopTaskrun
	}
	if options.SubmitAll {
		params.Flags |= SetupSubmitAll
	}
	if options.Disabled {
		params.Flags |= SetupDisabled
	}
	return params, nil
}

// mapRings maps the SQ ring, the CQ ring (unless it shares the SQ ring's
// mapping), the SQE array and the scratch area, and points the queues into
// them. None of this is Go heap: the collector never scans or moves it.
func (r *Ring) mapRings(params *Params) error {
	ringSize := int(params.SQOffsets.Array + params.SQEntries*4)
	completionSize := int(params.CQOffsets.CQEs + params.CQEntries*cqeSize)
	single := params.Features&FeatureSingleMmap != 0
	if single {
		ringSize = max(ringSize, completionSize)
	}
	var err error
	if r.ringMemory, err = mapShared(r.fd, mmapOffsetSQRing, ringSize); err != nil {
		return err
	}
	completion := r.ringMemory
	if !single {
		if r.completionMemory, err = mapShared(r.fd, mmapOffsetCQRing, completionSize); err != nil {
			return err
		}
		completion = r.completionMemory
	}
	if r.sqeMemory, err = mapShared(r.fd, mmapOffsetSQEs, int(params.SQEntries)*sqeSize); err != nil {
		return err
	}
	if r.scratch, err = mapAnonymous(scratchTimespecs + int(params.SQEntries)*timespecSize); err != nil {
		return err
	}
	r.sq = newSubmissionQueue(r.ringMemory, r.sqeMemory, &params.SQOffsets)
	r.cq = newCompletionQueue(completion, &params.CQOffsets)
	return nil
}

func newSubmissionQueue(ring, sqes []byte, offsets *SQRingOffsets) submissionQueue {
	q := submissionQueue{
		head:    word(ring, offsets.Head),
		tail:    word(ring, offsets.Tail),
		flags:   word(ring, offsets.Flags),
		dropped: word(ring, offsets.Dropped),
		mask:    *word(ring, offsets.RingMask),
		entries: *word(ring, offsets.RingEntries),
		sqes:    unsafe.Pointer(&sqes[0]),
	}
	q.handedOut = *q.tail
	// The index array maps ring positions to SQE slots. Slot i always sits
	// at position i, so it is filled once here instead of on every submit.
	for index := range q.entries {
		*word(ring, offsets.Array+index*4) = index
	}
	return q
}

func newCompletionQueue(ring []byte, offsets *CQRingOffsets) completionQueue {
	q := completionQueue{
		sharedHead: word(ring, offsets.Head),
		tail:       word(ring, offsets.Tail),
		overflow:   word(ring, offsets.Overflow),
		mask:       *word(ring, offsets.RingMask),
		entries:    *word(ring, offsets.RingEntries),
		cqes:       unsafe.Pointer(&ring[offsets.CQEs]),
	}
	q.head = *q.sharedHead
	return q
}

// word points at a 32-bit ring field inside a mapping.
func word(memory []byte, offset uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&memory[offset]))
}

// mapShared maps part of the ring fd, populated so the first submit does
// not fault.
func mapShared(fd int, offset int64, size int) ([]byte, error) {
	memory, err := unix.Mmap(fd, offset, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap io_uring", err)
	}
	return memory, nil
}

// mapAnonymous allocates zeroed off-heap memory the kernel may read or
// write asynchronously.
func mapAnonymous(size int) ([]byte, error) {
	memory, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap anonymous", err)
	}
	return memory, nil
}

// Close unmaps the ring and closes its fd; the kernel then cancels what is
// still in flight. Cancel and drain first (see the package doc) if any
// in-flight operation still points at memory the caller is about to free.
// Close is idempotent.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return nil
	}
	var errs []error
	for _, memory := range [][]byte{r.sqeMemory, r.completionMemory, r.ringMemory, r.scratch} {
		if memory != nil {
			errs = append(errs, unix.Munmap(memory))
		}
	}
	errs = append(errs, unix.Close(r.fd))
	*r = Ring{fd: -1}
	return errors.Join(errs...)
}

// Enable switches on a ring created with Options.Disabled. A SingleIssuer
// ring becomes bound to the calling OS thread, so call it from the locked
// loop thread.
func (r *Ring) Enable() error {
	return r.register(registerEnableRings, nil, 0)
}

// Fd is the ring's file descriptor, the target of another ring's
// PrepMsgRing.
func (r *Ring) Fd() int { return r.fd }

// Features are the kernel's Feature* bits for this ring.
func (r *Ring) Features() uint32 { return r.features }

// SQEntries and CQEntries are the ring sizes after the kernel's rounding.
func (r *Ring) SQEntries() uint32 { return r.sq.entries }

// CQEntries is the completion ring size.
func (r *Ring) CQEntries() uint32 { return r.cq.entries }

// Overflow counts CQEs the kernel could not keep. With FeatureNoDrop it
// stays zero unless the kernel ran out of memory for its overflow list; a
// non-zero value means lost completions and should be treated as fatal.
func (r *Ring) Overflow() uint32 { return loadAcquire(r.cq.overflow) }

// Dropped counts SQEs the kernel skipped as invalid.
func (r *Ring) Dropped() uint32 { return loadAcquire(r.sq.dropped) }

// Timespec stores d in the off-heap Timespec that belongs to sqe's slot and
// returns it, for PrepTimeout. It stays valid until the slot is reused,
// which cannot happen before the kernel has consumed (and copied) it.
func (r *Ring) Timespec(sqe *SQE, d time.Duration) *Timespec {
	slot := (uintptr(unsafe.Pointer(sqe)) - uintptr(r.sq.sqes)) / sqeSize
	if slot >= uintptr(r.sq.entries) {
		panic("uring: Timespec called with an SQE from another ring")
	}
	timestamp := (*Timespec)(unsafe.Pointer(&r.scratch[scratchTimespecs+slot*timespecSize]))
	*timestamp = durationTimespec(d)
	return timestamp
}

func durationTimespec(d time.Duration) Timespec {
	return Timespec{Seconds: int64(d / time.Second), Nanoseconds: int64(d % time.Second)}
}
