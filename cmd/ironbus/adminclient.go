package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ironbus/ironbus/broker/health"
)

// adminTimeout bounds one /admin request: a monitoring check must answer
// even when the broker does not.
const adminTimeout = 5 * time.Second

// maxAdminBytes bounds the document a client reads (a broker serves at
// most a few hundred streams and groups: a few hundred KiB).
const maxAdminBytes = 64 << 20

// fetchAdmin reads the /admin document of the broker whose health
// endpoints listen on addr. A broker that is recovering answers 503 with
// a document that carries only its readiness; that is returned too.
func fetchAdmin(ctx context.Context, addr string) (*health.Admin, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/admin", nil)
	if err != nil {
		return nil, exitErrorf(exitUsage, "--health-addr %q: %w (want host:port, for example %s)", addr, err, defaultHealthAddr)
	}
	response, err := (&http.Client{Timeout: adminTimeout}).Do(request)
	if err != nil {
		return nil, exitErrorf(exitUnreachable, "no broker answers on %s: %w; is `ironbus serve` running, and with this --health-addr?", addr, err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(response.Body, maxAdminBytes))
	if err != nil {
		return nil, exitErrorf(exitUnreachable, "reading /admin from %s: %w", addr, err)
	}
	if response.StatusCode != http.StatusOK && response.StatusCode != http.StatusServiceUnavailable {
		return nil, exitErrorf(exitUnreadable, "%s/admin answered %s; is this an IronBus health address?", addr, response.Status)
	}
	return decodeAdmin(body, addr)
}

// decodeAdmin parses an /admin document, refusing one of another schema.
func decodeAdmin(body []byte, addr string) (*health.Admin, error) {
	var doc health.Admin
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, exitErrorf(exitUnreadable, "%s/admin is not an IronBus admin document: %w", addr, err)
	}
	if doc.Schema != health.AdminSchema {
		return nil, exitErrorf(exitUnreadable, "%s/admin has schema %q, this ironbus reads %q: use an ironbus of the broker's version",
			addr, doc.Schema, health.AdminSchema)
	}
	return &doc, nil
}

// readinessText renders the readiness for a human.
func readinessText(r health.Readiness) string {
	if r.Ready {
		return "ready"
	}
	return fmt.Sprintf("not ready (%s)", r.Reason)
}
