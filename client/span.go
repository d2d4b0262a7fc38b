package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ironbus/ironbus/subject"
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

// ConsumeSubject is a wildcard subscription that may span streams: it
// reads the broker's subject bindings, finds every stream bound to a
// pattern that can match pattern (subject.Overlap), and consumes group on
// each of them (every partition: opts.Partition is not used) with
// pattern as the filter, through one serialized handler, as
// ConsumeStreams does. Each message names its Stream, Partition and
// Offset; ordering holds per stream partition, never across streams.
//
// The streams are found once, when it starts: a stream bound later is
// not picked up until ConsumeSubject is called again. No stream bound to
// a matching subject is an error wrapping subject.ErrNotBound.
func (c *Client) ConsumeSubject(ctx context.Context, pattern, group string, handler Handler, opts ConsumeOptions) error {
	if err := errors.Join(checkPattern(pattern), c.needStreams("a subject subscription")); err != nil {
		return err
	}
	streams, err := c.StreamsMatching(ctx, pattern)
	if err != nil {
		return err
	}
	opts.Partition, opts.Filter = AllPartitions, pattern
	return c.ConsumeStreams(ctx, streams, group, handler, opts)
}

// StreamsMatching lists, sorted, the streams a subscription to pattern
// reaches: those with a binding some subject matching pattern also
// matches. None is an error wrapping subject.ErrNotBound.
func (c *Client) StreamsMatching(ctx context.Context, pattern string) ([]string, error) {
	if err := checkPattern(pattern); err != nil {
		return nil, err
	}
	bindings, err := c.Bindings(ctx)
	if err != nil {
		return nil, err
	}
	table, err := subject.NewTable(subjectBindings(bindings)...)
	if err != nil {
		return nil, fmt.Errorf("%w: the broker's bindings: %w", ErrProtocol, err)
	}
	streams := table.StreamsMatching([]byte(pattern))
	if len(streams) == 0 {
		return nil, fmt.Errorf("%w: no stream is bound to a subject matching %q", subject.ErrNotBound, pattern)
	}
	return streams, nil
}

func subjectBindings(bindings []Binding) []subject.Binding {
	out := make([]subject.Binding, len(bindings))
	for i, b := range bindings {
		out[i] = subject.Binding{Pattern: b.Pattern, Stream: b.Stream}
	}
	return out
}
