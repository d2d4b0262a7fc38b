package segment

import "time"

// Observer is told how long the engine's two slow steps take: writing a
// batch and the fdatasync that makes it durable. The appender and the
// committer call it on their hot paths, so an implementation must neither
// block nor allocate (a Prometheus histogram's Observe is lock-free). It is
// an interface, not a metrics library, so this package never depends on
// one (the broker implements it).
type Observer interface {
	// ObserveAppend reports one batch written into a segment: how long
	// the write took, and how many records and bytes it carried.
	ObserveAppend(elapsed time.Duration, records int, bytes int)
	// ObserveSync reports one fdatasync: how long it took and how many
	// records it made durable. A failed sync is reported too, with zero
	// records: its duration is exactly what an operator needs to see.
	ObserveSync(elapsed time.Duration, records uint64)
}

// ignoreObserver is the Observer of engines nobody watches.
type ignoreObserver struct{}

func (ignoreObserver) ObserveAppend(time.Duration, int, int) {}
func (ignoreObserver) ObserveSync(time.Duration, uint64)     {}
