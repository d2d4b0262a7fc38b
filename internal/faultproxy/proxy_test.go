package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoTarget echoes every byte back and records what it received. It
// greets each connection first when greeting is set.
type echoTarget struct {
	listener net.Listener
	greeting []byte
	wg       sync.WaitGroup
	mu       sync.Mutex
	received bytes.Buffer
}

func startEcho(t *testing.T, greeting string) *echoTarget {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &echoTarget{listener: listener, greeting: []byte(greeting)}
	target.wg.Go(func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			target.wg.Go(func() { target.serve(conn) })
		}
	})
	t.Cleanup(func() { listener.Close(); target.wg.Wait() })
	return target
}

func (e *echoTarget) serve(conn net.Conn) {
	defer conn.Close()
	conn.Write(e.greeting)
	buffer := make([]byte, 4096)
	for {
		n, err := conn.Read(buffer)
		if n > 0 {
			e.mu.Lock()
			e.received.Write(buffer[:n])
			e.mu.Unlock()
			if _, err := conn.Write(buffer[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (e *echoTarget) got() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.received.String()
}

func startProxy(t *testing.T, target *echoTarget) *Proxy {
	t.Helper()
	proxy, err := Listen("127.0.0.1:0", target.listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return proxy
}

func dial(t *testing.T, proxy *Proxy) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func readExactly(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// readsNothing checks that nothing arrives for a while.
func readsNothing(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	got := make([]byte, 64)
	if n, err := conn.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want nothing", got[:n], err)
	}
}

func eventually(t *testing.T, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPassForwardsBothWays(t *testing.T) {
	proxy := startProxy(t, startEcho(t, "hi"))
	conn := dial(t, proxy)
	readExactly(t, conn, "hi")
	conn.Write([]byte("hello"))
	readExactly(t, conn, "hello")
}

func TestBlackholeHoldsBytesUntilPass(t *testing.T) {
	target := startEcho(t, "")
	proxy := startProxy(t, target)
	conn := dial(t, proxy)
	proxy.Blackhole(Both)
	conn.Write([]byte("held"))
	readsNothing(t, conn)
	if got := target.got(); got != "" {
		t.Fatalf("a blackholed link delivered %q", got)
	}
	proxy.Pass()
	readExactly(t, conn, "held")
}

func TestBlackholeOneDirection(t *testing.T) {
	target := startEcho(t, "hi")
	proxy := startProxy(t, target)
	proxy.Blackhole(Forward)
	conn := dial(t, proxy)
	readExactly(t, conn, "hi") // target to client still flows
	conn.Write([]byte("x"))
	readsNothing(t, conn)
	if got := target.got(); got != "" {
		t.Fatalf("forward blackholed, yet the target got %q", got)
	}
	proxy.Pass()
	readExactly(t, conn, "x")

	proxy.Blackhole(Backward)
	conn.Write([]byte("y"))
	eventually(t, "the target gets y", func() bool { return target.got() == "xy" })
	readsNothing(t, conn) // its echo is held
	proxy.Pass()
	readExactly(t, conn, "y")
}

func TestResetSendsRSTAndRefusesNewConnections(t *testing.T) {
	proxy := startProxy(t, startEcho(t, "hi"))
	conn := dial(t, proxy)
	readExactly(t, conn, "hi")
	proxy.Reset()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := conn.Read(make([]byte, 8)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("open connection after Reset: %v, want ECONNRESET", err)
	}
	// A new connection is reset as soon as it is accepted: the connect
	// itself or the first read fails with ECONNRESET.
	fresh, err := net.Dial("tcp", proxy.Addr())
	if err == nil {
		defer fresh.Close()
		fresh.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err = fresh.Read(make([]byte, 8))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("new connection during Reset: %v, want ECONNRESET", err)
	}
	proxy.Pass()
	readExactly(t, dial(t, proxy), "hi")
}

func TestDelayKeepsOrder(t *testing.T) {
	proxy := startProxy(t, startEcho(t, ""))
	conn := dial(t, proxy)
	const delay = 100 * time.Millisecond
	proxy.Delay(delay)
	var sent bytes.Buffer
	began := time.Now()
	for i := range 50 {
		piece := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i)
		sent.Write(piece)
		conn.Write(piece)
		time.Sleep(time.Millisecond) // separate chunks
	}
	readExactly(t, conn, sent.String())
	if took := time.Since(began); took < 2*delay {
		t.Fatalf("round trip took %v through two delays of %v", took, delay)
	}
}

func TestThrottlePacesEachDirection(t *testing.T) {
	proxy := startProxy(t, startEcho(t, ""))
	conn := dial(t, proxy)
	const rate = 100_000
	proxy.Throttle(rate)
	payload := bytes.Repeat([]byte("t"), rate/2)
	began := time.Now()
	go conn.Write(payload)
	readExactly(t, conn, string(payload))
	// Half a second's worth of bytes took at least about half a second.
	if took := time.Since(began); took < 400*time.Millisecond {
		t.Fatalf("%d bytes at %d B/s took %v", len(payload), rate, took)
	}
}

func TestControlsWhileTrafficFlows(t *testing.T) {
	proxy := startProxy(t, startEcho(t, ""))
	conn := dial(t, proxy)
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	stop := make(chan struct{})
	var controls sync.WaitGroup
	controls.Go(func() {
		random := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			switch random.IntN(5) {
			case 0:
				proxy.Blackhole(Direction(random.IntN(4)))
			case 1:
				proxy.Delay(time.Duration(random.IntN(3)) * time.Millisecond)
			case 2:
				proxy.Throttle(random.IntN(2) << 22)
			case 3:
				proxy.Faults()
			default:
				proxy.Pass()
			}
		}
	})
	go func() {
		for offset := 0; offset < len(payload); offset += 4096 {
			if _, err := conn.Write(payload[offset : offset+4096]); err != nil {
				return
			}
		}
	}()
	time.AfterFunc(300*time.Millisecond, func() { close(stop) })
	got := make([]byte, len(payload))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	// Reading in the background while the controls settle into Pass.
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(conn, got); done <- err }()
	controls.Wait()
	proxy.Pass()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("bytes changed order or content on the way")
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	target := startEcho(t, "hi")
	before := runtime.NumGoroutine()
	proxy, err := Listen("127.0.0.1:0", target.listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	open := dial(t, proxy)
	readExactly(t, open, "hi")
	held := dial(t, proxy)
	readExactly(t, held, "hi")
	proxy.Blackhole(Both)
	held.Write([]byte("stuck"))
	proxy.Delay(time.Hour)
	if err := proxy.Close(); err != nil {
		t.Fatal(err)
	}
	open.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := open.Read(make([]byte, 8)); err == nil {
		t.Fatal("a connection outlived Close")
	}
	if conn, err := net.Dial("tcp", proxy.Addr()); err == nil {
		conn.Close()
		t.Fatal("the listener outlived Close")
	}
	eventually(t, "the proxy's goroutines end", func() bool { return runtime.NumGoroutine() <= before })
}
