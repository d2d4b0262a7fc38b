// Package uring is IronBus's thin io_uring binding, written directly on
// golang.org/x/sys/unix: no cgo, no linkname, no linker flags, so a plain
// go build, go test or go install works (DESIGN.md §4 says why giouring was
// not used). It builds on every OS; off Linux, New fails with an error
// wrapping ErrUnsupported and Detect reports io_uring unavailable.
//
// # What it owns
//
// The mechanics of one ring and nothing above it: io_uring_setup and the
// three mappings (Ring), handing out and submitting SQEs with the
// io_uring_enter retry rules (GetSQE, Submit*), reaping CQEs (PeekCQE,
// ForEachCQE), the Prep* helpers for the opcodes the network backend needs,
// provided-buffer rings (BufferRing), IORING_REGISTER_PROBE (Probe) and the
// boot-time capability check behind `--loop auto` (Detect). The event loop,
// its connection table, timers, and the choice of backend live in package
// loop; the WAL committer does not use io_uring at all (plain pwrite and
// fdatasync measured as fast, see reference/loop-design.md §4.2).
//
// # Memory the kernel touches
//
// The kernel reads and writes some memory asynchronously, after the call
// that named it has returned. All such memory is off the Go heap, or pinned:
//
//   - The SQ ring, CQ ring and SQE array are the kernel's own mappings;
//     pointers into them are taken once at New and never handed out except
//     as *SQE, which is only valid until the next Submit*.
//   - Buffers named in an SQE (PrepRead, PrepWrite, PrepRecv, PrepSend,
//     PrepWritev's iovecs) must stay valid and unmoved until the operation's
//     final CQE: off-heap arenas (unix.Mmap anonymous) or runtime.Pinner,
//     referenced from the loop's in-flight table. Never a goroutine stack
//     (stacks move), and runtime.KeepAlive is not enough (it covers only the
//     call it follows). An operation may only be forgotten after its final
//     CQE, including after a cancel: the cancelled op posts its own CQE.
//   - Timespecs and the wait argument live in the ring's off-heap scratch
//     area (Ring.Timespec), one Timespec per SQE slot.
//   - BufferRing maps both its entry ring and its buffers anonymously. A
//     buffer whose id arrived in a CQE is the loop's until Recycle+Advance.
//   - Memory the kernel only reads or writes during the system call itself
//     (the probe result, a register argument) may be ordinary Go memory.
//
// Off-heap memory is outside GOMEMLIMIT: the ring (64 B per SQE, 16 B per
// CQE), the scratch area and every BufferRing count against the broker's
// RAM ceiling.
//
// Words shared with the kernel (ring heads, tails, flags, the buffer ring
// tail) are read with load-acquire and written with store-release, all in
// shared_linux.go, the one file with raw atomics.
//
// # user_data
//
// An SQE's user_data is an integer token, never a Go pointer: a pointer
// stored in kernel memory is invisible to the garbage collector, and
// turning the integer back into a pointer breaks the unsafe.Pointer rules.
// EncodeUserData packs kind (8 bits), slot (24 bits, an index into a table
// the loop owns) and generation (32 bits, bumped on every reuse of the
// slot, so a late CQE for a finished operation is recognised as stale).
//
// # Threads
//
// A Ring and its BufferRings belong to one goroutine; nothing here is safe
// for concurrent use. Rings made with Options.SingleIssuer or DeferTaskrun
// are bound by the kernel to one OS thread (other threads get EEXIST), so
// that goroutine calls runtime.LockOSThread before New; or the ring is
// created with Options.Disabled anywhere and the locked loop thread calls
// Enable. Waits go through unix.Syscall6, never RawSyscall, so a blocked
// loop releases its P. Other goroutines reach a loop through its own wake-up
// path (an eventfd READ kept posted, or PrepMsgRing from another ring).
//
// # Submitting and waiting
//
// GetSQE returns a zeroed SQE (the whole 64 bytes, so no field of the
// slot's previous op leaks into the next) or nil when the SQ is full. Every
// Submit* recomputes what to submit from the kernel's SQ head, so a retry
// after EINTR or EAGAIN submits nothing twice; waits are restarted after a
// signal with the remaining time; EBUSY comes back as ErrBusy (reap, then
// submit again); a flagged CQ overflow or DeferTaskrun makes the enter get
// events so parked completions are posted. CQ is at least twice the SQ.
// Overflow reports lost CQEs, which with FeatureNoDrop means the kernel ran
// out of memory: treat a non-zero value as fatal.
//
// # Shutdown order
//
// Cancel every in-flight operation (PrepCancel), reap until each has posted
// its final CQE, close the BufferRings, close the Ring, then release the
// loop's arenas.
//
// # Kernel ladder
//
// What this package uses, by the kernel that introduced it; Detect checks
// each by trying it, not by version:
//
//	5.1   io_uring, NOP, READV/WRITEV
//	5.4   TIMEOUT, FEAT_SINGLE_MMAP (one mapping for both rings)
//	5.5   ACCEPT, ASYNC_CANCEL, FEAT_NODROP, SETUP_CQSIZE     } required by
//	5.6   READ/WRITE, SEND/RECV, CLOSE, REGISTER_PROBE       } Detect
//	5.10  SETUP_R_DISABLED + REGISTER_ENABLE_RINGS
//	5.11  FEAT_EXT_ARG (bounded waits)                       } required
//	5.18  MSG_RING, SETUP_SUBMIT_ALL
//	5.19  multishot ACCEPT, PBUF_RING buffer rings, COOP_TASKRUN
//	6.0   multishot RECV, SINGLE_ISSUER
//	6.1   DEFER_TASKRUN (the realistic floor for the network backend)
//	6.5   cancel and multishot completion codes changed
//	6.6   kernel.io_uring_disabled sysctl (read by Detect)
//
// Detect requires the 5.11 set and reports the rest as Capabilities, so
// the loop can pick multishot and buffer rings only where they work.
// Setting IRONBUS_URING_DISABLE=1 makes Detect report unavailable, to test
// the fall-back on machines where io_uring works.
package uring
