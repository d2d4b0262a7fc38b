package main

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is what a throughput workload did: acknowledged (or, for
// consumers, processed) messages and the wall time they took.
type outcome struct {
	messages uint64
	elapsed  time.Duration
}

func (o outcome) perSecond() float64 {
	if o.elapsed <= 0 {
		return 0
	}
	return float64(o.messages) / o.elapsed.Seconds()
}

// payloadOf returns a message body of size bytes; the content does not
// matter to either broker (neither compresses), only the length.
func payloadOf(size int) []byte {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	return payload
}

// inParallel runs worker on connections goroutines until each returns,
// adding up what they counted, and times the whole run from now until the
// last worker has its last answer.
func inParallel(connections int, worker func(counted *atomic.Uint64) error) (outcome, error) {
	var counted atomic.Uint64
	var wg sync.WaitGroup
	failures := make([]error, connections)
	start := time.Now()
	for index := range connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failures[index] = worker(&counted)
		}()
	}
	wg.Wait()
	return outcome{messages: counted.Load(), elapsed: time.Since(start)}, errors.Join(failures...)
}

// awaitedLoop calls send, one at a time, until stopAt, counting each
// success: the shape of a client with one request in flight.
func awaitedLoop(stopAt time.Time, acked *atomic.Uint64, send func() error) error {
	for time.Now().Before(stopAt) {
		if err := send(); err != nil {
			return err
		}
		acked.Add(1)
	}
	return nil
}

// openLoop sends at a fixed rate for duration, one request in flight, and
// returns each request's latency. A request that fell due while the one
// before it was still waiting counts from its intended send time, so a
// slow answer also shows in the requests queued behind it (no coordinated
// omission). A request due while the client was idle counts from when it
// was actually sent: a timer that fires late is the harness's scheduling
// noise on a shared machine, not the broker's.
func openLoop(rate int, duration time.Duration, send func() error) ([]time.Duration, error) {
	interval := time.Second / time.Duration(rate)
	count := int(duration / interval)
	latencies := make([]time.Duration, 0, count)
	start := time.Now()
	previousAnswer := start
	for index := range count {
		intended := start.Add(time.Duration(index) * interval)
		from := intended
		if !previousAnswer.After(intended) {
			if wait := time.Until(intended); wait > 0 {
				time.Sleep(wait)
			}
			from = time.Now()
		}
		if err := send(); err != nil {
			return nil, err
		}
		previousAnswer = time.Now()
		latencies = append(latencies, previousAnswer.Sub(from))
	}
	return latencies, nil
}

// percentile returns the q-quantile of latencies in microseconds, by
// nearest rank on the sorted samples: exact, no histogram buckets.
func percentile(latencies []time.Duration, q float64) float64 {
	if len(latencies) == 0 {
		return 0
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	index := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[index]) / float64(time.Microsecond)
}
