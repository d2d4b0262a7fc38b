package health

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxRequestBytes bounds what is read of one request: its line, headers
// and body. The endpoints take GETs of a few hundred bytes.
const maxRequestBytes = 64 << 10

// httpServer serves HTTP/1.1 to one handler, one request per connection
// (every response says "Connection: close"), each response buffered and
// sent with its Content-Length. The endpoints are a few small GETs from
// probes, scrapers and the CLI on a loopback address; net/http's Server
// would link its HTTP/2 server and connection state machine, about half
// a megabyte of the binary (docs/PACKAGING.md), that these requests
// never use. Requests are parsed by http.ReadRequest and served through
// http.Handler, so handlers are ordinary net/http handlers.
type httpServer struct {
	handler           http.Handler
	readHeaderTimeout time.Duration // from accept to the end of the request
	writeTimeout      time.Duration // from the end of the request to the end of the response
	logger            *slog.Logger

	// ctx is every request's context; cancelled when Close stops waiting.
	ctx    context.Context
	cancel context.CancelFunc
	active sync.WaitGroup // connections being served

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
	closed   bool
}

func newHTTPServer(handler http.Handler, readHeaderTimeout, writeTimeout time.Duration, logger *slog.Logger) *httpServer {
	ctx, cancel := context.WithCancel(context.Background())
	return &httpServer{handler: handler, readHeaderTimeout: readHeaderTimeout, writeTimeout: writeTimeout, logger: logger,
		ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{})}
}

// Serve accepts connections on listener until Close, and then returns
// http.ErrServerClosed. A failed accept other than the listener closing
// (out of file descriptors, say) is retried after a growing pause.
func (s *httpServer) Serve(listener net.Listener) error {
	s.mu.Lock()
	s.listener = listener
	closed := s.closed
	s.mu.Unlock()
	if closed {
		_ = listener.Close()
		return http.ErrServerClosed
	}
	pause := time.Duration(0)
	for {
		conn, err := listener.Accept()
		if err != nil {
			if s.isClosed() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.logger.Warn("health: accept failed; retrying", "err", err, "pause", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if !s.track(conn) {
			_ = conn.Close()
			return http.ErrServerClosed
		}
		go s.serveConn(conn)
	}
}

// Close stops accepting and waits until the requests in progress are
// answered or ctx ends; then it cancels their contexts, closes their
// connections and returns ctx's error.
func (s *httpServer) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.listener != nil {
		_ = s.listener.Close()
	}
	s.mu.Unlock()
	answered := make(chan struct{})
	go func() {
		s.active.Wait()
		close(answered)
	}()
	select {
	case <-answered:
		s.cancel()
		return nil
	case <-ctx.Done():
	}
	s.cancel()
	s.mu.Lock()
	for conn := range s.conns {
		_ = conn.Close()
	}
	s.mu.Unlock()
	return ctx.Err()
}

func (s *httpServer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track records conn as served, unless the server is closed. The
// WaitGroup is added to under mu, so Close, which sets closed under mu
// before it waits, never waits on a count that can still grow.
func (s *httpServer) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[conn] = struct{}{}
	s.active.Add(1)
	return true
}

func (s *httpServer) forget(conn net.Conn) {
	_ = conn.Close()
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
	s.active.Done()
}

// serveConn reads one request from conn, serves it and answers. A handler
// that panics is logged and its connection closed, as net/http does: a
// request never takes the broker down.
func (s *httpServer) serveConn(conn net.Conn) {
	defer s.forget(conn)
	defer func() {
		if recovered := recover(); recovered != nil {
			s.logger.Error("health: a request handler panicked", "panic", fmt.Sprint(recovered), "remote", conn.RemoteAddr().String())
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(s.readHeaderTimeout))
	request, err := http.ReadRequest(bufio.NewReader(io.LimitReader(conn, maxRequestBytes)))
	if err != nil {
		if !errors.Is(err, io.EOF) {
			_, _ = io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"+
				"Content-Length: 16\r\nConnection: close\r\n\r\n400 Bad Request\n")
		}
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	request = request.WithContext(ctx)
	request.RemoteAddr = conn.RemoteAddr().String()
	response := &bufferedResponse{header: make(http.Header)}
	s.handler.ServeHTTP(response, request)
	if err := response.send(conn, request.Method == http.MethodHead); err != nil {
		s.logger.Debug("health: writing a response failed", "err", err, "remote", request.RemoteAddr)
	}
}

// writeHeader writes header sorted by name, then the blank line; a line
// break inside a value becomes a space, so no value can add a header.
// (http.Header.Write does the same, through a sort of its own type.)
func writeHeader(out *bufio.Writer, header http.Header) {
	names := make([]string, 0, len(header))
	for name := range header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, value := range header[name] {
			_, _ = out.WriteString(name + ": " + strings.Map(withoutLineBreaks, value) + "\r\n")
		}
	}
	_, _ = out.WriteString("\r\n")
}

func withoutLineBreaks(r rune) rune {
	if r == '\r' || r == '\n' {
		return ' '
	}
	return r
}

// bufferedResponse is the http.ResponseWriter of one request: the status,
// headers and body are kept until the handler returns, then sent at once.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

var _ http.ResponseWriter = (*bufferedResponse)(nil)

func (r *bufferedResponse) Header() http.Header { return r.header }

func (r *bufferedResponse) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *bufferedResponse) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// send writes the response to w; a HEAD request gets the headers only. A
// body without a Content-Type gets the sniffed one, as from net/http.
func (r *bufferedResponse) send(w io.Writer, head bool) error {
	r.WriteHeader(http.StatusOK)
	bodyAllowed := r.status >= 200 && r.status != http.StatusNoContent && r.status != http.StatusNotModified
	if bodyAllowed {
		if r.header.Get("Content-Type") == "" && r.body.Len() > 0 {
			r.header.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
		}
		r.header.Set("Content-Length", strconv.Itoa(r.body.Len()))
	}
	r.header.Set("Connection", "close")
	r.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	out := bufio.NewWriter(w)
	_, _ = fmt.Fprintf(out, "HTTP/1.1 %03d %s\r\n", r.status, http.StatusText(r.status))
	writeHeader(out, r.header)
	if bodyAllowed && !head {
		_, _ = out.Write(r.body.Bytes())
	}
	return out.Flush()
}
