package health

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sentinel errors.
var (
	// ErrNotLoopback refuses an address other hosts could reach when no
	// token protects the endpoints.
	ErrNotLoopback = errors.New("health: address is not a loopback address")
	// ErrAddress is a malformed address.
	ErrAddress = errors.New("health: bad address")
)

// ReasonRecovering is the readiness reason before Attach.
const ReasonRecovering = "recovering"

// Source is what the server reports on: the broker, once open.
type Source interface {
	// Readiness says whether writes are accepted now, and why not.
	Readiness() Readiness
	// Liveness returns an error naming what is stuck, or nil.
	Liveness() error
	// Admin returns the /admin document.
	Admin() *Admin
	// Metrics returns what /metrics exposes.
	Metrics() prometheus.Gatherer
}

// Probe is an extra liveness check the server runs on /healthz, such as a
// round trip through the network loop that only the caller can make.
type Probe struct {
	Name  string
	Check func(ctx context.Context) error
}

// Options configures a Server.
type Options struct {
	// Probes run on every /healthz, each within ProbeTimeout (2 s).
	Probes       []Probe
	ProbeTimeout time.Duration
	// MaxRequests bounds the requests served at once (4): each /admin or
	// /metrics builds a snapshot, and the broker's memory is budgeted, so a
	// runaway scraper waits (up to a second, then gets 503) instead of
	// growing the heap.
	MaxRequests int
	// AllowedHosts are host names the Host header may carry besides the
	// loopback ones (localhost, 127.0.0.0/8, ::1), which are always
	// served. Any other Host is refused (421): a browser page whose name
	// an attacker made resolve to 127.0.0.1 (DNS rebinding) sends its own
	// name, and must not read /admin or /metrics.
	AllowedHosts []string
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer <token>), whatever the endpoint and wherever
	// the request comes from; without it the answer is 401. It is required
	// to bind beyond loopback. Only its SHA-256 is kept.
	Token  string
	Logger *slog.Logger
}

// Server serves the endpoints on one listener: loopback, or any address
// with a token.
type Server struct {
	opts     Options
	token    [sha256.Size]byte // the token's digest, when protected
	guarded  bool
	listener net.Listener
	http     *httpServer
	source   atomic.Pointer[Source]
	probes   atomic.Pointer[[]Probe]
	served   chan error
	slots    chan struct{}
}

// CheckAddress refuses an address that is malformed, or beyond loopback
// (another host could reach it) when tokened is false: only a token lets
// the endpoints listen there.
func CheckAddress(addr string, tokened bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w %q: %w (want host:port, for example 127.0.0.1:7778)", ErrAddress, addr, err)
	}
	if tokened || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotLoopback, addr)
}

// Listen binds addr (loopback, or any address with Options.Token) and
// starts serving: until Attach, /readyz answers 503 "recovering".
func Listen(addr string, opts Options) (*Server, error) {
	if err := CheckAddress(addr, opts.Token != ""); err != nil {
		return nil, err
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 2 * time.Second
	}
	if opts.MaxRequests <= 0 {
		opts.MaxRequests = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health: listening on %s: %w", addr, err)
	}
	s := &Server{opts: opts, listener: listener, served: make(chan error, 1), slots: make(chan struct{}, opts.MaxRequests),
		guarded: opts.Token != "", token: sha256.Sum256([]byte(opts.Token))}
	s.opts.Token = "" // the digest is enough; the secret is not kept
	probes := opts.Probes
	s.probes.Store(&probes)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /admin", s.admin)
	s.http = newHTTPServer(s.hostChecked(s.authorized(s.bounded(mux))), 5*time.Second, 30*time.Second, opts.Logger)
	go func() { s.served <- s.http.Serve(listener) }()
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Attach hands the server the open broker.
func (s *Server) Attach(source Source) { s.source.Store(&source) }

// AddProbe adds a liveness probe (for what starts after Listen, such as
// the network loop).
func (s *Server) AddProbe(probe Probe) {
	for {
		old := s.probes.Load()
		probes := append(append([]Probe(nil), *old...), probe)
		if s.probes.CompareAndSwap(old, &probes) {
			return
		}
	}
}

// Close stops serving, letting requests in progress finish until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.http.Close(ctx)
	if served := <-s.served; !errors.Is(served, http.ErrServerClosed) && err == nil {
		err = served
	}
	return err
}

// bounded serves at most MaxRequests at once; a request waits up to a
// second for its turn.
func (s *Server) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(time.Second)
		defer wait.Stop()
		select {
		case s.slots <- struct{}{}:
		case <-wait.C:
			writeText(w, http.StatusServiceUnavailable, "busy: too many requests at once, retry")
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-s.slots }()
		next.ServeHTTP(w, r)
	})
}

// authorized serves, when a token is configured, only requests that
// carry it as a bearer token; the comparison is of SHA-256 digests in
// constant time, so its duration says nothing about the token.
func (s *Server) authorized(next http.Handler) http.Handler {
	if !s.guarded {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		digest := sha256.Sum256([]byte(strings.TrimSpace(presented)))
		if subtle.ConstantTimeCompare(digest[:], s.token[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ironbus"`)
			writeText(w, http.StatusUnauthorized, "unauthorized: these endpoints need the bearer token of serve --health-token-file")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostChecked serves only requests whose Host header names this
// machine's loopback or one of Options.AllowedHosts, or, behind a token,
// any IP literal: rebinding needs a DNS name in the Host header, so an
// address a client reaches a non-loopback bind by is served without
// listing it.
func (s *Server) hostChecked(next http.Handler) http.Handler {
	allowed := make(map[string]bool, len(s.opts.AllowedHosts))
	for _, host := range s.opts.AllowedHosts {
		allowed[canonicalHost(host)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := canonicalHost(r.Host)
		if !allowed[host] && !loopbackHost(host) && !(s.guarded && net.ParseIP(host) != nil) {
			writeText(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"the Host header %q names no loopback address: the health endpoints answer only requests for this machine (DNS rebinding)", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalHost is the host of a Host header without its port, IPv6
// brackets and trailing dot, in lower case.
func canonicalHost(header string) string {
	host := header
	if h, _, err := net.SplitHostPort(header); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) attached() Source {
	if source := s.source.Load(); source != nil {
		return *source
	}
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	var failures []string
	if source := s.attached(); source != nil {
		if err := source.Liveness(); err != nil {
			failures = append(failures, err.Error())
		}
	}
	for _, probe := range *s.probes.Load() {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.ProbeTimeout)
		err := probe.Check(ctx)
		cancel()
		if err != nil {
			failures = append(failures, probe.Name+": "+err.Error())
		}
	}
	if len(failures) > 0 {
		writeText(w, http.StatusServiceUnavailable, "stuck: "+strings.Join(failures, "; "))
		return
	}
	writeText(w, http.StatusOK, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	readiness := s.readiness()
	if !readiness.Ready {
		writeText(w, http.StatusServiceUnavailable, readiness.Reason)
		return
	}
	writeText(w, http.StatusOK, "ready")
}

func (s *Server) readiness() Readiness {
	source := s.attached()
	if source == nil {
		return Readiness{Reason: ReasonRecovering}
	}
	return source.Readiness()
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	source := s.attached()
	if source == nil {
		writeText(w, http.StatusServiceUnavailable, ReasonRecovering)
		return
	}
	writeMetrics(w, r, source.Metrics())
}

// admin serves the document; while recovering it is a stub carrying only
// the schema and the readiness, with 503, so a client decodes one shape.
func (s *Server) admin(w http.ResponseWriter, _ *http.Request) {
	source := s.attached()
	document, status := &Admin{Schema: AdminSchema, Readiness: s.readiness()}, http.StatusServiceUnavailable
	if source != nil {
		document, status = source.Admin(), http.StatusOK
	}
	data, err := json.MarshalIndent(document, "", "  ")
	if err != nil {
		writeText(w, http.StatusInternalServerError, "encoding the admin document: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, text)
}
