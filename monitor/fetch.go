package monitor

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

// Timeout bounds one request: a monitoring check must answer even when
// the broker does not.
const Timeout = 5 * time.Second

// MaxAdminBytes bounds the /admin document read (a broker serves at most
// a few hundred streams and groups: a few hundred KiB).
const MaxAdminBytes = 64 << 20

// Sentinel errors; each is wrapped with the detail.
var (
	// ErrAddress marks an address that is not host:port.
	ErrAddress = errors.New("monitor: not a host:port address")
	// ErrUnreachable marks a broker that did not answer; it wraps the
	// network's error.
	ErrUnreachable = errors.New("monitor: no broker answers")
	// ErrStatus marks an /admin answer that is neither 200 nor 503.
	ErrStatus = errors.New("monitor: unexpected status")
	// ErrNotAdmin marks an answer that is not an /admin document.
	ErrNotAdmin = errors.New("monitor: not an IronBus admin document")
	// ErrSchema marks an /admin document of another schema version.
	ErrSchema = errors.New("monitor: admin document of another schema")
	// ErrUnauthorized marks endpoints that want a bearer token this
	// request lacked or got wrong.
	ErrUnauthorized = errors.New("monitor: the health endpoints refused the token")
	// ErrToken marks a token that cannot go in a header (a control
	// character or a space).
	ErrToken = errors.New("monitor: malformed token")
)

// Response is a health endpoint's answer.
type Response struct {
	StatusCode int
	Status     string
	Body       []byte
}

// Endpoint is where a broker's health endpoints answer, and the bearer
// token they want ("" for none: loopback endpoints without
// serve --health-token-file).
type Endpoint struct {
	Addr  string
	Token string
}

// Get sends one GET for path to the health endpoints at endpoint and returns
// the answer (its body cut at limit bytes), all within Timeout. A bad
// address is ErrAddress; a network failure is returned as the network
// gave it. The request is written here and the answer parsed by
// http.ReadResponse: http.Client would link its transport, proxy and
// HTTP/2 machinery (about 0.4 MB of the binary, docs/PACKAGING.md) for a
// request to a loopback address.
func Get(ctx context.Context, endpoint Endpoint, path string, limit int64) (Response, error) {
	addr := endpoint.Addr
	if _, _, err := net.SplitHostPort(addr); err != nil || strings.ContainsFunc(addr, unicode.IsSpace) {
		return Response{}, ErrAddress
	}
	authorization := ""
	if endpoint.Token != "" {
		if strings.ContainsFunc(endpoint.Token, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
			return Response{}, ErrToken // it would break the request
		}
		authorization = "Authorization: Bearer " + endpoint.Token + "\r\n"
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Response{}, err
	}
	defer conn.Close()
	// The deadline ends a broker that accepts but never answers; the
	// AfterFunc ends the exchange when the caller's context is cancelled.
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return Response{}, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	request := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n" + authorization + "User-Agent: ironbus\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(conn, request); err != nil {
		return Response{}, err
	}
	response, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return Response{}, err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(response.Body, limit))
	if err != nil {
		return Response{}, err
	}
	return Response{StatusCode: response.StatusCode, Status: response.Status, Body: body}, nil
}

// Fetch reads the /admin document of the broker whose health endpoints
// answer at endpoint. A broker that is recovering answers 503 with a
// document that carries only its readiness; that is returned too. A 401
// is ErrUnauthorized.
func Fetch(ctx context.Context, endpoint Endpoint) (*health.Admin, error) {
	addr := endpoint.Addr
	response, err := Get(ctx, endpoint, "/admin", MaxAdminBytes)
	switch {
	case errors.Is(err, ErrToken):
		return nil, err
	case err == nil && response.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("%w: %s/admin answered %s", ErrUnauthorized, addr, response.Status)
	case errors.Is(err, ErrAddress):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w on %s: %w", ErrUnreachable, addr, err)
	case response.StatusCode != http.StatusOK && response.StatusCode != http.StatusServiceUnavailable:
		return nil, fmt.Errorf("%w: %s/admin answered %s", ErrStatus, addr, response.Status)
	}
	return Decode(response.Body)
}

// Decode parses an /admin document, refusing one of another schema.
func Decode(body []byte) (*health.Admin, error) {
	var doc health.Admin
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAdmin, err)
	}
	if doc.Schema != health.AdminSchema {
		return &doc, fmt.Errorf("%w: %q, not %q", ErrSchema, doc.Schema, health.AdminSchema)
	}
	return &doc, nil
}
