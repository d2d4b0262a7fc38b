package main

import (
	"context"

	"github.com/ironbus/ironbus/client"
)

// routedStream names the stream a subject routes to, for pub's output; ""
// when the bindings cannot be read (the broker still routes, or refuses
// with no_route).
func routedStream(ctx context.Context, c *client.Client, subject string) string {
	_, _, _ = ctx, c, subject
	return ""
}

// spannedStreams lists the streams whose bindings can match pattern, for
// sub --subject without --stream.
func spannedStreams(ctx context.Context, c *client.Client, pattern string) ([]string, error) {
	_, _, _ = ctx, c, pattern
	return nil, exitErrorf(exitUsage, "--subject without --stream needs the broker's stream bindings")
}

// benchBind binds pattern to stream for bench --subjects.
func benchBind(ctx context.Context, c *client.Client, pattern, stream string) error {
	_, _, _, _ = ctx, c, pattern, stream
	return exitErrorf(exitUsage, "--subjects needs the broker's stream bindings")
}
