package broker

import (
	"sync"
	"time"
)

// noAckCounters count the fire-and-forget records the broker dropped
// without a word to their producer (I9: counted, visible in metrics).
type noAckCounters struct {
	mu       sync.Mutex
	refused  uint64 // failed a check and got no answer
	shed     uint64 // dropped under overload, within the budget
	tokens   float64
	lastFill time.Time
}

// CountSilentRefusal counts a no-ack record refused (bad input, no
// permission, a failed check): its producer asked for no answer.
func (b *Broker) CountSilentRefusal() {
	b.noAck.mu.Lock()
	b.noAck.refused++
	b.noAck.mu.Unlock()
}

// TryShed asks to drop n no-ack records instead of holding their
// connection back while the partition or the connection's window is full.
// It grants the request while the shedding budget (Config.NoAckShedPerSecond
// records per second, with a second of burst) allows, and counts what it
// grants; refused, the records wait like any others (backpressure).
func (b *Broker) TryShed(n int) bool {
	rate := float64(b.cfg.NoAckShedPerSecond)
	if rate <= 0 {
		return false
	}
	c := &b.noAck
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.lastFill.IsZero() {
		c.tokens = min(rate, c.tokens+now.Sub(c.lastFill).Seconds()*rate)
	} else {
		c.tokens = rate
	}
	c.lastFill = now
	if c.tokens < float64(n) {
		return false
	}
	c.tokens -= float64(n)
	c.shed += uint64(n)
	return true
}

// NoAckDropped returns the records dropped without an answer: refused and
// shed.
func (b *Broker) NoAckDropped() (refused, shed uint64) {
	b.noAck.mu.Lock()
	defer b.noAck.mu.Unlock()
	return b.noAck.refused, b.noAck.shed
}
