package segment

import (
	"context"

	"github.com/ironbus/ironbus/segment/format"
)

// SealActive seals the active segment when it holds records and starts an
// empty one at the next offset, so that DeleteBefore(end) can remove every
// record below end, the returned next offset. It is the first half of a
// purge: retention never deletes the newest segment, and the records of
// the active one would otherwise survive it. Records appended after the
// call stay.
func (l *Log) SealActive(ctx context.Context) (uint64, error) {
	if l.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if l.seals == nil {
		return 0, ErrClosed
	}
	done := make(chan error, 1)
	select {
	case l.seals <- done:
	case <-l.finished:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case err := <-done:
		if err != nil {
			return 0, err
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	l.mu.Lock()
	end := l.mu.nextOffset
	l.mu.Unlock()
	// The seal covered what the appender had taken; wait until all of it
	// is committed, so DeleteBefore(end) finds the sealed segment whole.
	sealed := l.sealedEnd()
	if sealed == 0 {
		// Nothing sealed: the active segment was empty and is the only
		// one; nothing below its base is held.
		return min(end, l.FirstOffset()), nil
	}
	if _, err := l.WaitCommitted(ctx, sealed-1); err != nil {
		return 0, err
	}
	return min(end, sealed), nil
}

// sealedEnd is the next offset of the newest sealed segment (0: none).
func (l *Log) sealedEnd() uint64 {
	set := l.segments.Load()
	for i := len(set.segments) - 1; i >= 0; i-- {
		if seg := set.segments[i]; seg.sealed.Load() {
			return seg.next()
		}
	}
	return 0
}

// sealActive runs on the appender goroutine, holding the write token: a
// roll without a frame. A
// failed seal leaves the segment in an unknown state, so the log freezes
// as it would for a failed write.
func (a *appender) sealActive() error {
	if err := a.log.Err(); err != nil {
		return err
	}
	if a.active == nil || a.pos == format.SegmentDataStart {
		return nil
	}
	if err := a.roll(0); err != nil {
		a.log.freeze(err)
		return err
	}
	return nil
}
