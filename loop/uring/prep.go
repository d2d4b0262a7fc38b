package uring

import (
	"syscall"
	"unsafe"
)

// Prep helpers set every field their opcode reads, on top of the zeroed SQE
// GetSQE returns: a field left over from the slot's previous use changes the
// meaning of the next op (giouring's stale rw_flags turned a WRITE into an
// EINVAL). User data is set separately with SetUserData; extra SQE flags
// (SQEIOLink, SQECQESkipSuccess) are ORed into Flags after the Prep call.
//
// Memory contract for every address argument (a uintptr): the kernel reads
// or writes that memory after the Prep call returns, possibly long after
// Submit, until the operation's final CQE. It must therefore be memory the
// Go runtime never moves or frees meanwhile: off-heap (unix.Mmap anonymous
// arenas, a BufferRing) or pinned with runtime.Pinner and referenced from
// the loop's in-flight table until the CQE. A goroutine stack is never
// acceptable (stacks move), and runtime.KeepAlive is not enough (it only
// covers the call it follows).

// prepare fills the fields every opcode shares.
func (sqe *SQE) prepare(op Opcode, fd int, address uintptr, length uint32, offset uint64) {
	sqe.Opcode = op
	sqe.Fd = int32(fd)
	sqe.Address = uint64(address)
	sqe.Length = length
	sqe.Offset = offset
}

// PrepNop prepares a no-op, which completes with Result 0.
func (sqe *SQE) PrepNop() {
	sqe.prepare(OpNop, -1, 0, 0, 0)
}

// PrepRead reads up to length bytes from fd at offset into address
// (ReadAtCurrentPosition for sockets, pipes and eventfds).
func (sqe *SQE) PrepRead(fd int, address uintptr, length uint32, offset uint64) {
	sqe.prepare(OpRead, fd, address, length, offset)
}

// PrepWrite writes length bytes from address to fd at offset.
func (sqe *SQE) PrepWrite(fd int, address uintptr, length uint32, offset uint64) {
	sqe.prepare(OpWrite, fd, address, length, offset)
}

// PrepWritev writes count iovecs (struct iovec, off-heap like the bytes they
// point to) to fd at offset: several frames to one socket in one op.
func (sqe *SQE) PrepWritev(fd int, iovecs uintptr, count uint32, offset uint64) {
	sqe.prepare(OpWritev, fd, iovecs, count, offset)
}

// PrepAccept accepts one connection on the listening socket fd; flags are
// accept4 flags (SOCK_CLOEXEC, SOCK_NONBLOCK). The peer address is not
// requested (one sockaddr buffer cannot serve a multishot accept):
// getpeername it when needed. Result is the new fd.
func (sqe *SQE) PrepAccept(fd int, flags uint32) {
	sqe.prepare(OpAccept, fd, 0, 0, 0)
	sqe.OpFlags = flags
}

// PrepMultishotAccept is PrepAccept that keeps posting one CQE per
// connection while CQEFlagMore is set (5.19). Re-arm when a CQE arrives
// without CQEFlagMore.
func (sqe *SQE) PrepMultishotAccept(fd int, flags uint32) {
	sqe.PrepAccept(fd, flags)
	sqe.IOPriority = AcceptMultishot
}

// PrepRecv receives up to length bytes from socket fd into address; flags
// are recv(2) MSG_* flags.
func (sqe *SQE) PrepRecv(fd int, address uintptr, length uint32, flags uint32) {
	sqe.prepare(OpRecv, fd, address, length, 0)
	sqe.OpFlags = flags
}

// PrepRecvBufferGroup receives into a buffer the kernel picks from the
// BufferRing registered as group; the CQE carries its id (CQE.BufferID).
func (sqe *SQE) PrepRecvBufferGroup(fd int, group uint16, flags uint32) {
	sqe.prepare(OpRecv, fd, 0, 0, 0)
	sqe.OpFlags = flags
	sqe.Flags = SQEBufferSelect
	sqe.BufferIndex = group
}

// PrepMultishotRecv is PrepRecvBufferGroup that keeps posting one CQE per
// received chunk while CQEFlagMore is set (6.0). It stops, without
// CQEFlagMore, on EOF, on error and with ENOBUFS when the group has no free
// buffer: recycle buffers promptly and re-arm.
func (sqe *SQE) PrepMultishotRecv(fd int, group uint16, flags uint32) {
	sqe.PrepRecvBufferGroup(fd, group, flags)
	sqe.IOPriority = RecvMultishot
}

// PrepSend sends length bytes at address on socket fd; flags are send(2)
// MSG_* flags (use MSG_NOSIGNAL: a closed peer must not raise SIGPIPE).
func (sqe *SQE) PrepSend(fd int, address uintptr, length uint32, flags uint32) {
	sqe.prepare(OpSend, fd, address, length, 0)
	sqe.OpFlags = flags
}

// PrepClose closes fd.
func (sqe *SQE) PrepClose(fd int) {
	sqe.prepare(OpClose, fd, 0, 0, 0)
}

// PrepCancel cancels the operation whose user_data is target; flags are
// Cancel* (CancelAll cancels every match). Result: 0 cancelled, -ENOENT not
// found, -EALREADY already running. The cancelled operation posts its own
// CQE (-ECANCELED), which the loop must still reap before reusing its slot.
func (sqe *SQE) PrepCancel(target uint64, flags uint32) {
	sqe.prepare(OpAsyncCancel, -1, 0, 0, 0)
	sqe.Address = target
	sqe.OpFlags = flags
}

// PrepCancelFd cancels the operations on fd (IORING_ASYNC_CANCEL_FD,
// 5.19): the first one, or every one with CancelAll in flags. Result: the
// number cancelled, or -ENOENT when none matched. Like PrepCancel, each
// cancelled operation still posts its own final CQE. fd must stay open
// until this SQE is submitted, because the kernel matches by file.
func (sqe *SQE) PrepCancelFd(fd int, flags uint32) {
	sqe.prepare(OpAsyncCancel, fd, 0, 0, 0)
	sqe.OpFlags = flags | CancelFd
}

// PrepTimeout completes after the time in timestamp, or after count other
// CQEs when count is non-zero; flags are Timeout*. Result is -ETIME when the
// time ran out. The kernel copies *timestamp when it consumes the SQE, so
// it must stay in place until Submit: use Ring.Timespec, which keeps one
// off-heap Timespec per SQE slot.
func (sqe *SQE) PrepTimeout(timestamp *Timespec, count uint32, flags uint32) {
	sqe.prepare(OpTimeout, -1, uintptr(unsafe.Pointer(timestamp)), 1, 0)
	sqe.Offset = uint64(count)
	sqe.OpFlags = flags
}

// PrepMsgRing posts a CQE with the given user_data and result on another
// ring, given its fd (5.18): how one loop wakes or hands work to another.
// The sending ring also gets a CQE unless flags has MsgRingCQESkip.
func (sqe *SQE) PrepMsgRing(ringFd int, result uint32, userData uint64, flags uint32) {
	sqe.prepare(OpMsgRing, ringFd, msgRingData, result, userData)
	sqe.OpFlags = flags
}

// Err turns a failed Result into its errno, nil on success.
func (cqe CQE) Err() error {
	if cqe.Result >= 0 {
		return nil
	}
	return syscall.Errno(-cqe.Result)
}

// More reports that the multishot SQE behind this CQE stays armed.
func (cqe CQE) More() bool {
	return cqe.Flags&CQEFlagMore != 0
}

// BufferID returns the provided buffer the kernel filled, if any.
func (cqe CQE) BufferID() (id uint16, ok bool) {
	return uint16(cqe.Flags >> cqeBufferShift), cqe.Flags&CQEFlagBuffer != 0
}
