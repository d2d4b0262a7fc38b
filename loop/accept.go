package loop

import (
	"log/slog"
	"time"
)

// acceptBackoff paces an accept loop whose accepts fail for want of file
// descriptors: retrying at once would spin a core and flood the log while
// none is free, and giving up would end the listener, so it waits, twice
// as long each time from 5 ms up to a second, until an accept succeeds.
type acceptBackoff struct {
	wait time.Duration
}

// failed logs err and waits before the next attempt.
func (b *acceptBackoff) failed(logger *slog.Logger, err error) {
	b.wait = min(max(2*b.wait, 5*time.Millisecond), time.Second)
	logger.Warn("accept failed; retrying", "error", err.Error(), "after", b.wait)
	time.Sleep(b.wait)
}

// succeeded resets the wait.
func (b *acceptBackoff) succeeded() { b.wait = 0 }
