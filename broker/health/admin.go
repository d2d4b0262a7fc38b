package health

import "github.com/ironbus/ironbus/segment"

// AdminSchema names the /admin document. A change that removes or renames
// a field, or changes its meaning, gets a new version; new fields may be
// added to this one.
const AdminSchema = "ironbus.admin.v1"

// Admin is the /admin document: everything an operator (or `ironbus top`,
// `report` and `server check`) needs, in one read-only snapshot.
// docs/OBSERVABILITY.md describes every field.
type Admin struct {
	Schema        string          `json:"schema"`
	Version       string          `json:"version"`
	UptimeSeconds float64         `json:"uptime_seconds"`
	Readiness     Readiness       `json:"readiness"`
	Totals        Totals          `json:"totals"`
	Streams       []Stream        `json:"streams"`
	Groups        []Group         `json:"groups"`
	Storage       Storage         `json:"storage"`
	Fsync         Fsync           `json:"fsync"`
	Memory        Memory          `json:"memory"`
	Connections   Connections     `json:"connections"`
	Reactors      []Reactor       `json:"reactors"`
	Recovery      []RecoveryEntry `json:"recovery"`
}

// Readiness says whether the broker accepts writes, and if not, why.
type Readiness struct {
	Ready bool `json:"ready"`
	// Reason is empty when ready; otherwise one of "recovering",
	// "draining", or "frozen: <log> <cause>".
	Reason string `json:"reason,omitempty"`
}

// Totals are counters since the broker started, summed over every stream
// and group.
type Totals struct {
	ProducedRecords     uint64 `json:"produced_records"`
	ProducedBytes       uint64 `json:"produced_bytes"`
	DeliveredRecords    uint64 `json:"delivered_records"`
	RedeliveredRecords  uint64 `json:"redelivered_records"`
	AckedRecords        uint64 `json:"acked_records"`
	DeadLetteredRecords uint64 `json:"dead_lettered_records"`
}

// Stream is one stream partition's log.
type Stream struct {
	Name      string `json:"name"`
	Partition uint32 `json:"partition"`
	// FirstOffset is the lowest offset still stored; NextOffset the one
	// the next record gets: every offset below it is durable (committed).
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
	Records     uint64 `json:"records"`
	DiskBytes   int64  `json:"disk_bytes"`
	Segments    int    `json:"segments"`
	// ProducedRecords and ProducedBytes count what was written since the
	// broker started (a rate over two snapshots is the throughput).
	ProducedRecords uint64 `json:"produced_records"`
	ProducedBytes   uint64 `json:"produced_bytes"`
	// Frozen is the reason the log is read-only, empty while writable.
	Frozen     string      `json:"frozen,omitempty"`
	DeadLetter *DeadLetter `json:"dead_letter,omitempty"`
}

// DeadLetter is a stream's dead-letter queue, when it has one open.
type DeadLetter struct {
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
	DiskBytes   int64  `json:"disk_bytes"`
	Frozen      string `json:"frozen,omitempty"`
}

// Group is one consumer group the broker has open.
type Group struct {
	Stream    string `json:"stream"`
	Partition uint32 `json:"partition"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	// CommittedOffset is the group's cursor (every offset below it is
	// done); Lag is the log's next offset minus it.
	CommittedOffset uint64 `json:"committed_offset"`
	LogEnd          uint64 `json:"log_end"`
	Lag             uint64 `json:"lag"`
	InFlight        int    `json:"in_flight"`
	Unsettled       int    `json:"unsettled"`
	Members         int    `json:"members"`
	Delivered       uint64 `json:"delivered"`
	Redelivered     uint64 `json:"redelivered"`
	Acked           uint64 `json:"acked"`
	DeadLettered    uint64 `json:"dead_lettered"`
	// DeadLetterFailures counts moves to the queue that failed and will
	// be retried.
	DeadLetterFailures uint64 `json:"dead_letter_failures"`
}

// Storage is the data directory as a whole.
type Storage struct {
	DataDir         string `json:"data_dir"`
	Durability      string `json:"durability"`
	IOMode          string `json:"io_mode"`
	LogBytes        int64  `json:"log_bytes"`
	DeadLetterBytes int64  `json:"dead_letter_bytes"`
	QuarantineBytes int64  `json:"quarantine_bytes"`
	FrozenLogs      int    `json:"frozen_logs"`
	// FilesystemBytes and FilesystemFreeBytes describe the file system
	// holding the data directory (0 where the platform cannot tell);
	// FilesystemUsedPercent is what `server check --disk-warn` compares.
	FilesystemBytes       uint64  `json:"filesystem_bytes"`
	FilesystemFreeBytes   uint64  `json:"filesystem_free_bytes"`
	FilesystemUsedPercent float64 `json:"filesystem_used_percent"`

	// The disk budget (serve --disk-budget), for `ironbus top`: all zero
	// without one. DiskUsedBytes is the whole directory as retention last
	// measured it; writes are refused near DiskBudgetBytes minus
	// DiskHeadroomBytes (docs/RETENTION.md).
	DiskBudgetBytes   int64 `json:"disk_budget_bytes"`
	DiskHeadroomBytes int64 `json:"disk_headroom_bytes"`
	DiskUsedBytes     int64 `json:"disk_used_bytes"`
}

// Fsync summarises the committer: counts since start, and the latency of
// the most recent syncs (up to RecentSamples of them).
type Fsync struct {
	Syncs          uint64  `json:"syncs"`
	Cycles         uint64  `json:"cycles"`
	TotalSeconds   float64 `json:"total_seconds"`
	RecordsPerSync float64 `json:"records_per_sync"`
	RecentSamples  int     `json:"recent_samples"`
	P50Seconds     float64 `json:"p50_seconds"`
	P99Seconds     float64 `json:"p99_seconds"`
	MaxSeconds     float64 `json:"max_seconds"`
	// RunningSeconds is how long the fdatasync running now has taken (0:
	// none runs); it grows without bound on a hung device.
	RunningSeconds float64 `json:"running_seconds"`
}

// Memory is the RAM budget (the sum of every bounded pool's worst case)
// against the ceiling, and what the process holds.
type Memory struct {
	BudgetBytes   int64 `json:"budget_bytes"`
	CeilingBytes  int64 `json:"ceiling_bytes"`
	HeadroomBytes int64 `json:"headroom_bytes"`
	ResidentBytes int64 `json:"resident_bytes"`
}

// Connections counts client connections.
type Connections struct {
	Open     int64            `json:"open"`
	Max      int              `json:"max"`
	Accepted uint64           `json:"accepted"`
	Rejected map[string]int64 `json:"rejected"`
}

// Reactor is one event-loop reactor's busy time.
type Reactor struct {
	Index       int     `json:"index"`
	BusySeconds float64 `json:"busy_seconds"`
	// BusyRatio is BusySeconds over the uptime: the average load. For the
	// load now, take two snapshots and divide the difference.
	BusyRatio float64 `json:"busy_ratio"`
}

// RecoveryEntry is what recovery found in one log when it opened, plus
// damage reads found since.
type RecoveryEntry struct {
	// Directory is "data" for the stream logs and "deadletters" for the
	// dead-letter queues.
	Directory string            `json:"directory"`
	Report    segment.LogReport `json:"report"`
}
