package brokertime

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// SystemSource is the platform's monotonic clock that keeps counting
// while the machine is suspended: CLOCK_BOOTTIME, so a board that sleeps
// an hour sees its windows an hour nearer (Go's own monotonic clock,
// CLOCK_MONOTONIC, does not count suspend).
//
// Reading CLOCK_BOOTTIME is a system call, too slow for the append path,
// so Elapsed reads Go's monotonic clock (served from the vDSO) plus the
// time spent suspended, which the Clock's persist loop refreshes every
// persist interval: after a resume, broker time catches up with the
// sleep within a second, and never goes backwards.
func SystemSource() Source {
	boot, err := bootTime()
	if err != nil {
		return goMonotonic{origin: time.Now()}
	}
	return &bootSource{monoOrigin: time.Now(), bootOrigin: boot}
}

type bootSource struct {
	monoOrigin time.Time
	bootOrigin time.Duration
	suspended  atomic.Int64 // CLOCK_BOOTTIME's lead over the monotonic clock since the origins
}

func (b *bootSource) Elapsed() time.Duration {
	return time.Since(b.monoOrigin) + time.Duration(b.suspended.Load())
}

// refresh measures how long the machine has been suspended since the
// source was made.
func (b *bootSource) refresh() {
	boot, err := bootTime()
	if err != nil {
		return
	}
	lead := int64(boot - b.bootOrigin - time.Since(b.monoOrigin))
	if lead > b.suspended.Load() {
		b.suspended.Store(lead)
	}
}

func bootTime() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
