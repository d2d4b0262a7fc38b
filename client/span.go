package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ConsumeStreams runs one handler over the records of group on several
// streams at once, as Consume does for one: each stream is consumed by
// its own loop (same opts, filter included), and handler gets every
// message with its Stream, Partition and Offset named. Handler calls are
// serialized (never two at once), so it needs no locking of its own.
//
// Ordering holds per stream partition only: records of different streams
// (or partitions) interleave in whatever order they arrive. It returns
// when ctx ends (ctx.Err()) or the first stream's loop fails; that
// failure ends the others, and it is returned naming its stream.
func (c *Client) ConsumeStreams(ctx context.Context, streams []string, group string, handler Handler, opts ConsumeOptions) error {
	if len(streams) == 0 {
		return fmt.Errorf("%w: no stream to consume", ErrInvalidArgument)
	}
	for _, stream := range streams {
		if err := checkName("stream", stream); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var handling sync.Mutex
	serialized := func(ctx context.Context, m Message) error {
		handling.Lock()
		defer handling.Unlock()
		return handler(ctx, m)
	}
	var wg sync.WaitGroup
	for _, stream := range streams {
		wg.Go(func() {
			err := c.Consume(ctx, stream, group, serialized, opts)
			if err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("stream %q: %w", stream, err))
			}
		})
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return ctx.Err()
}
