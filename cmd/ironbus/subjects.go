package main

import (
	"context"
	"errors"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/subject"
)

// routedStream names the stream a subject routes to, for pub's output; ""
// when the bindings cannot be read or none matches (the broker then
// refuses the records with no_route, which pub reports).
func routedStream(ctx context.Context, c *client.Client, subjectName string) string {
	bindings, err := c.Bindings(ctx)
	if err != nil {
		return ""
	}
	for _, binding := range bindings {
		if subject.Match([]byte(binding.Pattern), []byte(subjectName)) {
			return binding.Stream // bindings never overlap across streams
		}
	}
	return ""
}

// spannedStreams lists the streams whose bindings can match pattern, for
// sub --subject without --stream.
func spannedStreams(ctx context.Context, c *client.Client, pattern string) ([]string, error) {
	streams, err := c.StreamsMatching(ctx, pattern)
	switch {
	case errors.Is(err, subject.ErrNotBound):
		return nil, exitErrorf(exitNotFound, "--subject %q: %v (ironbus stream bind PATTERN STREAM binds one; --stream reads one stream)", pattern, err)
	case errors.Is(err, client.ErrInvalidSubject):
		return nil, exitErrorf(exitUsage, "--subject %q: %v", pattern, err)
	case err != nil:
		return nil, brokerError(err, "")
	}
	return streams, nil
}
