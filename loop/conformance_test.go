package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/arena"
)

// The conformance suite runs every backend this system supports through
// the same contract; the std backend is the reference.

// backendsUnderTest lists the backends to check: std always, the reactors
// where they run (a backend that cannot run here is reported, not failed;
// TestAutoFallsBack covers the choice).
func backendsUnderTest(t testing.TB) []string {
	names := []string{BackendStd}
	for _, name := range []string{BackendEpoll, BackendURing} {
		server, _, err := New(name, Config{Loops: 1}, echoHandler{})
		if err != nil {
			t.Logf("%s not checked here: %v", name, err)
			continue
		}
		closeUnused(server)
		names = append(names, name)
	}
	return names
}

// closeUnused releases a server that never listened.
func closeUnused(server Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = server.Shutdown(ctx)
}

// forEachBackend runs test as a subtest per backend.
func forEachBackend(t *testing.T, test func(t *testing.T, backend string)) {
	for _, name := range backendsUnderTest(t) {
		t.Run(name, func(t *testing.T) { test(t, name) })
	}
}

// startServer serves handler on loopback and drains it at cleanup.
func startServer(t testing.TB, backend string, cfg Config, handler Handler) (Server, string) {
	t.Helper()
	// Every test queues output in chunks from a slab, and checks at the
	// end that each one came back: a chunk kept after its bytes were sent
	// (or after the connection closed) is a leak the budget would not see.
	if cfg.OutputBuffers == nil {
		chunks, err := arena.NewLazySlab(arena.NewBudget(), "output chunks", "--test", OutputChunkSize, 4096)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OutputBuffers = chunks
		t.Cleanup(func() {
			if held := chunks.InUse(); held != 0 {
				t.Errorf("%d output chunks still held after the server stopped", held)
			}
			if err := chunks.Close(); err != nil && chunks.InUse() == 0 {
				t.Errorf("closing the output chunks: %v", err)
			}
		})
	}
	server, choice, err := New(backend, cfg, handler)
	if err != nil {
		t.Fatal(err)
	}
	if choice.Backend != backend || server.Backend() != backend {
		t.Fatalf("asked for %s, got %s (%s)", backend, server.Backend(), choice.Reason)
	}
	bound, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- server.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			server.CloseAll()
			t.Errorf("shutdown: %v", err)
		}
		select {
		case err := <-served:
			if !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Shutdown")
		}
	})
	return server, bound.String()
}

// echoHandler sends back every byte, through a bounded queue: a full
// queue pauses reading until the writer catches up, so the suite exercises
// pause and resume under load. chunk > 0 makes Data take whole chunks
// only, the way a session leaves a partial frame for the next read.
type echoHandler struct {
	chunk   int
	stopped chan error // receives each ReadStopped cause when non-nil
}

type echoSession struct {
	conn    Conn
	chunk   int
	queue   chan []byte
	mu      sync.Mutex
	paused  bool
	stopped chan error
}

func (h echoHandler) Open(conn Conn) (Session, error) {
	s := &echoSession{conn: conn, chunk: h.chunk, queue: make(chan []byte, 4), stopped: h.stopped}
	go s.write()
	return s, nil
}

func (s *echoSession) Data(in []byte) (int, error) {
	if s.chunk > 0 {
		in = in[:len(in)/s.chunk*s.chunk]
		if len(in) == 0 {
			return 0, nil
		}
	}
	piece := bytes.Clone(in)
	// Retrying under the lock closes the race with a writer that empties
	// the queue and looks for a pause in between.
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.queue <- piece:
		return len(in), nil
	default:
		s.paused = true
		s.conn.PauseReading()
		return 0, nil
	}
}

func (s *echoSession) ReadStopped(cause error) {
	if s.stopped != nil {
		s.stopped <- cause
	}
	close(s.queue)
}

func (s *echoSession) write() {
	defer s.conn.Close()
	for b := range s.queue {
		if err := s.conn.Write(b); err != nil {
			return
		}
		s.mu.Lock()
		resume := s.paused
		s.paused = false
		s.mu.Unlock()
		if resume {
			s.conn.ResumeReading()
		}
	}
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// exchange sends payload in random pieces while reading the echo, and
// checks every byte came back in order.
func exchange(t *testing.T, conn net.Conn, payload []byte, seed uint64) {
	t.Helper()
	echoed := make(chan []byte, 1)
	go func() {
		got := make([]byte, len(payload))
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, _ := io.ReadFull(conn, got)
		echoed <- got[:n]
	}()
	random := rand.New(rand.NewPCG(seed, 1))
	for rest := payload; len(rest) > 0; {
		n := min(len(rest), 1+random.IntN(256<<10))
		if _, err := conn.Write(rest[:n]); err != nil {
			t.Errorf("write: %v", err)
			return
		}
		rest = rest[n:]
	}
	if got := <-echoed; !bytes.Equal(got, payload) {
		t.Errorf("echo differs: got %d bytes, want %d", len(got), len(payload))
	}
}

func randomPayload(size int, seed uint64) []byte {
	random := rand.New(rand.NewPCG(seed, 2))
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(random.Uint32())
	}
	return payload
}

func TestConformanceEcho(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		for _, chunk := range []int{0, 1000} {
			_, addr := startServer(t, backend, Config{Loops: 2, ReadBufferSize: 4096}, echoHandler{chunk: chunk})
			var wait sync.WaitGroup
			for i := range 8 {
				wait.Add(1)
				go func() {
					defer wait.Done()
					exchange(t, dial(t, addr), randomPayload(2_000_000, uint64(i)), uint64(i))
				}()
			}
			wait.Wait()
		}
	})
}

// TestConformanceManyConnections holds a thousand idle connections open
// while a few busy ones exchange data, then has every one of them echo.
func TestConformanceManyConnections(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		_, addr := startServer(t, backend, Config{Loops: 2}, echoHandler{})
		conns := make([]net.Conn, 1000)
		for i := range conns {
			conns[i] = dial(t, addr)
		}
		var wait sync.WaitGroup
		for i := range 4 {
			wait.Add(1)
			go func() {
				defer wait.Done()
				exchange(t, dial(t, addr), randomPayload(1<<20, uint64(i)), uint64(i))
			}()
		}
		wait.Wait()
		for i, conn := range conns {
			wait.Add(1)
			go func() {
				defer wait.Done()
				exchange(t, conn, []byte{byte(i), byte(i >> 8), 7}, uint64(i))
			}()
		}
		wait.Wait()
	})
}

// TestConformancePeerClose: a peer that hangs up is reported as io.EOF.
func TestConformancePeerClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		stopped := make(chan error, 1)
		_, addr := startServer(t, backend, Config{}, echoHandler{stopped: stopped})
		conn := dial(t, addr)
		exchange(t, conn, []byte("hello"), 1)
		_ = conn.Close()
		select {
		case cause := <-stopped:
			if !errors.Is(cause, io.EOF) {
				t.Fatalf("ReadStopped(%v), want io.EOF", cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("ReadStopped was not called after the peer closed")
		}
	})
}

// TestConformanceShutdownDrains: Shutdown stops reading with a nil cause
// and returns once every session closed its connection.
func TestConformanceShutdownDrains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		stopped := make(chan error, 16)
		server, err := newServer(backend, Config{}, echoHandler{stopped: stopped})
		if err != nil {
			t.Fatal(err)
		}
		bound, err := server.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- server.Serve() }()
		conns := []net.Conn{dial(t, bound.String()), dial(t, bound.String())}
		for _, conn := range conns {
			exchange(t, conn, []byte("before the drain"), 1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		for range conns {
			if cause := <-stopped; cause != nil {
				t.Errorf("ReadStopped(%v) while draining, want nil", cause)
			}
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve returned %v", err)
		}
		for _, conn := range conns {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Errorf("after the drain the connection read %v, want EOF", err)
			}
		}
		if _, err := net.DialTimeout("tcp", bound.String(), time.Second); err == nil {
			t.Error("the server still accepts after Shutdown")
		}
	})
}

func newServer(backend string, cfg Config, handler Handler) (Server, error) {
	server, _, err := New(backend, cfg, handler)
	return server, err
}

// funcHandler builds sessions from functions, for the tests that need one
// particular behaviour.
type funcHandler struct {
	open func(conn Conn) (Session, error)
}

func (h funcHandler) Open(conn Conn) (Session, error) { return h.open(conn) }

type funcSession struct {
	data    func(in []byte) (int, error)
	stopped func(cause error)
}

func (s funcSession) Data(in []byte) (int, error) { return s.data(in) }
func (s funcSession) ReadStopped(cause error)     { s.stopped(cause) }

// TestConformanceReadTimeout: a silent connection stops reading with an
// error that says Timeout().
func TestConformanceReadTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		stopped := make(chan error, 1)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			conn.SetReadTimeout(150 * time.Millisecond)
			return funcSession{
				data:    func(in []byte) (int, error) { return len(in), nil },
				stopped: func(cause error) { stopped <- cause; _ = conn.Close() },
			}, nil
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		conn := dial(t, addr)
		began := time.Now()
		_, _ = conn.Write([]byte("x"))
		select {
		case cause := <-stopped:
			var timeout interface{ Timeout() bool }
			if !errors.As(cause, &timeout) || !timeout.Timeout() {
				t.Fatalf("ReadStopped(%v), want a timeout", cause)
			}
			if waited := time.Since(began); waited < 100*time.Millisecond {
				t.Fatalf("timed out after %v, before the 150ms timeout", waited)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the read timeout never fired")
		}
	})
}

// TestConformanceSlowReader: Write blocks against a peer that does not
// read, and fails with a timeout instead of buffering without bound.
func TestConformanceSlowReader(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		written := make(chan error, 1)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			go func() {
				chunk := make([]byte, 256<<10)
				for {
					if err := conn.Write(chunk); err != nil {
						written <- err
						_ = conn.Close()
						return
					}
				}
			}()
			return funcSession{
				data:    func(in []byte) (int, error) { return len(in), nil },
				stopped: func(error) {},
			}, nil
		}}
		cfg := Config{WriteTimeout: 300 * time.Millisecond, OutputLimit: 1 << 20}
		_, addr := startServer(t, backend, cfg, handler)
		_ = dial(t, addr) // never reads
		select {
		case err := <-written:
			var timeout interface{ Timeout() bool }
			if !errors.As(err, &timeout) || !timeout.Timeout() {
				t.Fatalf("Write failed with %v, want a timeout", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Write never gave up on a peer that does not read")
		}
	})
}

// TestConformanceCloseFlushes: output queued before Close reaches the
// peer, then the connection ends.
func TestConformanceCloseFlushes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		payload := randomPayload(3<<20, 9)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			go func() {
				for rest := payload; len(rest) > 0; rest = rest[min(len(rest), 100_000):] {
					if err := conn.Write(rest[:min(len(rest), 100_000)]); err != nil {
						return
					}
				}
				_ = conn.Close()
			}()
			return funcSession{
				data:    func(in []byte) (int, error) { return len(in), nil },
				stopped: func(error) {},
			}, nil
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		conn := dial(t, addr)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(conn)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("got %d bytes, want the %d written before Close", len(got), len(payload))
		}
	})
}

// TestConformanceOpenRefused: a handler that refuses a connection can
// still send it an explanation.
func TestConformanceOpenRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			_ = conn.Write([]byte("busy, try later"))
			return nil, errors.New("refused")
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		conn := dial(t, addr)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(conn)
		if err != nil || string(got) != "busy, try later" {
			t.Fatalf("read %q, %v; want the explanation then EOF", got, err)
		}
	})
}

// TestConformanceLargeFrame: the buffer grows for a frame larger than the
// initial read buffer, and a frame past MaxBuffer ends reading with
// ErrBufferFull.
func TestConformanceLargeFrame(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const limit = 1 << 20
		sizes := make(chan int, 4)
		stopped := make(chan error, 4)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			return funcSession{
				// A "frame" is everything up to a zero byte.
				data: func(in []byte) (int, error) {
					if end := bytes.IndexByte(in, 0); end >= 0 {
						sizes <- end
						return end + 1, nil
					}
					return 0, nil
				},
				stopped: func(cause error) { stopped <- cause; _ = conn.Close() },
			}, nil
		}}
		_, addr := startServer(t, backend, Config{ReadBufferSize: 4096, MaxBuffer: limit}, handler)
		conn := dial(t, addr)
		frame := bytes.Repeat([]byte{1}, limit-1)
		if _, err := conn.Write(append(frame, 0)); err != nil {
			t.Fatal(err)
		}
		if size := <-sizes; size != limit-1 {
			t.Fatalf("frame of %d bytes arrived as %d", limit-1, size)
		}
		_, _ = conn.Write(bytes.Repeat([]byte{1}, limit+1))
		select {
		case cause := <-stopped:
			if !errors.Is(cause, ErrBufferFull) {
				t.Fatalf("ReadStopped(%v), want ErrBufferFull", cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an oversized frame did not stop reading")
		}
	})
}

// TestConformanceCloseAll: CloseAll ends every connection at once, even
// ones whose sessions never close.
func TestConformanceCloseAll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		arrived := make(chan struct{}, 1)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			return funcSession{
				data: func(in []byte) (int, error) {
					select {
					case arrived <- struct{}{}:
					default:
					}
					return len(in), nil
				},
				stopped: func(error) {}, // never closes: only CloseAll ends it
			}, nil
		}}
		server, err := newServer(backend, Config{}, handler)
		if err != nil {
			t.Fatal(err)
		}
		bound, err := server.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = server.Serve() }()
		conn := dial(t, bound.String())
		_, _ = conn.Write([]byte("hello"))
		// Until the server accepted it, the connection waits in the
		// listener's backlog, which Shutdown drops instead of draining.
		<-arrived
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := server.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown with a session that never closes returned %v", err)
		}
		server.CloseAll()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("after CloseAll the connection read %v, want it closed", err)
		}
	})
}

// fixedFrames is a session whose frames are all size bytes long, and
// which says so (FrameSizer).
type fixedFrames struct {
	size    int
	arrived chan<- []byte
	conn    Conn
}

func (f fixedFrames) Data(in []byte) (int, error) {
	consumed := 0
	for len(in)-consumed >= f.size {
		f.arrived <- bytes.Clone(in[consumed : consumed+f.size])
		consumed += f.size
	}
	return consumed, nil
}

func (f fixedFrames) ReadStopped(error)         { _ = f.conn.Close() }
func (f fixedFrames) FrameSize(head []byte) int { return f.size }

// TestConformanceLargeFramePool: connections whose frames outgrow the read
// buffer take turns through the shared pool instead of each holding the
// largest frame, and every frame still arrives whole.
func TestConformanceLargeFramePool(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const frame = 1 << 20
		budget := arena.NewBudget()
		pool, err := arena.NewSharedPool(budget, "large frames", "--large-frame-pool", 2*frame)
		if err != nil {
			t.Fatal(err)
		}
		slab, err := arena.NewSlab(budget, "read buffers", "--max-connections", 4096, 16, true)
		if err != nil {
			t.Fatal(err)
		}
		arrived := make(chan []byte, 64)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			return fixedFrames{size: frame, arrived: arrived, conn: conn}, nil
		}}
		cfg := Config{ReadBufferSize: 4096, MaxBuffer: frame, Buffers: slab, LargeFrames: pool}
		_, addr := startServer(t, backend, cfg, handler)
		const conns, frames = 6, 3
		for i := range conns {
			conn := dial(t, addr)
			go func() {
				for range frames {
					_, _ = conn.Write(bytes.Repeat([]byte{byte(i)}, frame))
				}
			}()
		}
		for range conns * frames {
			select {
			case got := <-arrived:
				if len(bytes.Trim(got, string(got[:1]))) != 0 {
					t.Fatal("a frame arrived mixed with another connection's bytes")
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("frames stalled: pool in use %d of %d, %d waiting", pool.InUse(), pool.Capacity(), pool.Waiting())
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for (pool.InUse() != 0 || slab.InUse() > conns) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if pool.InUse() != 0 || slab.InUse() > conns {
			t.Fatalf("memory still held after every frame was consumed: pool %d bytes, slab %d buffers", pool.InUse(), slab.InUse())
		}
	})
}

// TestConformancePausedPeerClose: bytes a paused session left unconsumed
// are offered again on resume even though the peer hung up meanwhile, and
// only then does reading end with io.EOF.
func TestConformancePausedPeerClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		offered := make(chan string, 4)
		stopped := make(chan error, 1)
		conns := make(chan Conn, 1)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			conns <- conn
			first := true
			return funcSession{
				data: func(in []byte) (int, error) {
					offered <- string(in)
					if first {
						first = false
						conn.PauseReading()
						return 0, nil
					}
					return len(in), nil
				},
				stopped: func(cause error) { stopped <- cause; _ = conn.Close() },
			}, nil
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		client := dial(t, addr)
		if _, err := client.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if got := <-offered; got != "hello" {
			t.Fatalf("first offer %q", got)
		}
		_ = client.Close()
		select {
		case cause := <-stopped:
			t.Fatalf("ReadStopped(%v) while paused with bytes pending", cause)
		case <-time.After(300 * time.Millisecond):
		}
		(<-conns).ResumeReading()
		select {
		case got := <-offered:
			if got != "hello" {
				t.Fatalf("offered %q on resume, want the pending bytes", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the pending bytes were not offered again on resume")
		}
		select {
		case cause := <-stopped:
			if !errors.Is(cause, io.EOF) {
				t.Fatalf("ReadStopped(%v), want io.EOF", cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("ReadStopped was not called after the pending bytes")
		}
	})
}

// TestConformanceBusyGauge: a reactor backend counts the time its
// reactors spent on a connection's traffic; std has no reactors.
func TestConformanceBusyGauge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		server, addr := startServer(t, backend, Config{Loops: 2}, echoHandler{})
		exchange(t, dial(t, addr), randomPayload(1_000_000, 7), 7)
		busy := server.Busy()
		if backend == BackendStd {
			if busy != nil {
				t.Fatalf("std reports reactors: %v", busy)
			}
			return
		}
		var total time.Duration
		for _, d := range busy {
			total += d
		}
		if len(busy) != 2 || total <= 0 {
			t.Fatalf("Busy() = %v after echoing 1 MB over 2 reactors", busy)
		}
	})
}

// TestConformanceShutdownRacesServe: a Shutdown issued while Serve is
// still starting (a broker stopped at once) must neither race nor hang,
// and Serve must still return ErrServerClosed.
func TestConformanceShutdownRacesServe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		for range 20 {
			server, _, err := New(backend, Config{Loops: 2}, echoHandler{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := server.Listen("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- server.Serve() }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := server.Shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			cancel()
			select {
			case err := <-served:
				if !errors.Is(err, ErrServerClosed) {
					t.Fatalf("Serve returned %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve did not return after Shutdown")
			}
		}
	})
}

// TestConformanceResumeInsideData: a session that pauses and resumes
// within one Data call (its credits were free already) and leaves whole
// messages unconsumed gets them again without any new byte from the peer.
// The std backend once blocked on the network instead, and the last
// requests of a burst were never answered.
func TestConformanceResumeInsideData(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		got := make(chan []byte, 256)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			return funcSession{
				data: func(in []byte) (int, error) {
					if len(in) == 0 {
						return 0, nil
					}
					got <- bytes.Clone(in[:1]) // one message per call
					conn.PauseReading()
					conn.ResumeReading()
					return 1, nil
				},
				stopped: func(error) { _ = conn.Close() },
			}, nil
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		client := dial(t, addr)
		if _, err := client.Write([]byte("abcdefghij")); err != nil {
			t.Fatal(err)
		}
		var all []byte
		for len(all) < 10 {
			select {
			case b := <-got:
				all = append(all, b...)
			case <-time.After(5 * time.Second):
				t.Fatalf("got %q of %q: the bytes held back at a resume inside Data never came again", all, "abcdefghij")
			}
		}
		if string(all) != "abcdefghij" {
			t.Fatalf("got %q", all)
		}
	})
}

// TestConformanceInlineAnswer: every backend offers InlineConn: a lone
// message's Data may block briefly and answer it from inside Data with
// TryWrite; the answer arrives, and so does every later one, each in its
// own pass.
func TestConformanceInlineAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		mayBlock := make(chan bool, 64)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			inline, ok := conn.(InlineConn)
			if !ok {
				return nil, errors.New("the connection does not implement InlineConn")
			}
			return funcSession{
				data: func(in []byte) (int, error) {
					blocks := inline.MayBlock()
					mayBlock <- blocks
					if blocks {
						time.Sleep(time.Millisecond) // an inline fdatasync
					}
					if !inline.TryWrite(in) {
						return 0, errors.New("TryWrite refused a small answer on an idle connection")
					}
					return len(in), nil
				},
				stopped: func(error) { _ = conn.Close() },
			}, nil
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		conn := dial(t, addr)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		// MayBlock is conservative by design: a task or a completion that
		// lands in the same pass (a timer, the previous answer's flush
		// under the race detector's slowness, a busy CI machine) rightly
		// makes it false, and the run then takes the staged path. io_uring
		// met that in about 1 run in 10 under -race, and once in a full
		// CI run 14 of 20 were inline. Most lone messages must still be
		// inline in at least one of three rounds: a backend that stopped
		// answering inline fails all three.
		var rounds []int
		for round := range 3 {
			blocked := 0
			for i := range 20 {
				message := []byte(fmt.Sprintf("round %d message %02d", round, i))
				if _, err := conn.Write(message); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(message))
				if _, err := io.ReadFull(conn, got); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if !bytes.Equal(got, message) {
					t.Fatalf("message %d answered %q", i, got)
				}
				if <-mayBlock {
					blocked++
				}
			}
			if blocked >= 15 {
				return
			}
			rounds = append(rounds, blocked)
		}
		t.Fatalf("%s: MayBlock was true for %v of 20 lone messages in three rounds, want at least 15 in one", backend, rounds)
	})
}
