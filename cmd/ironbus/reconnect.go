package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// Reconnect pacing: quick at first, so a broker restarted at once is
// found at once, then at most once a second.
const (
	firstRedialDelay = 100 * time.Millisecond
	maxRedialDelay   = time.Second
)

// connectionLost reports whether err means the connection to the broker
// went away (it stopped, restarted or the network broke), as opposed to
// the broker refusing a request. Refused credentials are never "lost":
// dialing again would be refused again.
func connectionLost(err error) bool {
	code, fromBroker := wireCode(err)
	if fromBroker && (code == wire.CodeNotAuthorized || code == wire.CodePermissionDenied) {
		return false
	}
	return errors.Is(err, client.ErrConnectionLost) || errors.Is(err, client.ErrClosed) ||
		(fromBroker && code == wire.CodeShuttingDown)
}

// redial connects to addr again until a broker answers or wait passes,
// saying so on stderr. It gives up at once on anything but an unreachable
// broker (refused credentials, bad TLS settings). lost is the error that
// ended the previous connection, for the final message.
func redial(ctx context.Context, opts *globalOptions, addr string, wait time.Duration, lost error) (*client.Client, error) {
	gaveUp := func(cause error) error {
		return exitErrorf(exitUnreachable, "lost the connection to the broker at %s and it did not come back within --reconnect-wait %s: %w",
			addr, wait, cause)
	}
	if wait <= 0 {
		return nil, gaveUp(lost)
	}
	fmt.Fprintf(opts.stderr, "ironbus: lost the connection to the broker at %s; reconnecting for up to %s\n", addr, wait)
	deadline := time.Now().Add(wait)
	delay := firstRedialDelay
	for {
		attempt, cancel := context.WithDeadline(ctx, deadline)
		c, err := dialBroker(attempt, opts, addr, 1)
		cancel()
		if err == nil {
			fmt.Fprintf(opts.stderr, "ironbus: reconnected to %s\n", addr)
			return c, nil
		}
		var exit *exitError
		if errors.As(err, &exit) && exit.code != exitUnreachable {
			return nil, err
		}
		if ctx.Err() != nil || time.Until(deadline) < delay {
			return nil, gaveUp(lost)
		}
		select {
		case <-ctx.Done():
			return nil, gaveUp(lost)
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRedialDelay)
	}
}
