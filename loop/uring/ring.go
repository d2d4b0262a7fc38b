package uring

import (
	"errors"
	"fmt"
	"strings"
)

// Options shape a ring at New. The zero value is a plain ring whose CQ is
// twice the SQ (the kernel default, and the floor New enforces).
type Options struct {
	// CQSize sets the completion ring size (IORING_SETUP_CQSIZE). Zero
	// means 2×entries; anything smaller than that is refused, because
	// multishot SQEs post many CQEs each and an overflowing CQ costs an
	// extra enter per loop iteration.
	CQSize uint32
	// SingleIssuer promises the kernel that one OS thread submits
	// (IORING_SETUP_SINGLE_ISSUER, 6.0). Other threads get EEXIST, so the
	// caller must runtime.LockOSThread before New, or create the ring
	// Disabled and call Enable from the locked loop thread.
	SingleIssuer bool
	// DeferTaskrun runs completion work only when the owner enters the
	// kernel (IORING_SETUP_DEFER_TASKRUN, 6.1): PeekCQE sees nothing new
	// until the next Submit*. It implies SingleIssuer.
	DeferTaskrun bool
	// CoopTaskrun avoids interrupting the thread to run completion work
	// (IORING_SETUP_COOP_TASKRUN, 5.19).
	CoopTaskrun bool
	// SubmitAll keeps submitting a batch past an SQE that fails to prepare
	// (IORING_SETUP_SUBMIT_ALL, 5.18); the failure still posts its CQE.
	SubmitAll bool
	// Disabled creates the ring switched off (IORING_SETUP_R_DISABLED);
	// Enable switches it on and, for SingleIssuer, binds it to the thread
	// that calls Enable.
	Disabled bool
}

// SetupFunc performs io_uring_setup. It exists so tests can make the kernel
// refuse (DetectWith); production code uses the real system call.
type SetupFunc func(entries uint32, params *Params) (fd int, err error)

var (
	// ErrUnsupported is returned where io_uring cannot be used at all
	// (another OS, a missing kernel feature). It wraps
	// errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("uring: %w", errors.ErrUnsupported)
	// ErrBusy is io_uring_enter's EBUSY: the kernel holds more completions
	// than the CQ ring can take. Reap CQEs, then submit again; nothing was
	// submitted by the failing call.
	ErrBusy = errors.New("uring: completion backlog full (EBUSY): reap completions, then submit again")
	// ErrTimeout is returned by SubmitAndWaitTimeout when the time ran out
	// before enough completions arrived. It is a normal outcome for a loop
	// that waits with a timer deadline.
	ErrTimeout = errors.New("uring: wait timed out")
	// ErrClosed is returned by calls on a closed ring.
	ErrClosed = errors.New("uring: ring closed")
)

// DisableEnvironment names the environment variable that makes Detect
// report io_uring as unavailable ("1"), so the fall-back backends can be
// tested on a machine where io_uring works. New ignores it.
const DisableEnvironment = "IRONBUS_URING_DISABLE"

// Capabilities is what Detect found, for `--loop auto` and for the one boot
// log line that says which backend was chosen and why.
type Capabilities struct {
	// Available says a ring can be set up, has the required features and
	// opcodes, and completes a NOP round trip.
	Available bool
	// Reason explains Available in one line: what failed, or what works.
	Reason string
	// Kernel is the uname release.
	Kernel string
	// Features are the Feature* bits of a scratch ring.
	Features uint32
	// Ops are the opcodes IORING_REGISTER_PROBE reports as supported.
	Ops OpSet
	// MultishotAccept: one ACCEPT SQE kept posting connections (5.19).
	MultishotAccept bool
	// MultishotRecv: one RECV SQE kept posting data from a buffer ring (6.0).
	MultishotRecv bool
	// BufferRing: IORING_REGISTER_PBUF_RING worked (5.19).
	BufferRing bool
	// SingleIssuer: a ring with IORING_SETUP_SINGLE_ISSUER was set up (6.0).
	SingleIssuer bool
	// DeferTaskrun: a ring with SINGLE_ISSUER|DEFER_TASKRUN was set up (6.1).
	DeferTaskrun bool
}

// RequiredOps are the opcodes the network backend cannot work without;
// Detect reports io_uring unavailable when the probe lacks one.
var RequiredOps = []Opcode{OpNop, OpRead, OpAccept, OpRecv, OpSend, OpAsyncCancel, OpTimeout, OpClose}

// OpSet is a set of opcodes, one bit each.
type OpSet [4]uint64

// Has reports whether op is in the set.
func (s OpSet) Has(op Opcode) bool {
	return s[op/64]&(1<<(op%64)) != 0
}

// add puts op into the set.
func (s *OpSet) add(op Opcode) {
	s[op/64] |= 1 << (op % 64)
}

// opNames spells the opcodes this package names, for logs.
var opNames = map[Opcode]string{
	OpNop: "NOP", OpReadv: "READV", OpWritev: "WRITEV", OpSendmsg: "SENDMSG",
	OpTimeout: "TIMEOUT", OpAccept: "ACCEPT", OpAsyncCancel: "ASYNC_CANCEL", OpClose: "CLOSE",
	OpRead: "READ", OpWrite: "WRITE", OpSend: "SEND", OpRecv: "RECV", OpMsgRing: "MSG_RING",
}

// String names an opcode ("RECV"), or gives its number.
func (op Opcode) String() string {
	if name, ok := opNames[op]; ok {
		return name
	}
	return fmt.Sprintf("OP_%d", uint8(op))
}

// String lists the named opcodes in the set and counts the others, short
// enough for a boot log line.
func (s OpSet) String() string {
	var names []string
	others := 0
	for op := 0; op < 256; op++ {
		if !s.Has(Opcode(op)) {
			continue
		}
		if name, ok := opNames[Opcode(op)]; ok {
			names = append(names, name)
		} else {
			others++
		}
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(names, ","), others)
}

// missing lists the ops the set lacks.
func (s OpSet) missing(ops []Opcode) []string {
	var names []string
	for _, op := range ops {
		if !s.Has(op) {
			names = append(names, op.String())
		}
	}
	return names
}
