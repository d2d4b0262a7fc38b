package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"

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
	response, body, err := healthGet(ctx, addr, "/admin", maxAdminBytes)
	if errors.Is(err, errHealthAddr) {
		return nil, exitErrorf(exitUsage, "--health-addr %q: %w (want host:port, for example %s)", addr, err, defaultHealthAddr)
	}
	if err != nil {
		return nil, exitErrorf(exitUnreachable, "no broker answers on %s: %w; is `ironbus serve` running, and with this --health-addr?", addr, err)
	}
	if response.StatusCode != http.StatusOK && response.StatusCode != http.StatusServiceUnavailable {
		return nil, exitErrorf(exitUnreadable, "%s/admin answered %s; is this an IronBus health address?", addr, response.Status)
	}
	return decodeAdmin(body, addr)
}

// errHealthAddr is a --health-addr that is not host:port.
var errHealthAddr = errors.New("not a host:port address")

// healthGet sends one GET for path to the health endpoints on addr and
// returns the response and its body (at most limit bytes), all within
// adminTimeout. The request is written here and the answer parsed by
// http.ReadResponse: http.Client would link its transport, proxy and
// HTTP/2 machinery (about 0.4 MB of the binary, docs/PACKAGING.md) for
// two requests to a loopback address.
func healthGet(ctx context.Context, addr, path string, limit int64) (*http.Response, []byte, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil || strings.ContainsFunc(addr, unicode.IsSpace) {
		return nil, nil, errHealthAddr
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	// The deadline ends a broker that accepts but never answers; the
	// AfterFunc ends the exchange when the caller's context is cancelled.
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	request := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: ironbus\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(conn, request); err != nil {
		return nil, nil, err
	}
	response, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(response.Body, limit))
	if err != nil {
		return nil, nil, err
	}
	return response, body, nil
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
