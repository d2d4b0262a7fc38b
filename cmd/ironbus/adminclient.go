package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
	"github.com/ironbus/ironbus/security"
)

// addHealthClientFlags adds --health-addr and --health-token-file to a
// command that reads the health endpoints; the current context fills
// both when --health-addr is not given.
func addHealthClientFlags(flags *pflag.FlagSet, addr, tokenFile *string) {
	flags.StringVar(addr, "health-addr", defaultHealthAddr, "the broker's health endpoints (serve --health-addr)")
	flags.StringVar(tokenFile, "health-token-file", "", "bearer token file (mode 0600) for health endpoints behind serve --health-token-file")
	_ = flags.SetAnnotation("health-addr", contextAnnotation, []string{contextHealthAddr})
}

// healthEndpoint is addr with the token of tokenFile ("" for none).
func healthEndpoint(addr, tokenFile string) (monitor.Endpoint, error) {
	endpoint := monitor.Endpoint{Addr: addr}
	if tokenFile == "" {
		return endpoint, nil
	}
	token, err := security.ReadSecretLine(tokenFile)
	if err != nil {
		return endpoint, exitErrorf(exitUsage, "--health-token-file: %w", err)
	}
	endpoint.Token = string(token)
	return endpoint, nil
}

// fetchAdmin reads the /admin document of the broker whose health
// endpoints listen on addr, with the token of tokenFile (monitor.Fetch),
// giving each failure its exit code and what to do.
func fetchAdmin(ctx context.Context, addr, tokenFile string) (*health.Admin, error) {
	endpoint, err := healthEndpoint(addr, tokenFile)
	if err != nil {
		return nil, err
	}
	doc, err := monitor.Fetch(ctx, endpoint)
	switch {
	case errors.Is(err, monitor.ErrUnauthorized), errors.Is(err, monitor.ErrToken):
		return nil, exitErrorf(exitNotAuthorized, "%w; pass the token of serve --health-token-file with --health-token-file", err)
	case errors.Is(err, monitor.ErrAddress):
		return nil, exitErrorf(exitUsage, "--health-addr %q: not a host:port address (want host:port, for example %s)", addr, defaultHealthAddr)
	case errors.Is(err, monitor.ErrUnreachable):
		return nil, exitErrorf(exitUnreachable, "no broker answers on %s: %w; is `ironbus serve` running, and with this --health-addr?", addr, cause(err))
	case errors.Is(err, monitor.ErrStatus):
		return nil, exitErrorf(exitUnreadable, "%w; is this an IronBus health address?", err)
	}
	if err := decodeError(addr, doc, err); err != nil {
		return nil, err
	}
	return doc, nil
}

// decodeAdmin parses an /admin document (monitor.Decode).
func decodeAdmin(body []byte, addr string) (*health.Admin, error) {
	doc, err := monitor.Decode(body)
	if err := decodeError(addr, doc, err); err != nil {
		return nil, err
	}
	return doc, nil
}

// decodeError refuses an answer that is not an /admin document, or one of
// another schema (exit 4).
func decodeError(addr string, doc *health.Admin, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, monitor.ErrSchema):
		return exitErrorf(exitUnreadable, "%s/admin has schema %q, this ironbus reads %q: use an ironbus of the broker's version",
			addr, doc.Schema, health.AdminSchema)
	}
	return exitErrorf(exitUnreadable, "%s/admin is not an IronBus admin document: %w", addr, cause(err))
}

// readinessText renders the readiness for a human.
func readinessText(r health.Readiness) string {
	if r.Ready {
		return "ready"
	}
	return fmt.Sprintf("not ready (%s)", r.Reason)
}
