package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/segment"
)

// ErrInvalidRetention marks a retention configuration that cannot work;
// SetRetention and Open refuse it and say which knob to change.
var ErrInvalidRetention = errors.New("broker: invalid retention")

// PinPolicy says what happens when a retention bound would cut below the
// committed position of a consumer group.
type PinPolicy int

const (
	// ConsumerSafe keeps what a group has not committed: the bound waits,
	// with a warning and a counter (the default).
	ConsumerSafe PinPolicy = iota
	// DropOldest deletes anyway; the groups that had not reached the
	// deleted records get one gap advisory and continue from the new start.
	DropOldest
)

func (p PinPolicy) String() string {
	switch p {
	case ConsumerSafe:
		return "consumer-safe"
	case DropOldest:
		return "drop-oldest"
	}
	return fmt.Sprintf("pin-policy(%d)", int(p))
}

// ParsePinPolicy parses "consumer-safe" or "drop-oldest".
func ParsePinPolicy(text string) (PinPolicy, error) {
	for _, p := range []PinPolicy{ConsumerSafe, DropOldest} {
		if p.String() == text {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: retention policy %q (want consumer-safe or drop-oldest)", ErrInvalidRetention, text)
}

// DiskFullPolicy says what happens when the disk budget is used up.
type DiskFullPolicy int

const (
	// DropNew refuses new records with a typed, retryable no-space error;
	// reads and acks go on, and writes resume once space is freed.
	DropNew DiskFullPolicy = iota
	// DropOldestSegments deletes the oldest whole sealed segments (gap
	// advisories to the groups that had not read them) to make room.
	DropOldestSegments
)

func (p DiskFullPolicy) String() string {
	switch p {
	case DropNew:
		return "drop-new"
	case DropOldestSegments:
		return "drop-oldest"
	}
	return fmt.Sprintf("disk-full-policy(%d)", int(p))
}

// ParseDiskFullPolicy parses "drop-new" or "drop-oldest".
func ParseDiskFullPolicy(text string) (DiskFullPolicy, error) {
	for _, p := range []DiskFullPolicy{DropNew, DropOldestSegments} {
		if p.String() == text {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: disk-full policy %q (want drop-new or drop-oldest)", ErrInvalidRetention, text)
}

// StreamRetention bounds one log. Zero bounds are unbounded. It is a
// value per stream: today every stream takes RetentionConfig.Stream;
// per-stream overrides plug in at retentionFor.
type StreamRetention struct {
	// MaxBytes bounds the bytes of the log's segments.
	MaxBytes int64
	// MaxAge bounds the age of its records, by the monotonic-safe record
	// timestamps rule (docs/RETENTION.md).
	MaxAge time.Duration
	// MaxRecords bounds the records it holds.
	MaxRecords uint64
	// Policy decides what a bound does to records a group has not
	// committed.
	Policy PinPolicy
}

// Bounded reports whether any bound is set.
func (r StreamRetention) Bounded() bool { return r.MaxBytes > 0 || r.MaxAge > 0 || r.MaxRecords > 0 }

// RetentionConfig is every retention and disk-budget knob; it can be
// swapped at run time (SetRetention) as a whole.
type RetentionConfig struct {
	// Stream is the default retention of every stream.
	Stream StreamRetention
	// DeadLetters bounds each dead-letter queue. Its policy is always
	// drop-oldest: only the broker writes a queue, and a queue nobody
	// reads must not pin the disk.
	DeadLetters StreamRetention
	// GroupExpiry: a group with no activity for this long stops pinning
	// retention; a warning (log and counter) comes at half of it. Zero:
	// groups never expire.
	GroupExpiry time.Duration
	// DiskBudget bounds the bytes of the whole data directory: every log,
	// dead-letter queue, checkpoint and quarantined copy. Zero: no budget
	// (the device's own size still applies, as ENOSPC).
	DiskBudget int64
	// DiskHeadroom is kept free of records within the budget, for
	// checkpoints, segment rolls and recovery (5 % of the budget, at
	// least two segments, by default).
	DiskHeadroom int64
	// DiskFull decides what happens when records reach the budget minus
	// the headroom.
	DiskFull DiskFullPolicy
}

// validate refuses a configuration that cannot work. segmentSize is the
// configured segment size (a budget must hold a few).
func (rc RetentionConfig) validate(segmentSize int64) error {
	for _, r := range []StreamRetention{rc.Stream, rc.DeadLetters} {
		if r.MaxBytes < 0 || r.MaxAge < 0 {
			return fmt.Errorf("%w: negative bytes or age bound", ErrInvalidRetention)
		}
		if r.Policy != ConsumerSafe && r.Policy != DropOldest {
			return fmt.Errorf("%w: unknown policy %v", ErrInvalidRetention, r.Policy)
		}
	}
	switch {
	case rc.GroupExpiry < 0:
		return fmt.Errorf("%w: negative group expiry", ErrInvalidRetention)
	case rc.DiskBudget < 0 || rc.DiskHeadroom < 0:
		return fmt.Errorf("%w: negative disk budget or headroom", ErrInvalidRetention)
	case rc.DiskFull != DropNew && rc.DiskFull != DropOldestSegments:
		return fmt.Errorf("%w: unknown disk-full policy %v", ErrInvalidRetention, rc.DiskFull)
	case rc.DiskBudget > 0 && rc.DiskBudget-rc.DiskHeadroom < 8*segmentSize:
		return fmt.Errorf("%w: a disk budget of %d bytes minus %d of headroom holds fewer than eight %d-byte segments (each log keeps an active and a prepared one, and the budget keeps two of margin); raise the budget or lower the segment size",
			ErrInvalidRetention, rc.DiskBudget, rc.DiskHeadroom, segmentSize)
	}
	return nil
}

// withDefaults fills the headroom of a budget left at zero.
func (rc RetentionConfig) withDefaults(segmentSize int64) RetentionConfig {
	if rc.DiskBudget > 0 && rc.DiskHeadroom == 0 {
		rc.DiskHeadroom = max(rc.DiskBudget/20, 2*segmentSize)
	}
	return rc
}

// SetRetention validates rc and swaps it in atomically; the next
// retention pass (started at once) applies it. It is the run-time change
// hook for configuration reloads (SIGHUP). A refused configuration leaves
// the current one in force.
func (b *Broker) SetRetention(rc RetentionConfig) error {
	rc = rc.withDefaults(b.segmentSize())
	if err := rc.validate(b.segmentSize()); err != nil {
		return err
	}
	b.retention.config.Store(&rc)
	b.nudgeRetention()
	return nil
}

// Retention returns the retention configuration in force.
func (b *Broker) Retention() RetentionConfig { return *b.retention.config.Load() }

// retentionFor returns the bounds of a stream's log: each bound the
// stream sets in the catalog overrides the broker's default; the policy
// is always the broker's.
func (rc *RetentionConfig) retentionFor(ref logRef) StreamRetention {
	bounds := rc.Stream
	if ref.bounds.MaxBytes > 0 {
		bounds.MaxBytes = ref.bounds.MaxBytes
	}
	if ref.bounds.MaxAge > 0 {
		bounds.MaxAge = ref.bounds.MaxAge
	}
	if ref.bounds.MaxRecords > 0 {
		bounds.MaxRecords = ref.bounds.MaxRecords
	}
	return bounds
}

func (b *Broker) segmentSize() int64 {
	if b.cfg.Storage.SegmentSize > 0 {
		return b.cfg.Storage.SegmentSize
	}
	return segment.DefaultSegmentSize
}

// Deletion reasons, for counters and log lines.
const (
	reasonBytes = iota
	reasonAge
	reasonRecords
	reasonBudget
	reasonCount
)

var reasonNames = [reasonCount]string{"bytes", "age", "records", "budget"}

// logPlan is what one pass decides for one log.
type logPlan struct {
	drop   int // leading segments to delete
	reason int // the bound that asked for the most
	wanted int // segments the bounds asked for, before the groups' floor
}

// planLog decides how many leading segments of a log its bounds delete.
// Only sealed segments before the newest one are candidates; expired(i)
// applies the age rule to segment i; floor is the slowest pinning group's
// committed position (math.MaxUint64 when none pins). Under ConsumerSafe
// no deleted segment may hold an offset at or above floor.
func planLog(segs []segment.SegmentInfo, r StreamRetention, floor uint64, expired func(int) bool) logPlan {
	candidates := 0
	for candidates < len(segs)-1 && segs[candidates].Sealed {
		candidates++
	}
	var totalBytes int64
	var totalRecords uint64
	for _, s := range segs {
		totalBytes += s.Bytes
		totalRecords += s.Records
	}
	var want [reasonCount]int
	for i := 0; i < candidates; i++ {
		if r.MaxBytes > 0 && totalBytes > r.MaxBytes {
			want[reasonBytes] = i + 1
		}
		if r.MaxRecords > 0 && totalRecords > r.MaxRecords {
			want[reasonRecords] = i + 1
		}
		if r.MaxAge > 0 && want[reasonAge] == i && expired(i) {
			want[reasonAge] = i + 1
		}
		totalBytes -= segs[i].Bytes
		totalRecords -= segs[i].Records
	}
	plan := logPlan{reason: reasonBytes}
	for reason, n := range want {
		if n > plan.wanted {
			plan.wanted, plan.reason = n, reason
		}
	}
	plan.drop = plan.wanted
	if r.Policy == ConsumerSafe {
		plan.drop = min(plan.drop, safePrefix(segs, floor))
	}
	return plan
}

// safePrefix counts the leading sealed segments (never the newest) every
// offset of which is below floor.
func safePrefix(segs []segment.SegmentInfo, floor uint64) int {
	n := 0
	for n < len(segs)-1 && segs[n].Sealed && segs[n].Next <= floor {
		n++
	}
	return n
}

// ageExpired is the monotonic-safe record timestamps rule: a segment is
// older than maxAge only when its newest record's wall-clock stamp is
// older than the wall high-water minus maxAge AND the broker's monotonic
// clock has run at least maxAge since it first saw the segment sealed
// (since boot for segments found at boot). A wall clock stepping years
// forward satisfies the first half at once but not the second; one
// stepping back cannot lower the high-water, so it holds nothing longer
// than its monotonic age once the stamps are old enough.
func ageExpired(s segment.SegmentInfo, highWater int64, seenFor, maxAge time.Duration) bool {
	if seenFor < maxAge {
		return false
	}
	return s.Records == 0 || s.MaxTimestamp < highWater-int64(maxAge)
}
