package benchrig

import "time"

// OpenLoop calls send rate times a second for duration, one call in
// flight, and returns each call's latency. A call that fell due while the
// one before it was still waiting counts from its intended send time, so
// a slow answer also shows in the calls queued behind it (no coordinated
// omission). A call due while the client was idle counts from when it was
// actually sent: a timer that fires late is the harness's scheduling noise
// on a shared machine, not the server's.
func OpenLoop(rate int, duration time.Duration, send func() error) ([]time.Duration, error) {
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
