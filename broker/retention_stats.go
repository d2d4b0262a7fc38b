package broker

import "time"

// RetentionStats is a snapshot of retention and the disk budget, for
// metrics and reports. Counters only grow.
type RetentionStats struct {
	// Logs lists every open log and dead-letter queue with its size.
	Logs []LogUsage
	// SegmentsDeleted counts deleted segments by reason: "bytes", "age",
	// "records" (the bounds) and "budget" (disk pressure).
	SegmentsDeleted map[string]uint64
	// RecordsDropped counts offsets deleted that some pinning group had
	// not committed (drop-oldest and budget pressure under it).
	RecordsDropped uint64
	// HeldBack counts passes in which consumer-safe kept segments a bound
	// asked to delete.
	HeldBack uint64
	// GroupExpiryWarnings counts groups warned at half the expiry;
	// GroupsExpired counts groups that stopped pinning.
	GroupExpiryWarnings, GroupsExpired uint64
	// BudgetUsed is the data directory's bytes at the last measure plus
	// records admitted since; BudgetLimit and BudgetHeadroom are the
	// configured budget (0: none).
	BudgetUsed, BudgetLimit, BudgetHeadroom int64
	// WritesRefused counts produce runs refused by the budget.
	WritesRefused uint64
	// WallClockSteps counts wall-clock discontinuities seen;
	// WallClockHighWater is the latest wall time seen (persisted).
	WallClockSteps     uint64
	WallClockHighWater time.Time
}

// LogUsage is one log's share of the disk.
type LogUsage struct {
	Stream      string
	DeadLetters bool
	Bytes       int64
	Segments    int
	FirstOffset uint64
}

// RetentionStats returns the counters and the disk usage now.
func (b *Broker) RetentionStats() RetentionStats {
	r := &b.retention
	rc := r.config.Load()
	stats := RetentionStats{SegmentsDeleted: make(map[string]uint64, reasonCount),
		RecordsDropped: r.counters.recordsDropped.Load(), HeldBack: r.counters.held.Load(),
		GroupExpiryWarnings: r.counters.expiryWarnings.Load(), GroupsExpired: r.counters.groupsExpired.Load(),
		BudgetUsed: r.used.Load() + r.pending.Load(), BudgetLimit: rc.DiskBudget, BudgetHeadroom: rc.DiskHeadroom,
		WritesRefused: r.counters.writesRefused.Load(), WallClockSteps: r.counters.wallSteps.Load(),
		WallClockHighWater: time.Unix(0, r.highWater.Load()).UTC()}
	for reason, name := range reasonNames {
		stats.SegmentsDeleted[name] = r.counters.deleted[reason].Load()
	}
	for _, ref := range b.retainedLogs() {
		info := ref.log.Info()
		stats.Logs = append(stats.Logs, LogUsage{Stream: ref.stream, DeadLetters: ref.deadLetters, Bytes: info.Bytes,
			Segments: info.Segments, FirstOffset: info.FirstOffset})
	}
	return stats
}
