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
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/session"
)

// Room for the idle-connection shape and its busy producers, and for the
// streams the rigs create.
const (
	maxConnections = 2048
	maxLogs        = 64
)

// InProcess runs a broker on a loopback port in this process, on a fresh
// data directory under dir, served by the named network backend (see
// loop.New; "" is auto); stop drains it and removes the directory. It
// returns the backend that serves, which auto may have chosen.
//
// Connection read buffers, socket output queues and append staging come
// from budgeted slabs, as under `ironbus serve`: without them every reply
// a reactor queues takes a fresh 64 KiB chunk from the heap, which the
// broker in production never does.
func InProcess(dir string, storage segment.Options, backend string) (addr, served string, stop func(), err error) {
	slabs, err := newSlabs(&storage)
	if err != nil {
		return "", "", nil, err
	}
	dataDir, err := os.MkdirTemp(dir, "netbench-")
	if err != nil {
		slabs.close()
		return "", "", nil, err
	}
	fail := func(err error, closers ...func() error) (string, string, func(), error) {
		for _, c := range closers {
			_ = c()
		}
		slabs.close()
		_ = os.RemoveAll(dataDir)
		return "", "", nil, err
	}
	b, err := broker.Open(broker.Config{DataDir: dataDir, Storage: storage, MaxConnections: maxConnections})
	if err != nil {
		return fail(err)
	}
	handler, err := session.NewHandler(b, session.Config{})
	if err != nil {
		return fail(err, b.Close)
	}
	server, choice, err := loop.New(backend, loop.Config{MaxBuffer: int(handler.MaxFrame()) + 64<<10,
		Buffers: slabs.reads, OutputBuffers: slabs.output}, handler)
	if err != nil {
		return fail(err, b.Close)
	}
	bound, err := server.Listen("127.0.0.1:0")
	if err != nil {
		return fail(err, b.Close)
	}
	go func() { _ = server.Serve() }()
	stop = func() {
		b.Drain()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if server.Shutdown(ctx) != nil {
			server.CloseAll()
		}
		_ = b.Close()
		slabs.close()
		_ = os.RemoveAll(dataDir)
	}
	return bound.String(), choice.Backend, stop, nil
}

// slabs are the in-process broker's budgeted pools, lazily mapped.
type slabs struct {
	reads, output, staging *arena.Slab
}

func newSlabs(storage *segment.Options) (*slabs, error) {
	budget := arena.NewBudget()
	var s slabs
	var err error
	if s.reads, err = arena.NewLazySlab(budget, "connection read buffers", "netbench", 64<<10, maxConnections); err != nil {
		return nil, err
	}
	if s.output, err = arena.NewLazySlab(budget, "socket output queues", "netbench", loop.OutputChunkSize, 4*maxConnections); err != nil {
		s.close()
		return nil, err
	}
	perLog := segment.StagingBuffersPerLog(storage.IOMode)
	if s.staging, err = arena.NewLazySlab(budget, "append staging", "netbench",
		segment.StagingBufferSize(*storage), maxLogs*perLog); err != nil {
		s.close()
		return nil, err
	}
	storage.StagingBuffers = s.staging
	return &s, nil
}

func (s *slabs) close() {
	for _, slab := range []*arena.Slab{s.reads, s.output, s.staging} {
		if slab != nil {
			_ = slab.Close()
		}
	}
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
