package health

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startHTTP serves handler on a loopback port and returns its address and
// what Serve returned, once it returns.
func startHTTP(t *testing.T, handler http.Handler) (*httpServer, string, <-chan error) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := newHTTPServer(handler, 2*time.Second, 2*time.Second, slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	t.Cleanup(func() { _ = server.Close(context.Background()) })
	return server, listener.Addr().String(), served
}

// exchange sends raw on a new connection and returns everything the
// server writes before it closes the connection.
func exchange(t *testing.T, addr, raw string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	return string(answer)
}

func TestHTTPServerAnswersWithLengthAndCloses(t *testing.T) {
	_, addr, _ := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Path", r.URL.Path+"\r\nInjected: yes")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "hello ")
		_, _ = io.WriteString(w, r.Method)
	}))
	answer := exchange(t, addr, "GET /some/where HTTP/1.1\r\nHost: x\r\n\r\n")
	response, err := http.ReadResponse(bufio.NewReader(strings.NewReader(answer)), nil)
	if err != nil {
		t.Fatalf("%v in %q", err, answer)
	}
	body, _ := io.ReadAll(response.Body)
	if response.StatusCode != http.StatusTeapot || string(body) != "hello GET" || response.ContentLength != 9 ||
		!response.Close || response.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("answer %q", answer)
	}
	if got := response.Header.Get("X-Path"); got != "/some/where  Injected: yes" || response.Header.Get("Injected") != "" {
		t.Fatalf("a line break in a header value was not neutralised: %q", answer)
	}
	head := exchange(t, addr, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.Contains(head, "Content-Length: 10\r\n") || !strings.HasSuffix(head, "\r\n\r\n") {
		t.Fatalf("HEAD answer %q, want the length of the GET body and no body", head)
	}
}

func TestHTTPServerRefusesGarbageAndSurvivesAPanic(t *testing.T) {
	_, addr, _ := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("handler bug")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	if answer := exchange(t, addr, "NOT HTTP AT ALL\r\n\r\n"); !strings.HasPrefix(answer, "HTTP/1.1 400 ") {
		t.Fatalf("garbage got %q, want 400", answer)
	}
	// An oversized request is cut off at maxRequestBytes: it gets a 400 or,
	// as the rest of it is never read, a reset; never an answer.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, "GET /"+strings.Repeat("a", 2*maxRequestBytes)+" HTTP/1.1\r\n\r\n")
	if answer, _ := io.ReadAll(conn); len(answer) > 0 && !strings.HasPrefix(string(answer), "HTTP/1.1 400 ") {
		t.Fatalf("an oversized request got %.80q, want 400", answer)
	}
	conn.Close()
	if answer := exchange(t, addr, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n"); answer != "" {
		t.Fatalf("a panicking handler's connection got %q, want it closed", answer)
	}
	if answer := exchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasSuffix(answer, "\r\n\r\nok") {
		t.Fatalf("after a panic: %q", answer)
	}
}

// TestHTTPServerCloseWaitsThenGivesUp: Close lets a request in progress
// finish; when its context ends first, it cancels the request and closes
// the connection. Serve returns http.ErrServerClosed either way.
func TestHTTPServerCloseWaitsThenGivesUp(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	server, addr, served := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
			_, _ = io.WriteString(w, "finished")
		case <-r.Context().Done():
		}
	}))
	answered := make(chan string, 1)
	go func() { answered <- exchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := server.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a request stuck: %v, want the context's error", err)
	}
	if answer := <-answered; strings.Contains(answer, "finished") {
		t.Fatalf("the stuck request was answered %q after Close gave up", answer)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	close(release)

	entered, release = make(chan struct{}, 1), make(chan struct{})
	server, addr, served = startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "finished")
	}))
	go func() { answered <- exchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- server.Close(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if answer := <-answered; !strings.HasSuffix(answer, "finished") {
		t.Fatalf("the request in progress got %q, want it finished", answer)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
}

// TestEndpointsRefuseOtherMethods: the mux's method patterns still apply.
func TestEndpointsRefuseOtherMethods(t *testing.T) {
	server, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = server.Close(context.Background()) }()
	if answer := exchange(t, server.Addr(), "POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"); !strings.HasPrefix(answer, "HTTP/1.1 405 ") {
		t.Fatalf("POST /healthz got %q, want 405", answer)
	}
	if answer := exchange(t, server.Addr(), "GET /nothing HTTP/1.1\r\nHost: localhost\r\n\r\n"); !strings.HasPrefix(answer, "HTTP/1.1 404 ") {
		t.Fatalf("GET /nothing got %q, want 404", answer)
	}
}
