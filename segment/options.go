package segment

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/record"
)

// Durability says when an append is acknowledged.
type Durability int

const (
	// DurabilitySync acknowledges an append only after the fdatasync that
	// covers it (the default; invariant I2).
	DurabilitySync Durability = iota
	// DurabilityInterval acknowledges after the write reaches the page
	// cache and syncs every SyncInterval: a power cut loses up to one
	// interval of acknowledged records.
	DurabilityInterval
	// DurabilityNone acknowledges after the write and syncs only when a
	// segment is sealed: a power cut may lose every unsealed record.
	DurabilityNone
)

func (d Durability) String() string {
	switch d {
	case DurabilitySync:
		return "sync"
	case DurabilityInterval:
		return "interval"
	case DurabilityNone:
		return "none"
	}
	return fmt.Sprintf("durability(%d)", int(d))
}

// ParseDurability parses "sync", "interval" or "none".
func ParseDurability(s string) (Durability, error) {
	for _, d := range []Durability{DurabilitySync, DurabilityInterval, DurabilityNone} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%w: durability %q (want sync, interval or none)", ErrInvalidOptions, s)
}

// IOMode selects how segment data reaches the device.
type IOMode int

const (
	// IOBuffered writes through the page cache and fdatasyncs (default).
	IOBuffered IOMode = iota
	// IODirect writes with O_DIRECT from aligned buffers, rewriting the
	// partial tail block in place, then fdatasyncs.
	IODirect
	// IOAuto probes the data directory at open and picks one.
	IOAuto
)

func (m IOMode) String() string {
	switch m {
	case IOBuffered:
		return "buffered"
	case IODirect:
		return "direct"
	case IOAuto:
		return "auto"
	}
	return fmt.Sprintf("io-mode(%d)", int(m))
}

// ParseIOMode parses "buffered", "direct" or "auto".
func ParseIOMode(s string) (IOMode, error) {
	for _, m := range []IOMode{IOBuffered, IODirect, IOAuto} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: io mode %q (want buffered, direct or auto)", ErrInvalidOptions, s)
}

// Preallocation selects how a new segment file reserves its space, so that
// an fdatasync in the hot path never has to commit a file-size change.
type Preallocation int

const (
	// PreallocateAllocate reserves space with fallocate: one metadata
	// operation, no data written. Falls back to PreallocateZero where
	// fallocate is not supported.
	PreallocateAllocate Preallocation = iota
	// PreallocateZero writes zeros over the whole segment: each later sync
	// is an overwrite in place (fastest on ext4 here), at the price of
	// writing every segment byte twice (hard on flash).
	PreallocateZero
	// PreallocateNone only sets the size (a sparse file).
	PreallocateNone
)

func (p Preallocation) String() string {
	switch p {
	case PreallocateAllocate:
		return "fallocate"
	case PreallocateZero:
		return "zero"
	case PreallocateNone:
		return "none"
	}
	return fmt.Sprintf("preallocation(%d)", int(p))
}

// ParsePreallocation parses "fallocate", "zero" or "none".
func ParsePreallocation(s string) (Preallocation, error) {
	for _, p := range []Preallocation{PreallocateAllocate, PreallocateZero, PreallocateNone} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: preallocation %q (want fallocate, zero or none)", ErrInvalidOptions, s)
}

// Defaults.
const (
	DefaultSegmentSize  = 64 << 20
	EdgeSegmentSize     = 8 << 20
	MinSegmentSize      = 64 << 10
	MaxSegmentSize      = 1 << 30
	DefaultStagingBytes = 4 << 20
	DefaultSyncInterval = time.Second
	DefaultLossFraction = 0.01
	// DefaultSyncParallelism: 8 concurrent fdatasyncs covered 16 logs at
	// 2.3x the sequential cycle rate on the reference machine.
	DefaultSyncParallelism = 8
	DefaultMaxOpenSegments = 16
	// MaxCommitLinger bounds CommitLinger: a linger is a latency every
	// record of a busy log may pay, and past this it is a stall.
	MaxCommitLinger = 100 * time.Millisecond
	indexInterval   = 64 << 10
)

// Options configure a data directory and every log in it. The zero value
// is the default configuration.
type Options struct {
	// SegmentSize is the size at which a segment is sealed and the next
	// one started (64 MiB; 8 MiB suits small devices). A record larger
	// than a segment gets a segment of its own.
	SegmentSize int64
	// MaxRecordBytes bounds a record body (16 MiB).
	MaxRecordBytes uint32
	// StagingBytes bounds the record bytes a log buffers while the
	// previous batch is written; a full buffer blocks Append (4 MiB).
	StagingBytes int
	// StagingBuffers, when set, is where every writable log takes its
	// staging buffers (StagingBuffersPerLog of StagingBufferSize bytes)
	// when it starts appending, and returns them when it closes: the
	// broker sizes it for the logs it may serve and registers it with the
	// RAM budget. Nil: each log allocates its buffers once on the heap.
	StagingBuffers *arena.Slab
	// Durability selects when an append is acknowledged.
	Durability Durability
	// AcceptRelaxedDurability must be true for any Durability other than
	// DurabilitySync: the caller accepts that a power cut loses
	// acknowledged records.
	AcceptRelaxedDurability bool
	// SyncInterval is the sync period for DurabilityInterval (1 s).
	SyncInterval time.Duration
	// CommitLinger is how long, under DurabilitySync, the committer may
	// hold a busy log's fdatasync to gather more records into it (0: it
	// never waits). It trades up to that much ack latency for fewer
	// rewrites of the same flash pages (linger.go); an acknowledgement
	// still follows the fdatasync that covers it. At most
	// MaxCommitLinger.
	CommitLinger time.Duration
	// SyncParallelism bounds the fdatasyncs a committer cycle issues at
	// once when several logs are dirty (8).
	SyncParallelism int
	// MaxOpenSegments bounds the sealed segments per log that stay mapped
	// with an index after a read (16; on 32-bit platforms at most 256 MiB
	// of segments); beyond it the least recently used
	// one without a reader is closed.
	MaxOpenSegments int
	// IOMode selects buffered, direct or probed I/O.
	IOMode IOMode
	// Preallocation selects how segments reserve space.
	Preallocation Preallocation
	// ReadOnly opens without creating, locking exclusively, truncating,
	// quarantining or writing anything.
	ReadOnly bool
	// AcceptLoss lifts the recovery loss caps: damage is quarantined and
	// skipped however large (what `ironbus repair --apply` does).
	AcceptLoss bool
	// LossCapFraction is the per-recovery loss cap as a fraction of the
	// log's bytes (0.01); the cap is never below one segment.
	LossCapFraction float64
	// Owner describes the process holding the directory (pid, command,
	// address). A writer records it beside the lock, and ErrLocked quotes
	// it, so "locked" names its holder.
	Owner string
	// Clock stamps records; the system clock by default.
	Clock Clock
	// Logger receives recovery reports, freezes and mode choices.
	Logger *slog.Logger
	// OnSeal, when set, is called by a log's appender right after it
	// sealed a segment (the retention pass runs then). It must not block:
	// the appender waits for it.
	OnSeal func(LogID)
	// Random supplies segment tokens (crypto/rand by default); tests seed
	// it for reproducible files.
	Random io.Reader

	// Encryption, when set, seals every record body appended from then on
	// (encryption.go) and opens encrypted records on the way out. A data
	// directory written with encryption refuses to open without it.
	Encryption Encryption
	// Observer is told the duration of every batch write and fdatasync
	// (nobody by default); the broker feeds its metrics from it.
	Observer Observer
}

// mappedBytesPerLog32 bounds the address space one log's open sealed
// segments may map on a 32-bit platform (armv7): a process there has about
// 3 GiB of addresses, and 16 mapped 64 MiB segments per log would exhaust
// them with a handful of streams and their dead-letter queues.
const mappedBytesPerLog32 = 256 << 20

// defaultMaxOpenSegments is DefaultMaxOpenSegments, lowered on 32-bit
// platforms so a log maps at most mappedBytesPerLog32 (never below one).
func defaultMaxOpenSegments(segmentSize int64, intSize int) int {
	if intSize > 32 || segmentSize <= 0 {
		return DefaultMaxOpenSegments
	}
	return int(max(1, min(int64(DefaultMaxOpenSegments), mappedBytesPerLog32/segmentSize)))
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = record.DefaultMaxBody
	}
	if o.StagingBytes == 0 {
		o.StagingBytes = DefaultStagingBytes
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.MaxOpenSegments == 0 {
		o.MaxOpenSegments = defaultMaxOpenSegments(o.SegmentSize, strconv.IntSize)
	}
	if o.SyncParallelism == 0 {
		o.SyncParallelism = DefaultSyncParallelism
	}
	if o.LossCapFraction == 0 {
		o.LossCapFraction = DefaultLossFraction
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Random == nil {
		o.Random = rand.Reader
	}
	if o.Observer == nil {
		o.Observer = ignoreObserver{}
	}
	switch {
	case o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize:
		return o, fmt.Errorf("%w: segment size %d outside [%d, %d]", ErrInvalidOptions, o.SegmentSize, MinSegmentSize, MaxSegmentSize)
	case o.MaxRecordBytes > record.AbsoluteMaxBody:
		return o, fmt.Errorf("%w: max record bytes %d above %d", ErrInvalidOptions, o.MaxRecordBytes, record.AbsoluteMaxBody)
	case o.StagingBytes < 4096:
		return o, fmt.Errorf("%w: staging bytes %d below 4096", ErrInvalidOptions, o.StagingBytes)
	case o.Durability != DurabilitySync && !o.AcceptRelaxedDurability:
		return o, fmt.Errorf("%w: durability %s loses acknowledged records on power loss; it needs explicit consent (AcceptRelaxedDurability)", ErrInvalidOptions, o.Durability)
	case o.LossCapFraction < 0 || o.LossCapFraction > 1:
		return o, fmt.Errorf("%w: loss cap fraction %v outside [0, 1]", ErrInvalidOptions, o.LossCapFraction)
	case o.CommitLinger < 0 || o.CommitLinger > MaxCommitLinger:
		return o, fmt.Errorf("%w: commit linger %v outside [0, %v]", ErrInvalidOptions, o.CommitLinger, MaxCommitLinger)
	case o.SyncInterval < 0:
		return o, fmt.Errorf("%w: negative sync interval", ErrInvalidOptions)
	}
	return o, nil
}

func (o *Options) newToken() (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(o.Random, b[:]); err != nil {
		return 0, fmt.Errorf("segment: reading a random segment token: %w", err)
	}
	token := binary.LittleEndian.Uint64(b[:])
	if token == 0 {
		token = 1 // zero is never a token, so zeroed bytes never match
	}
	return token, nil
}
