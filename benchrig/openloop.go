package benchrig

import "time"

// Pace is an open-loop schedule: call index falls due at start +
// index×interval, whatever happened to the calls before it.
type Pace struct {
	start    time.Time
	interval time.Duration
}

// NewPace starts a schedule at start with one call every interval.
func NewPace(start time.Time, interval time.Duration) Pace {
	return Pace{start: start, interval: interval}
}

// Await is called once call index could be sent, and returns the time its
// latency counts from. A call that could go before it fell due waits for
// its due time and counts from when it is actually sent: a timer that
// fires late is the harness's scheduling noise on a shared machine, not
// the server's. A call that could go only after it fell due (held back by
// an earlier answer or a full window) counts from its due time, so a slow
// answer also shows in the calls queued behind it (no coordinated
// omission).
func (p Pace) Await(index int) time.Time {
	due := p.start.Add(time.Duration(index) * p.interval)
	if now := time.Now(); now.Before(due) {
		time.Sleep(due.Sub(now))
		return time.Now()
	}
	return due
}

// OpenLoop calls send rate times a second for duration, one call in
// flight, and returns each call's latency, counted as Pace.Await says.
func OpenLoop(rate int, duration time.Duration, send func() error) ([]time.Duration, error) {
	interval := time.Second / time.Duration(rate)
	count := int(duration / interval)
	latencies := make([]time.Duration, 0, count)
	pace := NewPace(time.Now(), interval)
	for index := range count {
		from := pace.Await(index)
		if err := send(); err != nil {
			return nil, err
		}
		latencies = append(latencies, time.Since(from))
	}
	return latencies, nil
}
