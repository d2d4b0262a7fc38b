package segment

import "time"

// Clock supplies wall-clock time, which the engine treats as data only: it
// stamps records and segment headers but never orders, expires or deletes
// anything (invariant I6). Tests inject a fixed or stepping clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }
