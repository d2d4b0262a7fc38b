package brokertime

import "time"

// Source reads a monotonic clock: time elapsed since an arbitrary origin
// fixed when the source was made. It never goes backwards. Tests inject
// one to move broker time by hand.
type Source interface {
	Elapsed() time.Duration
}

// refresher is a Source that must be told now and then to take a slow
// reading (the Clock's persist loop does, every persist interval).
type refresher interface {
	refresh()
}

// goMonotonic reads Go's monotonic clock, which stops while the machine
// is suspended: the fallback where no clock counts suspend.
type goMonotonic struct{ origin time.Time }

func (m goMonotonic) Elapsed() time.Duration { return time.Since(m.origin) }
