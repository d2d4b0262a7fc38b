package loop

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// onceCounter hands out done callbacks and fails the test when one runs
// twice; calls counts every first run.
type onceCounter struct {
	t     *testing.T
	calls atomic.Int64
}

func (o *onceCounter) done() func() {
	var ran atomic.Bool
	return func() {
		if ran.Swap(true) {
			o.t.Error("a WriteVectored done callback ran twice")
			return
		}
		o.calls.Add(1)
	}
}

// TestConformanceVectoredOrdering: WriteVectored interleaved with Write
// arrives whole and in order, through partial writes (far more than a
// socket buffer), and every done runs exactly once.
func TestConformanceVectoredOrdering(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		payload := randomPayload(6<<20, 21)
		counter := &onceCounter{t: t}
		var vectored atomic.Int64
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			go func() {
				defer func() { _ = conn.Close() }()
				for i, rest := 0, payload; len(rest) > 0; i++ {
					take := min(len(rest), 1000+i*997%300_000)
					piece := rest[:take]
					rest = rest[take:]
					if i%3 == 0 {
						if err := conn.Write(piece); err != nil {
							return
						}
						continue
					}
					// Header, then parts of uneven sizes, some empty.
					head := piece[:min(len(piece), 9)]
					var parts [][]byte
					for body := piece[len(head):]; len(body) > 0; {
						n := min(len(body), 1+len(parts)*4093%70_000)
						parts = append(parts, body[:n], nil)
						body = body[n:]
					}
					vectored.Add(1)
					if err := conn.WriteVectored(head, parts, counter.done()); err != nil {
						return
					}
				}
			}()
			return funcSession{data: func(in []byte) (int, error) { return len(in), nil }, stopped: func(error) {}}, nil
		}}
		_, addr := startServer(t, backend, Config{OutputLimit: 256 << 10}, handler)
		conn := dial(t, addr)
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(conn)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("got %d bytes, want %d in order", len(got), len(payload))
		}
		if calls, want := counter.calls.Load(), vectored.Load(); calls != want || want == 0 {
			t.Fatalf("%d done callbacks for %d WriteVectored calls", calls, want)
		}
	})
}

// TestConformanceVectoredClosePending: against a peer that does not read,
// WriteVectored is held by the output limit and fails after the write
// timeout; a close while writes are pending fails the rest. Every done
// runs exactly once, failed writes included, so a caller's segment
// references are always given back.
func TestConformanceVectoredClosePending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		counter := &onceCounter{t: t}
		var issued atomic.Int64
		failed := make(chan error, 1)
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			go func() {
				part := make([]byte, 128<<10)
				for {
					issued.Add(1)
					if err := conn.WriteVectored([]byte("head"), [][]byte{part, part}, counter.done()); err != nil {
						_ = conn.Close()
						issued.Add(1)
						closedErr := conn.WriteVectored([]byte("late"), [][]byte{part}, counter.done())
						failed <- errors.Join(err, closedErr)
						return
					}
				}
			}()
			return funcSession{data: func(in []byte) (int, error) { return len(in), nil }, stopped: func(error) {}}, nil
		}}
		cfg := Config{WriteTimeout: 300 * time.Millisecond, OutputLimit: 512 << 10}
		_, addr := startServer(t, backend, cfg, handler)
		_ = dial(t, addr) // never reads
		select {
		case err := <-failed:
			var timeout interface{ Timeout() bool }
			if !errors.As(err, &timeout) || !timeout.Timeout() {
				t.Fatalf("WriteVectored failed with %v, want a timeout", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("WriteVectored never gave up on a peer that does not read")
		}
		deadline := time.Now().Add(5 * time.Second)
		for counter.calls.Load() != issued.Load() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if calls, want := counter.calls.Load(), issued.Load(); calls != want {
			t.Fatalf("%d done callbacks for %d WriteVectored calls", calls, want)
		}
	})
}
