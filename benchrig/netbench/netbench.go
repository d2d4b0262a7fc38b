// Package netbench measures the broker over loopback through the Go SDK:
// pipelined produce throughput, and ack latency with one record in flight.
package netbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/server"
)

// maxConnections is room for the idle-connection shape and its busy
// producers.
const maxConnections = 2048

// InProcess runs a broker on a loopback port in this process, on a fresh
// data directory under dir, served by the named network backend (see
// loop.New; "" is auto); stop drains it and removes the directory. It
// returns the backend that serves, which auto may have chosen.
//
// The broker is started through package server, exactly as `ironbus
// serve` starts it (the same boot checks, budgeted pools and wiring), with
// the defaults but for room for the rigs' connections and for the
// storage's durability, I/O mode and sizes.
func InProcess(dir string, storage segment.Options, backend string) (addr, served string, stop func(), err error) {
	dataDir, err := os.MkdirTemp(dir, "netbench-")
	if err != nil {
		return "", "", nil, err
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Addr, cfg.HealthAddr, cfg.Owner = dataDir, "127.0.0.1:0", server.HealthOff, "netbench"
	cfg.MaxConnections = maxConnections
	cfg.Durability, cfg.IOMode = storage.Durability.String(), storage.IOMode.String()
	cfg.AcceptRelaxedDurability = storage.AcceptRelaxedDurability
	if storage.SegmentSize > 0 {
		cfg.SegmentBytes = storage.SegmentSize
	}
	if storage.StagingBytes > 0 {
		cfg.StagingBytes = int64(storage.StagingBytes)
	}
	if backend != "" {
		cfg.Loop = backend
	}
	srv, err := server.New(cfg)
	if err == nil {
		err = srv.Start(context.Background())
		if err != nil {
			_ = srv.Stop(context.Background())
		}
	}
	if err != nil {
		_ = os.RemoveAll(dataDir)
		return "", "", nil, err
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
		_ = os.RemoveAll(dataDir)
	}
	return srv.Addr(), srv.Backend(), stop, nil
}

// HoldIdle opens count connections that complete the handshake and then
// send nothing, as a fleet of quiet devices would; release closes them.
func HoldIdle(addr string, count int) (release func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*client.Client, 0, count)
	release = func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	for range count {
		c, err := client.Dial(ctx, addr, client.Options{ClientName: "netbench-idle"})
		if err != nil {
			release()
			return nil, fmt.Errorf("netbench: idle connection %d of %d: %w", len(clients)+1, count, err)
		}
		clients = append(clients, c)
	}
	return release, nil
}

// Throughput is the result of a pipelined produce run.
type Throughput struct {
	Backend     string  `json:"backend,omitempty"`
	Idle        int     `json:"idle_connections,omitempty"`
	Connections int     `json:"connections"`
	Window      int     `json:"window"`
	RecordBytes int     `json:"record_bytes"`
	Records     uint64  `json:"records"`
	PerSecond   float64 `json:"records_per_sec"`
	MBPerSecond float64 `json:"mb_per_sec"`
	// PeakAnonymous is the broker's largest resident anonymous memory
	// seen during the run (sampled every 50 ms), when its pid was given.
	PeakAnonymous int64 `json:"peak_rss_anon_bytes,omitempty"`
}

// Produce sends records of payloadBytes from connections connections, each
// with a pipelined producer keeping window records in flight, for
// duration, and counts durable acknowledgements.
// A brokerPID above 0 names a broker process whose anonymous resident
// memory is sampled during the run.
func Produce(addr, stream string, connections, window, payloadBytes int, duration time.Duration, brokerPID int) (Throughput, error) {
	var acked atomic.Uint64
	var failure atomic.Pointer[error]
	var wg sync.WaitGroup
	stopAt := time.Now().Add(duration)
	start := time.Now()
	for i := 0; i < connections; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := produceOne(addr, stream, window, payloadBytes, stopAt, &acked); err != nil {
				failure.CompareAndSwap(nil, &err)
			}
		}()
	}
	peak := samplePeakAnonymous(brokerPID)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	peakAnonymous := peak()
	if err := failure.Load(); err != nil {
		return Throughput{}, *err
	}
	n := acked.Load()
	return Throughput{Connections: connections, Window: window, RecordBytes: payloadBytes, Records: n,
		PerSecond: float64(n) / elapsed, MBPerSecond: float64(n) * float64(payloadBytes) / elapsed / 1e6,
		PeakAnonymous: peakAnonymous}, nil
}

// samplePeakAnonymous samples the anonymous resident memory of process pid
// (RssAnon in /proc/PID/status) until the returned function is called,
// which returns the peak; 0 when pid is 0 or the system does not say.
func samplePeakAnonymous(pid int) (stop func() int64) {
	if pid <= 0 {
		return func() int64 { return 0 }
	}
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var peak int64
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		for {
			if anonymous, err := arena.ReadAnonymousOf(pid); err == nil {
				peak = max(peak, anonymous)
			}
			select {
			case <-done:
				result <- peak
				return
			case <-ticker.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

func produceOne(addr, stream string, window, payloadBytes int, stopAt time.Time, acked *atomic.Uint64) error {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "netbench", Window: window, Compression: client.CompressNone})
	if err != nil {
		return err
	}
	defer c.Close()
	producer := c.NewProducer(stream, client.ProducerOptions{Window: window, Compression: client.CompressNone})
	results := make(chan error, 1)
	go func() {
		var first error
		for result := range producer.Results() {
			if result.Err != nil && first == nil {
				first = result.Err
			}
			if result.Err == nil && time.Now().Before(stopAt) {
				acked.Add(1)
			}
		}
		results <- first
	}()
	record := client.Record{Payload: make([]byte, payloadBytes)}
	for time.Now().Before(stopAt) {
		if err := producer.Send(ctx, record); err != nil {
			break
		}
	}
	closeErr := producer.Close()
	if err := <-results; err != nil {
		return err
	}
	return closeErr
}

// Latency is the distribution of ack latencies with one record in flight.
type Latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p999_us"`
	Max     float64 `json:"max_us"`
}

// AckLatency sends one record at a time, waiting for each acknowledgement,
// for duration.
func AckLatency(addr, stream string, payloadBytes int, duration time.Duration) (Latency, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "netbench", Window: 1, Compression: client.CompressNone})
	if err != nil {
		return Latency{}, err
	}
	defer c.Close()
	record := client.Record{Payload: make([]byte, payloadBytes)}
	var samples []time.Duration
	for stopAt := time.Now().Add(duration); time.Now().Before(stopAt); {
		began := time.Now()
		if _, err := c.Produce(ctx, stream, record); err != nil {
			return Latency{}, err
		}
		samples = append(samples, time.Since(began))
	}
	return Summarize(samples)
}

// Summarize turns samples into percentiles.
func Summarize(samples []time.Duration) (Latency, error) {
	if len(samples) == 0 {
		return Latency{}, errors.New("netbench: no samples")
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	at := func(q float64) float64 {
		return float64(samples[min(int(q*float64(len(samples))), len(samples)-1)]) / 1e3
	}
	return Latency{Samples: len(samples), P50: at(0.50), P99: at(0.99), P999: at(0.999),
		Max: float64(samples[len(samples)-1]) / 1e3}, nil
}

func (l Latency) String() string {
	return fmt.Sprintf("p50 %.0f µs  p99 %.0f µs  p99.9 %.0f µs  max %.0f µs  (%d samples)", l.P50, l.P99, l.P999, l.Max, l.Samples)
}
