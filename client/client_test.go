package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

func dial(t testing.TB, b *fakeBroker, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), b.addr(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testContext bounds a test's calls, so a call that would hang fails
// the test quickly with DeadlineExceeded instead.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond: the fake broker works on its own goroutines.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHandshake(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) {
		b.welcome.Window, b.welcome.MaxRecordBytes, b.welcome.ServerVersion = 100, 5000, "fake-9"
	})
	c := dial(t, b, client.Options{ClientName: "tester", Window: 512})
	info := c.ServerInfo()
	want := client.ServerInfo{Version: 1, ServerVersion: "fake-9", Capabilities: wire.Capabilities,
		MaxFrame: wire.DefaultMaxFrame, Window: 100, MaxRecordBytes: 5000}
	if info != want {
		t.Fatalf("ServerInfo\n got %+v\nwant %+v", info, want)
	}
	if c.Window() != 100 {
		t.Fatalf("connection window %d, want the server's 100 (below the 512 asked)", c.Window())
	}
	b.locked(func() {
		h := b.hellos[0]
		if h.MinVersion != 1 || h.MaxVersion != 1 || h.Capabilities != wire.Capabilities|wire.CapCluster ||
			h.MaxFrame != wire.DefaultMaxFrame || h.Window != 512 || h.ClientName != "tester" {
			t.Fatalf("Hello %+v", h)
		}
	})
}

func TestHandshakeRefused(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.reject = wire.NewError(wire.CodeVersion, "no common version") })
	_, err := client.Dial(context.Background(), b.addr(), client.Options{})
	var werr *wire.Error
	if !errors.Is(err, &wire.Error{Code: wire.CodeVersion}) || !errors.As(err, &werr) || werr.Message != "no common version" {
		t.Fatalf("Dial: %v, want the server's version error", err)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.silent = true })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := client.Dial(ctx, b.addr(), client.Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with a silent server and a context deadline: %v", err)
	}
	_, err := client.Dial(context.Background(), b.addr(), client.Options{DialTimeout: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with a silent server and DialTimeout: %v", err)
	}
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := client.Dial(context.Background(), addr, client.Options{}); err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
}

func TestProduceAwaited(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	sent := client.Record{Key: []byte("k1"), Subject: "orders.eu", Payload: []byte("payload"),
		Headers: []client.Header{{Name: "trace", Value: []byte("abc")}, {Name: "empty"}}}
	for i := range 3 {
		ack, err := c.Produce(context.Background(), "orders", sent)
		if err != nil || ack != (client.Ack{Offset: uint64(i)}) {
			t.Fatalf("Produce %d: %+v %v", i, ack, err)
		}
	}
	bodies := b.bodies("orders")
	view, err := record.Parse(bodies[2])
	if err != nil || len(bodies) != 3 {
		t.Fatalf("stored %d bodies: %v", len(bodies), err)
	}
	if string(view.Key) != "k1" || string(view.Subject) != "orders.eu" || string(view.Payload) != "payload" || view.Codec != record.CodecNone {
		t.Fatalf("stored body %+v", view)
	}
	var names []string
	for name, value := range view.Headers() {
		names = append(names, string(name)+"="+string(value))
	}
	if len(names) != 2 || names[0] != "trace=abc" || names[1] != "empty=" {
		t.Fatalf("stored headers %q", names)
	}
}

func TestProduceServerError(t *testing.T) {
	full := &wire.Error{Code: wire.CodeNoSpace, Retryable: true, RetryAfter: 250 * time.Millisecond, Message: "disk full"}
	b := startFake(t, func(b *fakeBroker) {
		b.produceErr = func(n uint64) *wire.Error {
			if n == 2 {
				return full
			}
			return nil
		}
	})
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	if _, err := c.Produce(ctx, "s", client.Record{Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Produce(ctx, "s", client.Record{Payload: []byte("2")})
	var werr *wire.Error
	if !errors.Is(err, &wire.Error{Code: wire.CodeNoSpace}) || !errors.As(err, &werr) {
		t.Fatalf("Produce: %v, want no_space", err)
	}
	if !werr.Retryable || werr.RetryAfter != 250*time.Millisecond || werr.Message != "disk full" {
		t.Fatalf("error fields %+v", werr)
	}
	if errors.Is(err, client.ErrConnectionLost) || c.Err() != nil {
		t.Fatalf("a request error must not break the connection: %v / %v", err, c.Err())
	}
	if ack, err := c.Produce(ctx, "s", client.Record{Payload: []byte("3")}); err != nil || ack.Offset != 1 {
		t.Fatalf("Produce after an error: %+v %v", ack, err)
	}
}

func TestRecordTooLarge(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.MaxRecordBytes = 1024 })
	c := dial(t, b, client.Options{})
	big := client.Record{Payload: make([]byte, 2000)}
	if _, err := c.Produce(context.Background(), "s", big); !errors.Is(err, client.ErrRecordTooLarge) {
		t.Fatalf("Produce: %v", err)
	}
	p := c.NewProducer("s", client.ProducerOptions{})
	if err := p.Send(context.Background(), big); !errors.Is(err, client.ErrRecordTooLarge) {
		t.Fatalf("Send: %v", err)
	}
	if err := p.TrySend(client.Record{Key: make([]byte, 70000)}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("TrySend with an oversized key: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	b.locked(func() {
		if b.produced != 0 {
			t.Fatalf("the server received %d produces", b.produced)
		}
	})
}

func TestProduceContextCancel(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.Window = 4 })
	c := dial(t, b, client.Options{})
	b.hold()
	for i := range 4 { // abandoned produces keep their place in the window until answered
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if _, err := c.Produce(ctx, "s", client.Record{Payload: []byte{byte(i)}}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Produce %d: %v", i, err)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Produce(ctx, "s", client.Record{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Produce with the window full: %v", err)
	}
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Produce(cancelled, "s", client.Record{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Produce with a cancelled context: %v", err)
	}
	b.release() // the late acks are dropped and free the window
	ack, err := c.Produce(context.Background(), "s", client.Record{Payload: []byte("after")})
	if err != nil || ack.Offset != 4 || c.Err() != nil {
		t.Fatalf("Produce after cancellations: %+v %v (connection: %v)", ack, err, c.Err())
	}
}

func TestConnectionDropFailsEverything(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.logs["idle"] = &fakeLog{} })
	c := dial(t, b, client.Options{})
	b.hold()
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); _, errs[0] = c.Produce(ctx, "s", client.Record{}) }()
	go func() {
		defer wg.Done()
		_, errs[1] = c.Fetch(ctx, "idle", "g", client.FetchOptions{Wait: time.Minute})
	}()
	// An idempotent producer reconnects (TestProducerReconnects...).
	p := c.NewProducer("s", client.ProducerOptions{Idempotence: client.IdempotenceOff})
	for range 3 {
		if err := p.Send(ctx, client.Record{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "four produces at the server", func() (ok bool) { b.locked(func() { ok = b.produced == 4 }); return })
	time.Sleep(20 * time.Millisecond) // let the Fetch reach the server too
	b.dropAll()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, client.ErrConnectionLost) {
			t.Fatalf("pending call %d: %v", i, err)
		}
	}
	for range 3 {
		var r client.Result
		select {
		case r = <-p.Results():
		case <-ctx.Done():
			t.Fatal("no result for a record pending when the connection broke")
		}
		if !errors.Is(r.Err, client.ErrConnectionLost) {
			t.Fatalf("producer result %d: %v", r.Sequence, r.Err)
		}
	}
	assertBroken(t, c, p, client.ErrConnectionLost)
	time.Sleep(20 * time.Millisecond)
	b.locked(func() {
		if b.accepted != 1 {
			t.Fatalf("%d connections: the client must never reconnect on its own", b.accepted)
		}
	})
}

// assertBroken checks that every later call fails with want.
func assertBroken(t *testing.T, c *client.Client, p *client.Producer, want error) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Produce(ctx, "s", client.Record{}); !errors.Is(err, want) {
		t.Fatalf("Produce after failure: %v", err)
	}
	if _, err := c.Ping(ctx); !errors.Is(err, want) {
		t.Fatalf("Ping after failure: %v", err)
	}
	if _, err := c.Fetch(ctx, "s", "g", client.FetchOptions{}); !errors.Is(err, want) {
		t.Fatalf("Fetch after failure: %v", err)
	}
	if err := p.Send(ctx, client.Record{}); !errors.Is(err, want) {
		t.Fatalf("Send after failure: %v", err)
	}
	if err := c.Err(); !errors.Is(err, want) {
		t.Fatalf("Err: %v", err)
	}
}

func TestConnectionLevelError(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	b.hold()
	done := make(chan error)
	go func() { _, err := c.Produce(testContext(t), "s", client.Record{}); done <- err }()
	eventually(t, "the produce at the server", func() (ok bool) { b.locked(func() { ok = b.produced == 1 }); return })
	b.sendAll(0, wire.NewError(wire.CodeShuttingDown, "draining"))
	err := <-done
	if !errors.Is(err, &wire.Error{Code: wire.CodeShuttingDown}) || !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("pending Produce: %v", err)
	}
	assertBroken(t, c, c.NewProducer("s", client.ProducerOptions{}), &wire.Error{Code: wire.CodeShuttingDown})
}

func TestClosingErrorForOneRequest(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) {
		b.logs["idle"] = &fakeLog{}
		b.produceErr = func(uint64) *wire.Error { return wire.NewError(wire.CodeMalformed, "bad body") }
	})
	c := dial(t, b, client.Options{})
	fetched := make(chan error)
	go func() {
		_, err := c.Fetch(testContext(t), "idle", "g", client.FetchOptions{Wait: time.Minute})
		fetched <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_, err := c.Produce(context.Background(), "s", client.Record{})
	var werr *wire.Error
	if !errors.As(err, &werr) || werr.Code != wire.CodeMalformed || !werr.Closes {
		t.Fatalf("Produce answered by a closing error: %v", err)
	}
	if err := <-fetched; !errors.Is(err, client.ErrConnectionLost) || !errors.Is(err, &wire.Error{Code: wire.CodeMalformed}) {
		t.Fatalf("the other pending call: %v", err)
	}
}

func TestClose(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	b.hold()
	done := make(chan error)
	go func() { _, err := c.Produce(testContext(t), "s", client.Record{}); done <- err }()
	eventually(t, "the produce at the server", func() (ok bool) { b.locked(func() { ok = b.produced == 1 }); return })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("pending Produce at Close: %v", err)
	}
	assertBroken(t, c, c.NewProducer("s", client.ProducerOptions{}), client.ErrClosed)
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPing(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	rtt, err := c.Ping(context.Background())
	if err != nil || rtt <= 0 {
		t.Fatalf("Ping: %v %v", rtt, err)
	}
}

func TestServerPingIsAnswered(t *testing.T) {
	b := startFake(t, nil)
	dial(t, b, client.Options{})
	b.sendAll(77, &wire.Ping{Payload: 42})
	eventually(t, "the Pong", func() (ok bool) { b.locked(func() { ok = len(b.pongs) == 1 && b.pongs[0] == 42 }); return })
}

func TestKeepalive(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.welcome.IdleTimeoutMs = 150 })
	c := dial(t, b, client.Options{})
	if c.ServerInfo().IdleTimeout != 150*time.Millisecond {
		t.Fatalf("IdleTimeout %v", c.ServerInfo().IdleTimeout)
	}
	eventually(t, "two keepalive pings", func() (ok bool) { b.locked(func() { ok = b.pings >= 2 }); return })
}

func TestRequestIDsUniqueAndNonZero(t *testing.T) {
	b := startFake(t, func(b *fakeBroker) { b.recordIDs = true })
	c := dial(t, b, client.Options{Idempotence: client.IdempotenceOff}) // only the requests below
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := c.Produce(context.Background(), "s", client.Record{}); err != nil {
					t.Error(err)
				}
				if _, err := c.Ping(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	seen := map[uint32]bool{}
	b.locked(func() {
		for _, id := range b.ids {
			if id == 0 || seen[id] {
				t.Fatalf("request id %d reused or zero", id)
			}
			seen[id] = true
		}
	})
	if len(seen) != 800 {
		t.Fatalf("%d ids", len(seen))
	}
}

func TestInvalidNames(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := context.Background()
	if _, err := c.Produce(ctx, "", client.Record{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("empty stream: %v", err)
	}
	if _, err := c.Fetch(ctx, "s", string(bytes.Repeat([]byte("g"), 70000)), client.FetchOptions{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("long group: %v", err)
	}
}

func TestProtocolViolationFailsConnection(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	b.sendAll(12345, &wire.ProduceAck{Offset: 1}) // answers nothing that was sent
	eventually(t, "the connection to fail", func() bool { return c.Err() != nil })
	if err := c.Err(); !errors.Is(err, client.ErrProtocol) || !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Err: %v", err)
	}
}
