package testbroker

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/server"
)

// stopTimeout bounds the drain of a test broker.
const stopTimeout = 10 * time.Second

// Config is the configuration of a test broker: server.DefaultConfig on a
// new temporary data directory, a free loopback port, the health
// endpoints off and the network backend IRONBUS_TEST_LOOP names (auto when
// unset). Change what the test needs before Start.
func Config(t testing.TB) server.Config {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Addr, cfg.HealthAddr = t.TempDir(), "127.0.0.1:0", server.HealthOff
	if backend := os.Getenv("IRONBUS_TEST_LOOP"); backend != "" {
		cfg.Loop = backend
	}
	return cfg
}

// Broker is a broker running in the test's process.
type Broker struct {
	t      testing.TB
	cfg    server.Config
	server *server.Server
	log    *Log
	once   sync.Once
}

// Start runs server.New and Start on cfg and stops the broker when the
// test ends. Unless cfg names a LogOutput, the broker logs into a Log the
// test can read (Broker.Log), printed when the test fails.
func Start(t testing.TB, cfg server.Config) *Broker {
	t.Helper()
	b := &Broker{t: t, cfg: cfg}
	if cfg.LogOutput == nil {
		b.log = &Log{}
		b.cfg.LogOutput = b.log
	}
	srv, err := server.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		_ = srv.Stop(context.Background())
		t.Fatal(err)
	}
	b.server = srv
	t.Cleanup(func() {
		b.Stop()
		if t.Failed() && b.log != nil {
			t.Logf("broker log:\n%s", b.log)
		}
	})
	return b
}

// Addr is where clients connect.
func (b *Broker) Addr() string { return b.server.Addr() }

// Server is the running server, for Reload, Addresses and the like.
func (b *Broker) Server() *server.Server { return b.server }

// Config is the configuration the broker started with.
func (b *Broker) Config() server.Config { return b.cfg }

// Log is the broker's log (nil when the configuration named its own
// LogOutput).
func (b *Broker) Log() *Log { return b.log }

// Stop drains and stops the broker, failing the test if the drain fails;
// calls after the first do nothing.
func (b *Broker) Stop() {
	b.t.Helper()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := b.server.Stop(ctx); err != nil {
			b.t.Errorf("stopping the test broker: %v", err)
		}
	})
}

// Restart stops the broker and starts another on the same configuration
// (the same data directory, a new port when the port was 0), as a
// graceful restart of the process would.
func (b *Broker) Restart() *Broker {
	b.t.Helper()
	b.Stop()
	cfg := b.cfg
	if b.log != nil {
		cfg.LogOutput = nil
	}
	return Start(b.t, cfg)
}

// Log is a buffer the broker's goroutines write while the test reads it.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Reset forgets everything written so far.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}
