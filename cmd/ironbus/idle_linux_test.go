package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// idleConnections is how many idle, handshaken connections the hostile
// suite holds open against one broker (issue 7: 10,000).
const idleConnections = 10_000

// TestTenThousandIdleConnections holds 10,000 handshaken, silent
// connections open against a real broker, then checks that a producer is
// still served, and that the broker's anonymous memory grew by a bounded
// amount per idle connection (its read buffers are touched only as far as
// a Hello reaches; the epoll and io_uring backends hold none while idle).
func TestTenThousandIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 10,000 connections")
	}
	raiseOpenFileLimit(t, idleConnections+1000)
	p := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--max-connections", "10100")
	before, err := readResident(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	conns := openIdleConnections(t, p.Addr(), idleConnections)
	defer func() {
		for _, conn := range conns {
			_ = conn.Close()
		}
	}()
	after, err := readResident(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	perConnection := (after.anonymous - before.anonymous) / idleConnections
	t.Logf("broker anonymous memory %d MiB → %d MiB with %d idle connections: %d bytes each",
		before.anonymous>>20, after.anonymous>>20, idleConnections, perConnection)
	// A 64 KiB read buffer per connection would be the unbounded design;
	// a goroutine stack (std backend) and a session are a few KiB.
	if perConnection > 48<<10 {
		t.Errorf("each idle connection costs %d bytes of broker memory; want under 48 KiB", perConnection)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer, err := client.Dial(ctx, p.Addr(), client.Options{})
	if err != nil {
		t.Fatalf("a producer could not connect beside %d idle connections: %v\n%s", idleConnections, err, p.Logs())
	}
	defer producer.Close()
	for i := range 100 {
		if _, err := producer.Produce(ctx, "busy", client.Record{Payload: []byte{byte(i)}}); err != nil {
			t.Fatalf("publish %d beside %d idle connections: %v", i, idleConnections, err)
		}
	}
}

// raiseOpenFileLimit lifts this process's descriptor limit (and so the
// broker's, which inherits it) to at least want, or skips the test.
func raiseOpenFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	if limit.Cur >= want {
		return
	}
	original := limit
	limit.Cur = want
	if limit.Max < want {
		limit.Max = want // only root may raise the hard limit
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Skipf("cannot raise the open-file limit to %d (%v); run as root or raise `ulimit -n`", want, err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &original) })
}

// openIdleConnections dials count connections, completes each handshake
// and leaves them silent.
func openIdleConnections(t *testing.T, addr string, count int) []net.Conn {
	t.Helper()
	hello := wire.Append(nil, 1, &wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame, Window: 8, ClientName: "idle"})
	conns := make([]net.Conn, count)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	const workers = 8
	for worker := range workers {
		wg.Go(func() {
			for i := worker; i < count; i += workers {
				conn, err := handshakeIdle(addr, hello)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = conn
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		for _, conn := range conns {
			if conn != nil {
				_ = conn.Close()
			}
		}
		t.Fatalf("opening idle connections: %v", err)
	}
	return conns
}

func handshakeIdle(addr string, hello []byte) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(hello); err != nil {
		_ = conn.Close()
		return nil, err
	}
	reader := bufio.NewReaderSize(conn, 512)
	head := make([]byte, 4)
	if _, err := io.ReadFull(reader, head); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if _, err := io.ReadFull(reader, make([]byte, binary.LittleEndian.Uint32(head))); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}
