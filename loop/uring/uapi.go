package uring

// This file mirrors the parts of include/uapi/linux/io_uring.h the broker
// uses. The layouts are the kernel ABI: field order and sizes must not
// change (uapi_test.go checks the sizes). Each constant names its kernel
// spelling so the header stays greppable. The types compile on every OS so
// that code preparing SQEs builds everywhere; only Ring talks to a kernel.

// SQE is one submission queue entry (struct io_uring_sqe, 64 bytes). The
// kernel's unions are flattened to the member the broker uses; the comment
// on each field lists the other meanings.
type SQE struct {
	Opcode     Opcode // opcode
	Flags      uint8  // flags: SQEFixedFile, SQEIOLink, ...
	IOPriority uint16 // ioprio; also accept/recv/send flags (AcceptMultishot, RecvMultishot)
	Fd         int32  // fd; the target ring fd for MSG_RING
	Offset     uint64 // off / addr2: file offset, addrlen pointer, MSG_RING user_data, timeout count
	Address    uint64 // addr: buffer, timespec, cancel target user_data, MSG_RING command
	Length     uint32 // len: buffer length, iovec count, MSG_RING result
	// OpFlags is the op-specific flags union: rw_flags, msg_flags,
	// timeout_flags, accept_flags, cancel_flags, msg_ring_flags, ...
	// It is exactly the field giouring forgot to clear between uses.
	OpFlags     uint32
	UserData    uint64 // user_data: returned in the CQE; see EncodeUserData
	BufferIndex uint16 // buf_index / buf_group: the provided-buffer group with SQEBufferSelect
	Personality uint16 // personality
	FileIndex   int32  // splice_fd_in / file_index / addr_len
	Address3    uint64 // addr3
	reserved    uint64 // __pad2
}

// CQE is one completion queue entry (struct io_uring_cqe, 16 bytes; rings
// are never set up with CQE32).
type CQE struct {
	UserData uint64 // the SQE's user_data
	Result   int32  // res: >= 0 on success, -errno on failure
	Flags    uint32 // CQEFlagBuffer, CQEFlagMore, ...
}

// Params is struct io_uring_params: the io_uring_setup argument, filled in
// by the kernel with the ring sizes, features and mmap offsets.
type Params struct {
	SQEntries    uint32
	CQEntries    uint32
	Flags        uint32 // Setup* flags
	SQThreadCPU  uint32
	SQThreadIdle uint32
	Features     uint32 // Feature* bits, written by the kernel
	WorkQueueFd  uint32 // wq_fd for SetupAttachWorkQueue
	reserved     [3]uint32
	SQOffsets    SQRingOffsets
	CQOffsets    CQRingOffsets
}

// SQRingOffsets is struct io_sqring_offsets: where each submission ring
// word lives inside the SQ ring mapping.
type SQRingOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Flags       uint32
	Dropped     uint32
	Array       uint32
	reserved    uint32
	UserAddress uint64 // user_addr, for IORING_SETUP_NO_MMAP (unused here)
}

// CQRingOffsets is struct io_cqring_offsets: where each completion ring
// word lives inside the CQ ring mapping.
type CQRingOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Overflow    uint32
	CQEs        uint32
	Flags       uint32
	reserved    uint32
	UserAddress uint64
}

// Timespec is struct __kernel_timespec, 64-bit on every architecture
// (unix.Timespec is not, on 32-bit Linux).
type Timespec struct {
	Seconds     int64
	Nanoseconds int64
}

// Opcode is an IORING_OP_* value.
type Opcode uint8

// The opcodes the broker uses or may use (values are the kernel enum).
const (
	OpNop         Opcode = 0  // IORING_OP_NOP (5.1)
	OpReadv       Opcode = 1  // IORING_OP_READV (5.1)
	OpWritev      Opcode = 2  // IORING_OP_WRITEV (5.1)
	OpSendmsg     Opcode = 9  // IORING_OP_SENDMSG (5.3)
	OpTimeout     Opcode = 11 // IORING_OP_TIMEOUT (5.4)
	OpAccept      Opcode = 13 // IORING_OP_ACCEPT (5.5)
	OpAsyncCancel Opcode = 14 // IORING_OP_ASYNC_CANCEL (5.5)
	OpClose       Opcode = 19 // IORING_OP_CLOSE (5.6)
	OpRead        Opcode = 22 // IORING_OP_READ (5.6)
	OpWrite       Opcode = 23 // IORING_OP_WRITE (5.6)
	OpSend        Opcode = 26 // IORING_OP_SEND (5.6)
	OpRecv        Opcode = 27 // IORING_OP_RECV (5.6)
	OpMsgRing     Opcode = 40 // IORING_OP_MSG_RING (5.18)
)

// SQE.Flags bits (IOSQE_*).
const (
	SQEFixedFile      = 1 << 0 // IOSQE_FIXED_FILE: Fd indexes the registered file table
	SQEIOLink         = 1 << 2 // IOSQE_IO_LINK: the next SQE starts when this one succeeds
	SQEBufferSelect   = 1 << 5 // IOSQE_BUFFER_SELECT: take a buffer from group BufferIndex
	SQECQESkipSuccess = 1 << 6 // IOSQE_CQE_SKIP_SUCCESS (5.17): no CQE unless it fails
)

// io_uring_setup flags (IORING_SETUP_*).
const (
	SetupCQSize       = 1 << 3  // IORING_SETUP_CQSIZE (5.5)
	SetupDisabled     = 1 << 6  // IORING_SETUP_R_DISABLED (5.10)
	SetupSubmitAll    = 1 << 7  // IORING_SETUP_SUBMIT_ALL (5.18)
	SetupCoopTaskrun  = 1 << 8  // IORING_SETUP_COOP_TASKRUN (5.19)
	SetupSingleIssuer = 1 << 12 // IORING_SETUP_SINGLE_ISSUER (6.0)
	SetupDeferTaskrun = 1 << 13 // IORING_SETUP_DEFER_TASKRUN (6.1)
)

// Params.Features bits (IORING_FEAT_*).
const (
	FeatureSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP (5.4): SQ and CQ rings share one mapping
	FeatureNoDrop     = 1 << 1 // IORING_FEAT_NODROP (5.5): CQ overflow is kept, not dropped
	FeatureFastPoll   = 1 << 5 // IORING_FEAT_FAST_POLL (5.7): socket ops poll internally
	FeatureExtArg     = 1 << 8 // IORING_FEAT_EXT_ARG (5.11): waits take a timeout
)

// CQE.Flags bits (IORING_CQE_F_*).
const (
	CQEFlagBuffer         = 1 << 0 // IORING_CQE_F_BUFFER: buffer id in the upper 16 bits
	CQEFlagMore           = 1 << 1 // IORING_CQE_F_MORE: the multishot SQE stays armed
	CQEFlagSocketNonEmpty = 1 << 2 // IORING_CQE_F_SOCK_NONEMPTY
	cqeBufferShift        = 16     // IORING_CQE_BUFFER_SHIFT
)

// SQE.IOPriority bits for accept, recv and send.
const (
	RecvMultishot   = 1 << 1 // IORING_RECV_MULTISHOT (6.0)
	AcceptMultishot = 1 << 0 // IORING_ACCEPT_MULTISHOT (5.19)
)

// SQE.OpFlags values for TIMEOUT and ASYNC_CANCEL.
const (
	TimeoutAbsolute = 1 << 0 // IORING_TIMEOUT_ABS
	CancelAll       = 1 << 0 // IORING_ASYNC_CANCEL_ALL (5.19)
	CancelFd        = 1 << 1 // IORING_ASYNC_CANCEL_FD (5.19)
	CancelAny       = 1 << 2 // IORING_ASYNC_CANCEL_ANY (5.19)
)

// MSG_RING commands (sqe->addr) and flags.
const (
	msgRingData    = 0      // IORING_MSG_DATA: post Length as res, Offset as user_data
	MsgRingCQESkip = 1 << 0 // IORING_MSG_RING_CQE_SKIP
)

// ReadAtCurrentPosition as an offset reads or writes at the file position
// (needed for pipes, sockets and eventfds; IORING_FEAT_RW_CUR_POS, 5.6).
const ReadAtCurrentPosition = ^uint64(0)

// io_uring_enter flags (IORING_ENTER_*).
const (
	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS
	enterExtArg    = 1 << 3 // IORING_ENTER_EXT_ARG (5.11)
)

// SQ ring flags written by the kernel (IORING_SQ_*).
const (
	sqCQOverflow = 1 << 1 // IORING_SQ_CQ_OVERFLOW: completions wait in the overflow list
	sqTaskrun    = 1 << 2 // IORING_SQ_TASKRUN: task work needs an enter
)

// io_uring_register opcodes (IORING_REGISTER_*).
const (
	registerEventfd          = 4          // IORING_REGISTER_EVENTFD (5.2)
	unregisterEventfd        = 5          // IORING_UNREGISTER_EVENTFD
	registerProbe            = 8          // IORING_REGISTER_PROBE (5.6)
	registerEnableRings      = 12         // IORING_REGISTER_ENABLE_RINGS (5.10)
	registerBufferRing       = 22         // IORING_REGISTER_PBUF_RING (5.19)
	unregisterBufferRing     = 23         // IORING_UNREGISTER_PBUF_RING (5.19)
	probeOpSupported         = 1          // IO_URING_OP_SUPPORTED
	mmapOffsetSQRing         = 0          // IORING_OFF_SQ_RING
	mmapOffsetCQRing         = 0x8000000  // IORING_OFF_CQ_RING
	mmapOffsetSQEs           = 0x10000000 // IORING_OFF_SQES
	sqeSize                  = 64
	cqeSize                  = 16
	bufferRingEntrySize      = 16 // struct io_uring_buf
	bufferRingTailWordOffset = 12 // the 4-byte word holding bufs[0].bid and the ring tail
	maximumBufferRingEntries = 1 << 15
)

// getEventsArgument is struct io_uring_getevents_arg, passed to
// io_uring_enter with IORING_ENTER_EXT_ARG to bound a wait.
type getEventsArgument struct {
	SignalMask          uint64
	SignalMaskSize      uint32
	MinWaitMicroseconds uint32 // pad before 6.12
	Timespec            uint64 // address of a Timespec
}

// bufferRingEntry is struct io_uring_buf. In entry 0 the reserved field is
// the ring tail (struct io_uring_buf_ring), so entries are written field by
// field and never as a whole.
type bufferRingEntry struct {
	Address  uint64
	Length   uint32
	ID       uint16
	reserved uint16
}

// bufferRegistration is struct io_uring_buf_reg, the PBUF_RING argument.
type bufferRegistration struct {
	RingAddress uint64
	RingEntries uint32
	Group       uint16
	flags       uint16
	reserved    [3]uint64
}

// probeResult is struct io_uring_probe with room for every opcode.
type probeResult struct {
	LastOp    uint8
	OpsLength uint8
	reserved  uint16
	reserved2 [3]uint32
	Ops       [256]probeOp
}

// probeOp is struct io_uring_probe_op.
type probeOp struct {
	Op        Opcode
	reserved  uint8
	Flags     uint16
	reserved2 uint32
}
