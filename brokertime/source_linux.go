package brokertime

import (
	"time"

	"golang.org/x/sys/unix"
)

// SystemSource is the platform's monotonic clock that keeps counting
// while the machine is suspended: CLOCK_BOOTTIME, so a laptop or a board
// that sleeps an hour sees its timers an hour nearer (Go's own monotonic
// clock, CLOCK_MONOTONIC, does not count suspend).
func SystemSource() Source {
	origin, err := bootTime()
	if err != nil {
		return goMonotonic{origin: time.Now()}
	}
	return bootSource{origin: origin}
}

type bootSource struct{ origin time.Duration }

func (b bootSource) Elapsed() time.Duration {
	now, err := bootTime()
	if err != nil {
		return 0 // cannot fail once the first reading succeeded; the Clock keeps its high-water
	}
	return now - b.origin
}

func bootTime() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
