//go:build !linux

package brokertime

import "time"

// SystemSource is Go's monotonic clock, which on this platform may not
// count time the machine spends suspended.
func SystemSource() Source { return goMonotonic{origin: time.Now()} }
