package uring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// detectWait bounds every wait during detection: on a working kernel each
// round trip takes microseconds, and a hung probe must not hang the boot.
const detectWait = time.Second

// Detect reports whether io_uring can serve the network backend here and
// which optional capabilities work, by trying them (never by kernel version
// alone: distros backport, seccomp and sysctls refuse). It never panics and
// takes a few milliseconds; call it once at boot. IRONBUS_URING_DISABLE=1
// makes it report unavailable, to exercise the fall-back.
func Detect() Capabilities {
	if os.Getenv(DisableEnvironment) == "1" {
		return Capabilities{Kernel: kernelRelease(), Reason: "disabled by " + DisableEnvironment}
	}
	return DetectWith(systemSetup)
}

// DetectWith is Detect with io_uring_setup replaced, so tests can simulate
// a kernel that refuses (EPERM from seccomp, ENOMEM from memlock, ...).
func DetectWith(setup SetupFunc) (capabilities Capabilities) {
	capabilities.Kernel = kernelRelease()
	defer func() {
		if recovered := recover(); recovered != nil {
			capabilities.Available = false
			capabilities.Reason = fmt.Sprintf("io_uring detection panicked: %v", recovered)
		}
	}()
	disabled := readDisabledSysctl()
	if disabled == "2" {
		capabilities.Reason = "kernel.io_uring_disabled=2: io_uring is off for every process"
		return capabilities
	}
	r, err := newRing(8, Options{}, setup)
	if err != nil {
		capabilities.Reason = setupRefusal(err, disabled)
		return capabilities
	}
	defer r.Close()
	capabilities.Features = r.Features()
	if reason := checkRing(r, &capabilities); reason != "" {
		capabilities.Reason = reason
		return capabilities
	}
	detectOptional(setup, &capabilities)
	capabilities.Available = true
	capabilities.Reason = describe(capabilities)
	return capabilities
}

// readDisabledSysctl returns kernel.io_uring_disabled (6.6+), or "" when
// the kernel has no such sysctl. At 1 the kernel lets only CAP_SYS_ADMIN
// and members of kernel.io_uring_group set up rings; rather than
// re-implement that check, Detect lets io_uring_setup decide and names the
// sysctl when it refuses.
func readDisabledSysctl() string {
	value, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(value))
}

// setupRefusal explains a failed io_uring_setup (or ring mmap).
func setupRefusal(err error, disabled string) string {
	prefix := "io_uring_setup refused: " + err.Error()
	switch {
	case errors.Is(err, unix.ENOSYS):
		return prefix + " (kernel without io_uring, or a sandbox such as gVisor or a seccomp filter)"
	case errors.Is(err, unix.EPERM) && disabled == "1":
		return prefix + " (kernel.io_uring_disabled=1 allows only CAP_SYS_ADMIN and kernel.io_uring_group)"
	case errors.Is(err, unix.EPERM):
		return prefix + " (a seccomp profile such as Docker's default, an LSM, or kernel.io_uring_disabled)"
	case errors.Is(err, unix.ENOMEM):
		return prefix + " (RLIMIT_MEMLOCK too low: kernels before 5.12 charge ring memory to it; raise ulimit -l)"
	}
	return prefix
}

// checkRing applies the hard requirements to a working scratch ring and
// returns why it falls short, or "".
func checkRing(r *Ring, capabilities *Capabilities) string {
	const needed = FeatureSingleMmap | FeatureNoDrop
	if r.Features()&needed != needed {
		return fmt.Sprintf("io_uring too old: features %#x lack SINGLE_MMAP|NODROP (5.5+)", r.Features())
	}
	if r.Features()&FeatureExtArg == 0 {
		return "io_uring too old: no IORING_FEAT_EXT_ARG for bounded waits (5.11+)"
	}
	ops, err := Probe(r)
	if err != nil {
		return "io_uring probe failed (5.6+ needed): " + err.Error()
	}
	capabilities.Ops = ops
	if missing := ops.missing(RequiredOps); len(missing) > 0 {
		return "io_uring lacks opcodes " + strings.Join(missing, ", ")
	}
	if err := nopRoundTrip(r); err != nil {
		return "io_uring NOP round trip failed: " + err.Error()
	}
	return ""
}

// nopRoundTrip submits one NOP and waits a bounded time for its CQE.
func nopRoundTrip(r *Ring) error {
	const token = 0x4e4f50
	sqe := r.GetSQE()
	sqe.PrepNop()
	sqe.SetUserData(token)
	cqe, err := r.awaitCQE(token, detectWait)
	if err != nil {
		return err
	}
	return cqe.Err()
}

// detectOptional tries each capability that is a flag rather than an
// opcode once; any failure (EINVAL on kernels without it) means "no".
func detectOptional(setup SetupFunc, capabilities *Capabilities) {
	capabilities.SingleIssuer = trySetup(setup, Options{SingleIssuer: true})
	capabilities.DeferTaskrun = capabilities.SingleIssuer && trySetup(setup, Options{DeferTaskrun: true})
	capabilities.BufferRing, capabilities.MultishotRecv = tryMultishotRecv(setup)
	capabilities.MultishotAccept = tryMultishotAccept(setup)
}

// trySetup creates and closes a ring with options, on a locked thread so a
// SingleIssuer ring is created and closed by the same task.
func trySetup(setup SetupFunc, options Options) bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := newRing(4, options, setup)
	if err != nil {
		return false
	}
	r.Close()
	return true
}

// describe is the Reason of an available ring: what works, what does not.
func describe(capabilities Capabilities) string {
	var have, lack []string
	for _, capability := range []struct {
		name    string
		present bool
	}{
		{"multishot accept", capabilities.MultishotAccept},
		{"multishot recv", capabilities.MultishotRecv},
		{"buffer ring", capabilities.BufferRing},
		{"single issuer", capabilities.SingleIssuer},
		{"defer taskrun", capabilities.DeferTaskrun},
	} {
		if capability.present {
			have = append(have, capability.name)
		} else {
			lack = append(lack, capability.name)
		}
	}
	reason := fmt.Sprintf("io_uring usable on %s (features %#x", capabilities.Kernel, capabilities.Features)
	if len(have) > 0 {
		reason += "; " + strings.Join(have, ", ")
	}
	if len(lack) > 0 {
		reason += "; without " + strings.Join(lack, ", ")
	}
	return reason + ")"
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var name unix.Utsname
	if err := unix.Uname(&name); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(name.Release[:])
}
