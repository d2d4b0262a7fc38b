package consumer

import (
	"fmt"
	"time"

	"github.com/ironbus/ironbus/subject"
)

// Defaults.
const (
	DefaultVisibility      = 30 * time.Second
	DefaultMaxLease        = 5 * time.Minute
	DefaultMaxInFlight     = 8192
	DefaultMaxDeliver      = 5
	DefaultCheckpointEvery = 1000
	// unsettledFactor sizes the default window of delivered-but-unsettled
	// records relative to MaxInFlight: nacked records waiting out a delay
	// hold no lease credit, but they do hold memory, so they get a bound
	// of their own.
	unsettledFactor = 2
)

// DefaultBackoff is the nack delay schedule, indexed by attempt (the last
// entry repeats).
func DefaultBackoff() []time.Duration {
	return []time.Duration{100 * time.Millisecond, 500 * time.Millisecond,
		2 * time.Second, 10 * time.Second, 30 * time.Second}
}

// Type is a group's delivery model, fixed when the group is created.
type Type uint8

// Group types. The zero value asks for a work group.
const (
	TypeWork      Type = 1 // competing consumers, one lease per record
	TypeKeyShared Type = 2 // competing consumers, each key owned by one member, per-key order
	TypeBroadcast Type = 3 // one reader, cumulative ack, no leases
	TypeStreaming Type = 4 // consumer-managed offsets: only a committed position
)

func (t Type) String() string {
	switch t {
	case TypeWork:
		return "work"
	case TypeKeyShared:
		return "key-shared"
	case TypeBroadcast:
		return "broadcast"
	case TypeStreaming:
		return "streaming"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

func (t Type) valid() bool { return t >= TypeWork && t <= TypeStreaming }

// leased reports whether the type hands out records under leases.
func (t Type) leased() bool { return t == TypeWork || t == TypeKeyShared }

// StartKind says where a new group starts.
type StartKind uint8

// Start kinds. The zero value starts at the earliest retained record.
const (
	StartEarliest StartKind = 0
	StartLatest   StartKind = 1 // the log's end when the group is created
	StartOffset   StartKind = 2 // StartPosition.Offset
	StartTime     StartKind = 3 // the first record stamped at or after StartPosition.Time
)

// StartPosition is where a group created by Open begins. It is used only
// at creation and then kept in the checkpoint for the record.
type StartPosition struct {
	Kind   StartKind
	Offset uint64 // StartOffset
	Time   int64  // StartTime: unix nanoseconds, compared with record timestamps
}

// Options configure a group. Zero fields take the defaults.
type Options struct {
	// Type is the group's type when Open creates it, and the type Open
	// expects when the group exists. Zero means TypeWork.
	Type  Type
	Start StartPosition
	// Filter is the group's subject pattern (package subject syntax): only
	// records whose subject matches are delivered, the others are settled
	// as filtered gaps. It is fixed when Open creates the group and kept
	// in the checkpoint; "" when opening an existing group accepts its
	// filter, another pattern is ErrFilterMismatch.
	Filter string
	// Visibility is how long a lease lasts before the record is
	// redelivered (30 s); Extend renews it.
	Visibility time.Duration
	// MaxLease caps one attempt, from its delivery, whatever Extend asks
	// (5 min): a stuck consumer cannot hold a record forever.
	MaxLease time.Duration
	// MaxInFlight bounds live leases: the group's credit (8192).
	MaxInFlight int
	// MaxUnsettled bounds records delivered but not yet done: leased,
	// waiting out a nack delay, parked behind a key or being moved to the
	// dead-letter queue (2 × MaxInFlight). It bounds the group's memory.
	MaxUnsettled int
	// MaxDeliver is how many times a record is delivered before it moves
	// to the dead-letter queue (5). It applies only when DeadLetters is
	// set: without a queue to move to, a record is never dropped.
	MaxDeliver int
	// MaxRecordBytes, when set, sends a record with a larger body to the
	// dead-letter queue at once: no consumer of this group could take it.
	MaxRecordBytes int
	// Backoff is the nack delay schedule by attempt (DefaultBackoff).
	Backoff []time.Duration
	// CheckpointEvery is how many acks (or commits) trigger a checkpoint
	// (1000). Checkpoints are also written on Checkpoint, Close and the
	// release of the last member.
	CheckpointEvery int
	// CheckpointDue, when set, is called instead of writing the
	// checkpoint inline once CheckpointEvery acks or commits accumulated,
	// and the caller checkpoints soon (Checkpoint) from a goroutine that
	// may wait for a file sync. The broker sets it: its acks arrive on a
	// reactor, which must never wait for a disk. It must not block.
	CheckpointDue func()
	// CreateInBackground has Open leave a new group's first checkpoint
	// to the caller's next Checkpoint instead of writing it before it
	// returns; Created reports when that is done. The broker sets it: it
	// opens groups on a reactor, which must never wait for a disk, has its
	// checkpoint flusher write them, and delivers nothing through a new
	// group before Created.
	CreateInBackground bool
	// DeadLetters is where poison records go; nil disables max-deliver.
	DeadLetters DeadLetters
	// Now is the monotonic clock for lease deadlines and delays; time.Now
	// by default. It is never used as wall time.
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	if o.Type == 0 {
		o.Type = TypeWork
	}
	if !o.Type.valid() {
		return o, fmt.Errorf("%w: group type %d", ErrInvalidOptions, o.Type)
	}
	if o.Filter != "" {
		if err := subject.ValidatePattern([]byte(o.Filter)); err != nil {
			return o, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
		}
	}
	if o.Start.Kind > StartTime {
		return o, fmt.Errorf("%w: start kind %d", ErrInvalidOptions, o.Start.Kind)
	}
	if o.Visibility <= 0 {
		o.Visibility = DefaultVisibility
	}
	if o.MaxLease <= 0 {
		o.MaxLease = DefaultMaxLease
	}
	o.Visibility = min(o.Visibility, o.MaxLease)
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxUnsettled <= 0 {
		o.MaxUnsettled = unsettledFactor * o.MaxInFlight
	}
	o.MaxUnsettled = max(o.MaxUnsettled, o.MaxInFlight)
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if len(o.Backoff) == 0 {
		o.Backoff = DefaultBackoff()
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}
