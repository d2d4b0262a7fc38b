package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Defaults for ConsumeOptions.
const (
	DefaultConsumeBatch = 16
	DefaultConsumeLease = 30 * time.Second
	DefaultConsumeWait  = 5 * time.Second
	// settleTimeout bounds the acks and nacks Consume sends after its
	// context ended, returning what it had not processed.
	settleTimeout = 5 * time.Second
)

// Handler processes one message for Consume. Returning nil acknowledges
// the message; returning an error returns it for redelivery (Nack) after
// ConsumeOptions.NackDelay, or after the delay RetryAfter put in the
// error. ctx is Consume's context: a handler that sees it end should
// give up (its message is then returned for redelivery).
type Handler func(ctx context.Context, m Message) error

// ConsumeOptions shape Consume. The zero value is usable.
type ConsumeOptions struct {
	// Partition is the partition to read, or AllPartitions: records of
	// every partition, each settled with its own partition.
	Partition uint32
	// Filter, when set, is a subject pattern: only matching records reach
	// the handler (the rest come to OnGap as GapFiltered gaps). With a
	// filter, Consume opens the group with it, so a group it creates
	// keeps the filter.
	Filter string
	// Type is GroupWork (the default) or GroupKeyShared: Consume settles
	// leased records one by one.
	Type GroupType
	// Start is where the group starts if Consume creates it.
	Start StartPosition
	// Batch is how many records one fetch leases (DefaultConsumeBatch).
	// They are handled one at a time, in order; the leases of those
	// waiting their turn are extended too.
	Batch int
	// Lease is the visibility timeout asked for (DefaultConsumeLease).
	// While a batch is being handled, Consume extends its leases every
	// Lease/3, so a long handler keeps its message (up to the broker's
	// hard cap of 5 minutes per attempt).
	Lease time.Duration
	// Wait is how long one fetch waits for records (DefaultConsumeWait).
	Wait time.Duration
	// NackDelay is the redelivery delay after a handler error; 0 uses the
	// group's backoff schedule (100 ms, 500 ms, 2 s, 10 s, 30 s by
	// attempt), so a failing record does not burn its attempts at once.
	NackDelay time.Duration
	// OnGap receives the gap advisories: records removed (retention,
	// damage) before the group reached them, and ranges a filter skipped
	// (GapFiltered). nil ignores them.
	OnGap func(Gap)
	// OnLostLease is told when a handled message could not be settled
	// because its lease was lost (status expired, stale or unknown): the
	// message is (or was) delivered again, perhaps to another consumer,
	// so its work may be repeated. nil ignores it.
	OnLostLease func(Message, AckStatus)
}

func (o ConsumeOptions) withDefaults() ConsumeOptions {
	if o.Batch <= 0 {
		o.Batch = DefaultConsumeBatch
	}
	if o.Lease <= 0 {
		o.Lease = DefaultConsumeLease
	}
	if o.Wait <= 0 {
		o.Wait = DefaultConsumeWait
	}
	if o.NackDelay <= 0 {
		o.NackDelay = -1 // the group's backoff
	}
	return o
}

// RetryError asks Consume to redeliver a message after Delay.
type RetryError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryError) Error() string { return fmt.Sprintf("retry after %v: %v", e.Delay, e.Err) }

// Unwrap returns the handler's error.
func (e *RetryError) Unwrap() error { return e.Err }

// RetryAfter wraps a handler error so that Consume redelivers the
// message after delay (0: at once) instead of ConsumeOptions.NackDelay.
func RetryAfter(delay time.Duration, err error) error { return &RetryError{Delay: delay, Err: err} }

// Consume runs handler on the records of a work (or key-shared) group
// until ctx ends, and returns ctx.Err() then, or the first error that
// stops it (a broken connection, a refused group). Each message is
// acknowledged when handler returns nil and returned for redelivery when
// it returns an error; leases are extended while handler runs. Records
// that failed their CRC are returned for redelivery at once. Consuming is
// at-least-once: a message whose lease was lost is handled again.
func (c *Client) Consume(ctx context.Context, stream, group string, handler Handler, opts ConsumeOptions) error {
	opts = opts.withDefaults()
	if opts.Type.mode() != wire.ModeWork && opts.Type.mode() != wire.ModeKeyShared {
		return fmt.Errorf("%w: Consume handles work and key-shared groups, not %s", ErrInvalidArgument, opts.Type)
	}
	if opts.Type.mode() != wire.ModeWork || opts.Start.Kind != StartEarliest || opts.Filter != "" {
		if _, err := c.OpenGroup(ctx, stream, group, GroupOptions{Partition: opts.Partition, Type: opts.Type, Start: opts.Start, Filter: opts.Filter}); err != nil {
			return err
		}
	}
	fetch := FetchOptions{Partition: opts.Partition, Type: opts.Type, MaxRecords: opts.Batch, Wait: opts.Wait, Lease: opts.Lease, Filter: opts.Filter}
	for {
		result, err := c.Fetch(ctx, stream, group, fetch)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err = c.consumeFetchError(ctx, stream, group, err); err != nil {
			return err
		}
		for _, gap := range result.Gaps {
			if opts.OnGap != nil {
				opts.OnGap(gap)
			}
		}
		if err := c.handleBatch(ctx, stream, group, handler, opts, result.Messages); err != nil {
			return err
		}
	}
}

// consumeFetchError decides whether a Fetch error stops Consume: corrupt
// deliveries are returned for redelivery, a retryable server error waits
// out its hint, anything else stops.
func (c *Client) consumeFetchError(ctx context.Context, stream, group string, err error) error {
	var rejected *DeliveryError
	var server *wire.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rejected):
		for _, r := range rejected.Rejected {
			if _, err := c.Nack(ctx, stream, group, 0, r.Message); err != nil {
				return err
			}
		}
		return nil
	case errors.As(err, &server) && server.Retryable && !server.Closes:
		wait := max(server.RetryAfter, 100*time.Millisecond)
		select {
		case <-time.After(wait):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// handleBatch runs handler on each message in turn, settling each as it
// finishes, while a goroutine extends the leases of those not settled.
func (c *Client) handleBatch(ctx context.Context, stream, group string, handler Handler, opts ConsumeOptions, messages []Message) error {
	if len(messages) == 0 {
		return nil
	}
	held := &heldLeases{messages: append([]Message(nil), messages...)}
	stopExtending := c.extendWhileHeld(ctx, stream, group, opts.Lease, held)
	defer stopExtending()
	for i, m := range messages {
		if ctx.Err() != nil {
			c.returnUnhandled(ctx, stream, group, messages[i:])
			return ctx.Err()
		}
		err := handler(ctx, m)
		var statuses []AckStatus
		var settleErr error
		if err == nil {
			statuses, settleErr = c.Ack(context.WithoutCancel(ctx), stream, group, m)
		} else {
			delay := opts.NackDelay
			if retry := (*RetryError)(nil); errors.As(err, &retry) {
				delay = max(retry.Delay, 0)
			}
			statuses, settleErr = c.Nack(context.WithoutCancel(ctx), stream, group, delay, m)
		}
		held.settled(m)
		if settleErr != nil {
			return settleErr
		}
		if statuses[0] != AckOK && opts.OnLostLease != nil {
			opts.OnLostLease(m, statuses[0])
		}
	}
	return nil
}

// returnUnhandled nacks messages Consume will not handle (its context
// ended), so they go to another consumer at once rather than after their
// leases.
func (c *Client) returnUnhandled(ctx context.Context, stream, group string, messages []Message) {
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, _ = c.Nack(settle, stream, group, 0, messages...)
}

// heldLeases is the part of a batch not settled yet.
type heldLeases struct {
	mu       sync.Mutex
	messages []Message
}

func (h *heldLeases) settled(m Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.messages {
		if h.messages[i].Offset == m.Offset && h.messages[i].Lease == m.Lease && h.messages[i].Partition == m.Partition {
			h.messages = append(h.messages[:i], h.messages[i+1:]...)
			return
		}
	}
}

func (h *heldLeases) snapshot() []Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Message(nil), h.messages...)
}

// extendWhileHeld extends the held leases every lease/3 until the
// returned stop is called. A failed extension is not fatal: the lease
// then lapses and the settle reports it.
func (c *Client) extendWhileHeld(ctx context.Context, stream, group string, lease time.Duration, held *heldLeases) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(max(lease/3, time.Millisecond))
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if pending := held.snapshot(); len(pending) > 0 {
				_, _ = c.Extend(ctx, stream, group, lease, pending...)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
