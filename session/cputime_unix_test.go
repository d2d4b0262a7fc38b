//go:build unix

package session

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used: on a
// shared machine the wall clock of a benchmark moves with other tenants,
// the CPU it spends much less.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
