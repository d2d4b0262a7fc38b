package floor

import (
	"fmt"
	"slices"
	"time"
)

// Result is the two floors measured around a run, pooled from the slice
// before it and the slice after it. Rates are per second, latencies in
// microseconds.
type Result struct {
	TCPPerSec float64
	TCPP50    float64
	TCPP99    float64
	RawPerSec float64
	RawP50    float64
	RawP99    float64
	// Slice is how long each floor ran on each side of the run.
	Slice time.Duration
}

// Slice bounds: long enough for a rate to settle, short enough that the
// floors do not double a run.
const (
	minSlice   = 500 * time.Millisecond
	maxSlice   = 3 * time.Second
	countSlice = 2 * time.Second
	// warmTurns of the raw loop precede the first measured slice.
	warmTurns = 64
)

// SliceFor is how long each floor runs on each side of a run of the given
// length (0: a run of a fixed count, whose length is not known): a
// quarter of it, within 0.5 s to 3 s.
func SliceFor(run time.Duration) time.Duration {
	if run <= 0 {
		return countSlice
	}
	return min(max(run/4, minSlice), maxSlice)
}

// Around measures the raw loop and the TCP floor for messages of size
// bytes in a file under dir (on the disk the run writes to), runs run,
// then measures the TCP floor and the raw loop again, in mirrored order so
// each floor is as close to the run on one side as on the other. run's
// error is returned as it is; the floors' are wrapped.
func Around(dir string, size int, slice time.Duration, run func() error) (Result, error) {
	result := Result{Slice: slice}
	loop, err := openRawLoop(dir, size, aroundFileBytes)
	if err != nil {
		return result, fmt.Errorf("raw disk loop: %w", err)
	}
	defer loop.Close()
	// Untimed turns first: the file was just written and synced, and the
	// first syncs after that pay for it.
	for range warmTurns {
		if err := loop.once(); err != nil {
			return result, fmt.Errorf("raw disk loop: %w", err)
		}
	}
	var tcp []time.Duration
	var tcpElapsed time.Duration
	measureTCP := func() error {
		began := time.Now()
		_, latencies, err := TCP(loop, size, 0, slice)
		tcp, tcpElapsed = append(tcp, latencies...), tcpElapsed+time.Since(began)
		return err
	}
	if err := loop.RunBackToBack(slice); err != nil {
		return result, fmt.Errorf("raw disk loop: %w", err)
	}
	if err := measureTCP(); err != nil {
		return result, err
	}
	if err := run(); err != nil {
		return result, err
	}
	if err := measureTCP(); err != nil {
		return result, err
	}
	if err := loop.RunBackToBack(slice); err != nil {
		return result, fmt.Errorf("raw disk loop: %w", err)
	}
	result.TCPPerSec = float64(len(tcp)) / tcpElapsed.Seconds()
	result.TCPP50, result.TCPP99 = micros(tcp, 0.50), micros(tcp, 0.99)
	result.RawPerSec = loop.BackToBack.PerSecond()
	result.RawP50, result.RawP99 = micros(loop.BackToBack.Latencies, 0.50), micros(loop.BackToBack.Latencies, 0.99)
	return result, nil
}

// micros is the q-quantile of latencies in microseconds (0: none).
func micros(latencies []time.Duration, q float64) float64 {
	if len(latencies) == 0 {
		return 0
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	return float64(sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]) / float64(time.Microsecond)
}
