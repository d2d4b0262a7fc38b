package uring

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDetect(t *testing.T) {
	start := time.Now()
	capabilities := Detect()
	t.Logf("Detect took %v: %+v", time.Since(start), capabilities)
	if !capabilities.Available {
		t.Skip("io_uring unavailable here: " + capabilities.Reason)
	}
	if !strings.Contains(capabilities.Reason, "usable") || capabilities.Kernel == "" ||
		capabilities.Features&FeatureNoDrop == 0 || !capabilities.Ops.Has(OpRecv) {
		t.Fatalf("available but inconsistent: %+v", capabilities)
	}
}

func TestDetectDisabledByEnvironment(t *testing.T) {
	t.Setenv(DisableEnvironment, "1")
	capabilities := Detect()
	if capabilities.Available || capabilities.Reason != "disabled by IRONBUS_URING_DISABLE" {
		t.Fatalf("%+v", capabilities)
	}
}

// TestDetectRefusals simulates the kernels and sandboxes that say no.
func TestDetectRefusals(t *testing.T) {
	for _, refusal := range []struct {
		errno unix.Errno
		hint  string
	}{
		{unix.EPERM, "seccomp"},
		{unix.ENOSYS, "kernel without io_uring"},
		{unix.ENOMEM, "RLIMIT_MEMLOCK"},
	} {
		capabilities := DetectWith(func(uint32, *Params) (int, error) { return -1, refusal.errno })
		if capabilities.Available || !strings.Contains(capabilities.Reason, refusal.errno.Error()) ||
			!strings.Contains(capabilities.Reason, refusal.hint) {
			t.Errorf("%v: %+v", refusal.errno, capabilities)
		}
	}
	capabilities := DetectWith(func(uint32, *Params) (int, error) { panic("boom") })
	if capabilities.Available || !strings.Contains(capabilities.Reason, "panicked") {
		t.Errorf("panicking setup: %+v", capabilities)
	}
}

// TestDetectDegraded removes features one at a time from a working kernel.
func TestDetectDegraded(t *testing.T) {
	requireUring(t)
	noSingleIssuer := DetectWith(func(entries uint32, params *Params) (int, error) {
		if params.Flags&SetupSingleIssuer != 0 {
			return -1, unix.EINVAL
		}
		return systemSetup(entries, params)
	})
	if !noSingleIssuer.Available || noSingleIssuer.SingleIssuer || noSingleIssuer.DeferTaskrun {
		t.Errorf("EINVAL for SINGLE_ISSUER: %+v", noSingleIssuer)
	}
	noNoDrop := DetectWith(func(entries uint32, params *Params) (int, error) {
		fd, err := systemSetup(entries, params)
		params.Features &^= FeatureNoDrop
		return fd, err
	})
	if noNoDrop.Available || !strings.Contains(noNoDrop.Reason, "NODROP") {
		t.Errorf("without NODROP: %+v", noNoDrop)
	}
}
