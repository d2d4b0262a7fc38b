package broker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironbus/ironbus/brokertime"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Config configures the engine. The zero value of each field is its
// default. What a protocol adapter needs (frame sizes, windows, timeouts,
// authentication) is the adapter's own configuration.
type Config struct {
	DataDir string
	// DisableAutoCreateStreams stops a publish to an unknown stream from
	// creating it (with one partition); such a publish is then
	// ErrNoSuchStream. Consuming, opening a group, acknowledging and
	// administration never create a stream either way.
	DisableAutoCreateStreams bool
	// FS is the file system (the OS by default; tests inject others).
	FS vfs.FS
	// Storage configures the log engine.
	Storage segment.Options
	// Transactions bounds transactions across partitions (txn.go).
	Transactions TransactionConfig
	// MaxConnections bounds the clients attached at once through every
	// adapter (256; Connect).
	MaxConnections int
	// Visibility is the default lease of a delivery (30 s).
	Visibility time.Duration
	// CheckpointInterval is how often group cursors are persisted (200 ms).
	CheckpointInterval time.Duration
	// NoAckShedPerSecond is how many fire-and-forget (no-ack) records per
	// second the broker may drop, counted, rather than hold their
	// connection back while a partition or the connection's window is
	// full; 0 never sheds (they wait like any record).
	NoAckShedPerSecond int
	// MaxStreams bounds the streams the broker serves (256): each holds
	// staging buffers, so the RAM budget needs a number. Streams already
	// on disk open even past it; new ones are refused.
	MaxStreams int
	// MaxGroups bounds the consumer groups across all streams (256):
	// each may hold MaxInFlight leases.
	MaxGroups int
	// MaxInFlight bounds the deliveries a group has leased and not yet
	// had acknowledged (8,192).
	MaxInFlight int
	// MaxUnsettled bounds the records a group has delivered and not yet
	// had settled: leased, waiting out a nack delay, parked behind a key
	// (2 × MaxInFlight). With MaxInFlight it bounds a group's memory.
	MaxUnsettled int
	// MaxBatchRecords bounds the records of one atomic batch
	// (Partition.TryAppendAtomic): 1,000 by default, at most
	// MaxBatchRecordsLimit.
	MaxBatchRecords int
	// MaxBatchBytes bounds the record-frame bytes (record.FrameSize of
	// each body) of one atomic batch: 1 MiB by default, lowered to
	// segment.MaxAtomicBytes of Storage when that is less (the whole batch
	// must fit one staging buffer and one empty segment); a value above
	// segment.MaxAtomicBytes is refused.
	MaxBatchBytes int
	// MaxDeliver is how many times a record is delivered before it moves
	// to its stream's dead-letter queue (5).
	MaxDeliver int
	// DeadLetterRetention drops whole sealed segments of a dead-letter
	// queue whose records are all older than this (7 days; negative keeps
	// them forever), by the monotonic-safe record timestamps rule
	// (docs/RETENTION.md). It fills Retention.DeadLetters.MaxAge when that
	// is zero. DeadLetterRetentionCheck is unused: the retention pass runs
	// every RetentionCheck.
	DeadLetterRetention      time.Duration
	DeadLetterRetentionCheck time.Duration
	// RoutingDomain, when set, splits subject routing into domains: it
	// returns how many leading bytes of a subject or binding pattern name
	// its domain (0: the default domain). A binding only ever conflicts
	// with bindings of its own domain, and a subject routes only through
	// them, so one domain's wildcards never reach into another. The
	// engine gives domains no other meaning (the session keys them by
	// account).
	RoutingDomain func(name []byte) int
	// Version is the broker's version, for adapters and /admin.
	Version string
	Logger  *slog.Logger

	// ---- Observability: figures the broker reports but does not own,
	// and when liveness calls it stuck.
	//
	// MemoryBudget and MemoryCeiling are the RAM budget's total and the
	// ceiling it was checked against (0: none), for ironbus_memory_*.
	MemoryBudget  int64
	MemoryCeiling int64
	// StuckAfter is how long the checkpoint flusher may stand still, or
	// one fdatasync may run, before /healthz reports the broker stuck
	// (30 s).
	StuckAfter time.Duration
	// Collectors are counters other parts own (the server's security
	// counters) that /metrics serves beside the broker's.
	Collectors []prometheus.Collector
	// ---- Retention and the disk budget (docs/RETENTION.md) ----

	// Retention holds the bounds of every stream and dead-letter queue,
	// group expiry and the disk budget; SetRetention swaps it at run time.
	Retention RetentionConfig
	// RetentionCheck is how often the retention pass runs (10 s); it also
	// runs after every segment seal and when a write meets the budget.
	RetentionCheck time.Duration
	// WallClockStepThreshold is how far the wall clock may move away from
	// the monotonic clock between two passes before it counts as a step
	// (1 min).
	WallClockStepThreshold time.Duration
	// Clock is the monotonic clock of retention ages and group expiry
	// (Go's monotonic clock; tests inject one). Record stamps come from
	// Storage.Clock, the wall clock.
	Clock MonotonicClock
	// TimeSource drives broker time (Broker.Now): the platform clock
	// that counts suspend when nil; tests inject one.
	TimeSource brokertime.Source
	// DedupMaxIDs caps the message ids each partition of a stream with
	// a dedup window remembers (dedup.DefaultMaxIDs when zero).
	DedupMaxIDs int

	// Producers bounds the idempotent producers' registry and tables
	// (producers.go).
	Producers ProducerConfig
}

// Retention defaults.
const (
	DefaultRetentionCheck         = 10 * time.Second
	DefaultWallClockStepThreshold = time.Minute
)

// retentionConfig fills the retention defaults and validates them.
func (c *Config) retentionConfig() (RetentionConfig, error) {
	if c.RetentionCheck <= 0 {
		c.RetentionCheck = DefaultRetentionCheck
	}
	if c.WallClockStepThreshold <= 0 {
		c.WallClockStepThreshold = DefaultWallClockStepThreshold
	}
	if c.Clock == nil {
		c.Clock = systemMonotonic{origin: time.Now()}
	}
	rc := c.Retention
	if rc.DeadLetters.MaxAge == 0 && c.DeadLetterRetention > 0 {
		rc.DeadLetters.MaxAge = c.DeadLetterRetention
	}
	segmentSize := c.Storage.SegmentSize
	if segmentSize <= 0 {
		segmentSize = segment.DefaultSegmentSize
	}
	rc = rc.withDefaults(segmentSize)
	return rc, rc.validate(segmentSize)
}

// Defaults.
const (
	DefaultMaxConnections      = 256
	DefaultDeadLetterRetention = 7 * 24 * time.Hour
	DefaultCheckpointInterval  = 200 * time.Millisecond
	DefaultMaxStreams          = 256
	DefaultMaxGroups           = 256
	DefaultStuckAfter          = 30 * time.Second
	DefaultMaxBatchRecords     = 1000
	DefaultMaxBatchBytes       = 1 << 20
	// MaxBatchRecordsLimit bounds MaxBatchRecords: a batch's records are
	// numbered with 16 bits on the wire.
	MaxBatchRecordsLimit = 1 << 16
)

func (c Config) withDefaults() (Config, error) {
	if c.FS == nil {
		c.FS = vfs.OS{}
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = DefaultMaxGroups
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = consumer.DefaultMaxInFlight
	}
	if c.MaxUnsettled < c.MaxInFlight {
		c.MaxUnsettled = 2 * c.MaxInFlight
	}
	if c.DeadLetterRetention == 0 {
		c.DeadLetterRetention = DefaultDeadLetterRetention
	}
	if c.DeadLetterRetentionCheck <= 0 {
		c.DeadLetterRetentionCheck = time.Minute
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = consumer.DefaultMaxDeliver
	}
	if c.Storage.StagingBytes == 0 {
		c.Storage.StagingBytes = segment.DefaultStagingBytes
	}
	if err := c.atomicBatchDefaults(); err != nil {
		return c, err
	}
	if c.StuckAfter <= 0 {
		c.StuckAfter = DefaultStuckAfter
	}
	if c.Version == "" {
		c.Version = "devel"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Storage.Logger == nil {
		c.Storage.Logger = c.Logger
	}
	if c.Storage.MaxRecordBytes == 0 {
		c.Storage.MaxRecordBytes = record.DefaultMaxBody
	}
	if c.DataDir == "" {
		return c, fmt.Errorf("%w: a data directory is required", ErrInvalidArgument)
	}
	return c, nil
}

// atomicBatchDefaults fills and checks the atomic batch limits. REQUIRES:
// the staging bytes filled.
func (c *Config) atomicBatchDefaults() error {
	if c.MaxBatchRecords <= 0 {
		c.MaxBatchRecords = DefaultMaxBatchRecords
	}
	storageLimit := segment.MaxAtomicBytes(c.Storage)
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = min(DefaultMaxBatchBytes, storageLimit)
	}
	switch {
	case c.MaxBatchRecords > MaxBatchRecordsLimit:
		return fmt.Errorf("%w: max batch records %d above %d", ErrInvalidArgument, c.MaxBatchRecords, MaxBatchRecordsLimit)
	case c.MaxBatchBytes > storageLimit:
		return fmt.Errorf("%w: max batch bytes %d above the %d one staging buffer and one segment hold", ErrInvalidArgument, c.MaxBatchBytes, storageLimit)
	}
	return nil
}
