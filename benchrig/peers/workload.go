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
