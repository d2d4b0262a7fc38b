package session

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
)

// BenchmarkPublishUnderSilentFlood measures an authenticated TLS client's
// awaited publish latency idle, then while 100 silent connections from
// its own address are held open and 50 more arrive each second, and
// reports both p99s and their ratio (docs/SECURITY.md, "Silent
// connections": the target is a ratio of at most 2). Each phase makes
// b.N publishes; run it with -benchtime 2000x or more for a stable p99.
func BenchmarkPublishUnderSilentFlood(b *testing.B) {
	b.ResetTimer()
	idle, loaded := publishUnderSilentFlood(b, b.N)
	b.StopTimer()
	idleP99, loadedP99 := percentile(idle, 0.99), percentile(loaded, 0.99)
	b.ReportMetric(float64(idleP99.Microseconds()), "idle-p99-µs")
	b.ReportMetric(float64(loadedP99.Microseconds()), "flood-p99-µs")
	b.ReportMetric(float64(loadedP99)/float64(max(idleP99, 1)), "p99-ratio")
}

// TestPublishUnderSilentFlood runs the benchmark's scenario briefly and
// checks only that every publish succeeds: timing belongs to the
// benchmark.
func TestPublishUnderSilentFlood(t *testing.T) {
	idle, loaded := publishUnderSilentFlood(t, 20)
	if len(idle) != 20 || len(loaded) != 20 || percentile(loaded, 1) == 0 {
		t.Fatalf("publishes measured: %d idle, %d under the flood", len(idle), len(loaded))
	}
}

// publishUnderSilentFlood makes n awaited publishes from an authenticated
// TLS client idle, then n more while 100 silent connections from its own
// address are held open and 50 more arrive each second, and returns the
// latencies of each phase.
func publishUnderSilentFlood(tb testing.TB, n int) (idle, loaded []time.Duration) {
	s := startSecured(tb, matrixIdentities, security.GateOptions{})
	c, err := s.tlsDialer(tb)(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	publish := func() []time.Duration {
		latencies := make([]time.Duration, 0, n)
		for range n {
			started := time.Now()
			if _, err := c.Produce(ctx, "orders.bench", client.Record{Payload: []byte("x")}); err != nil {
				tb.Fatal(err)
			}
			latencies = append(latencies, time.Since(started))
		}
		return latencies
	}
	idle = publish()
	holdSilent(tb, s.addr, 100)
	stop := make(chan struct{})
	var flood sync.WaitGroup
	flood.Add(1)
	go func() {
		defer flood.Done()
		floodConnections(s.addr, 50, stop)
	}()
	loaded = publish()
	close(stop)
	flood.Wait()
	return idle, loaded
}

// floodConnections opens perSecond connections a second that send
// nothing, each closed once the broker closes it or after 15 s, until
// stop closes.
func floodConnections(addr string, perSecond int, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var open sync.WaitGroup
	defer open.Wait()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		open.Add(1)
		go func() {
			defer open.Done()
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			done := make(chan struct{})
			go func() {
				select {
				case <-stop:
					_ = conn.Close()
				case <-done:
				}
			}()
			_, _ = conn.Read(make([]byte, 1))
			close(done)
		}()
	}
}

func percentile(latencies []time.Duration, q float64) time.Duration {
	if len(latencies) == 0 {
		return 0
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
