package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ironbus/ironbus/segment"
)

// Sentinel errors; each is wrapped with the detail.
var (
	// ErrInvalid marks a catalog (or a change to one) that breaks an
	// invariant: a bad name, a partition count out of range, a binding
	// to a stream that does not exist.
	ErrInvalid = errors.New("catalog: invalid")
	// ErrCorrupt marks a catalog file that fails its checks.
	ErrCorrupt = errors.New("catalog: streams.json is corrupt")
	// ErrTooNew marks a catalog written by a newer IronBus.
	ErrTooNew = errors.New("catalog: streams.json is from a newer version")
	// ErrReadOnly is returned by Update on a store opened read-only.
	ErrReadOnly = errors.New("catalog: opened read-only")
)

// Stream is one named stream's settings.
type Stream struct {
	Name       string
	Partitions uint32
	// Retention bounds per partition; zero is the broker's default.
	MaxBytes   uint64
	MaxAge     time.Duration
	MaxRecords uint64
	// Created is the wall clock at creation; zero for a stream adopted
	// from an older data directory or made by its first publish.
	Created time.Time
	// Owner is the identity that created the stream, whose quotas it
	// counts against; "" for one created without authentication.
	Owner string
	// DedupWindow is how long the stream remembers message ids: zero is
	// DefaultDedupWindow, DedupOff turns message-id dedup off.
	DedupWindow time.Duration
	// Compact keeps only the latest record per key in sealed segments;
	// DeleteRetention is how long it keeps a tombstone (zero: the
	// broker's default). A catalog without them reads as not compacted.
	Compact         bool
	DeleteRetention time.Duration
	// CompactPastGroups lets compaction remove records a consumer group
	// has not committed.
	CompactPastGroups bool
	// Replicas is the stream's replication factor in a cluster: 0 or 1
	// for a stream of this node alone. A replicated stream's partitions
	// take appends only through their replication group.
	Replicas int
}

// Message-id dedup windows.
const (
	DefaultDedupWindow = 2 * time.Minute
	MaxDedupWindow     = 24 * time.Hour
	// DedupOff as a DedupWindow: the stream remembers no message ids.
	DedupOff time.Duration = -1
)

// Dedup is the stream's message-id window in effect: 0 when off.
func (s Stream) Dedup() time.Duration {
	switch {
	case s.DedupWindow == 0:
		return DefaultDedupWindow
	case s.DedupWindow < 0:
		return 0
	}
	return s.DedupWindow
}

// SameSettings reports whether two streams were asked for with the same
// settings (creation time aside): creating a stream twice with them is
// not an error.
func (s Stream) SameSettings(other Stream) bool {
	return s.Name == other.Name && s.Partitions == other.Partitions && s.MaxBytes == other.MaxBytes &&
		s.MaxAge == other.MaxAge && s.MaxRecords == other.MaxRecords && s.Dedup() == other.Dedup() &&
		s.Compact == other.Compact && s.DeleteRetention == other.DeleteRetention && s.CompactPastGroups == other.CompactPastGroups &&
		max(s.Replicas, 1) == max(other.Replicas, 1)
}

// Replicated reports whether the stream's partitions replicate.
func (s Stream) Replicated() bool { return s.Replicas > 1 }

// Binding routes subjects matching Pattern to Stream.
type Binding struct {
	Pattern string
	Stream  string
}

// Catalog is every stream and binding, each sorted by name (pattern).
// It is a value: Store hands out copies.
type Catalog struct {
	Streams  []Stream
	Bindings []Binding
}

// Clone returns a deep copy.
func (c Catalog) Clone() Catalog {
	return Catalog{Streams: slices.Clone(c.Streams), Bindings: slices.Clone(c.Bindings)}
}

// Stream returns the named stream.
func (c Catalog) Stream(name string) (Stream, bool) {
	i, ok := slices.BinarySearchFunc(c.Streams, name, func(s Stream, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return Stream{}, false
	}
	return c.Streams[i], true
}

// Put adds a stream or replaces the one of the same name.
func (c *Catalog) Put(s Stream) {
	i, ok := slices.BinarySearchFunc(c.Streams, s.Name, func(x Stream, n string) int { return strings.Compare(x.Name, n) })
	if ok {
		c.Streams[i] = s
		return
	}
	c.Streams = slices.Insert(c.Streams, i, s)
}

// Remove deletes a stream and every binding to it; it reports whether
// the stream existed.
func (c *Catalog) Remove(name string) bool {
	before := len(c.Streams)
	c.Streams = slices.DeleteFunc(c.Streams, func(s Stream) bool { return s.Name == name })
	c.Bindings = slices.DeleteFunc(c.Bindings, func(b Binding) bool { return b.Stream == name })
	return len(c.Streams) != before
}

// Bind adds or replaces the binding of a pattern.
func (c *Catalog) Bind(b Binding) {
	i, ok := slices.BinarySearchFunc(c.Bindings, b.Pattern, func(x Binding, p string) int { return strings.Compare(x.Pattern, p) })
	if ok {
		c.Bindings[i] = b
		return
	}
	c.Bindings = slices.Insert(c.Bindings, i, b)
}

// Unbind removes the binding of a pattern; it reports whether there was
// one.
func (c *Catalog) Unbind(pattern string) bool {
	before := len(c.Bindings)
	c.Bindings = slices.DeleteFunc(c.Bindings, func(b Binding) bool { return b.Pattern == pattern })
	return len(c.Bindings) != before
}

// BindingsOf returns the bindings routing to one stream.
func (c Catalog) BindingsOf(stream string) []Binding {
	var out []Binding
	for _, b := range c.Bindings {
		if b.Stream == stream {
			out = append(out, b)
		}
	}
	return out
}

// MaxPatternLength bounds a binding pattern in bytes; package subject
// enforces its own (smaller) bound on what the broker accepts.
const MaxPatternLength = 4096

// MaxPartitions bounds a stream's partition count. The wire protocol
// carries the same bound (wire.MaxPartitions; package session checks they
// agree) without the engine depending on the protocol.
const MaxPartitions = 1024

// MaxReplicas bounds a stream's replication factor.
const MaxReplicas = 7

// ValidateStream checks one stream's settings.
func ValidateStream(s Stream) error {
	if err := segment.ValidateStreamName(s.Name); err != nil {
		return fmt.Errorf("%w: stream name: %w", ErrInvalid, err)
	}
	if s.Partitions < 1 || s.Partitions > MaxPartitions {
		return fmt.Errorf("%w: stream %s: %d partitions (want 1..%d)", ErrInvalid, s.Name, s.Partitions, MaxPartitions)
	}
	if s.MaxAge < 0 {
		return fmt.Errorf("%w: stream %s: negative max age %v", ErrInvalid, s.Name, s.MaxAge)
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		return fmt.Errorf("%w: stream %s: %d replicas (want 1..%d)", ErrInvalid, s.Name, s.Replicas, MaxReplicas)
	}
	if s.DedupWindow < DedupOff || s.DedupWindow > MaxDedupWindow {
		return fmt.Errorf("%w: stream %s: dedup window %v (want 0 for off, up to %v)", ErrInvalid, s.Name, s.DedupWindow, MaxDedupWindow)
	}
	if s.DeleteRetention < 0 || (!s.Compact && (s.DeleteRetention > 0 || s.CompactPastGroups)) {
		return fmt.Errorf("%w: stream %s: delete retention %v and compacting past groups need a compacted stream and a positive duration", ErrInvalid, s.Name, s.DeleteRetention)
	}
	return nil
}

// Validate checks every invariant of the package doc; Store never keeps
// a catalog that fails it.
func (c *Catalog) Validate() error {
	for i, s := range c.Streams {
		if err := ValidateStream(s); err != nil {
			return err
		}
		if i > 0 && c.Streams[i-1].Name >= s.Name {
			return fmt.Errorf("%w: streams out of order or repeated at %q", ErrInvalid, s.Name)
		}
	}
	for i, b := range c.Bindings {
		if b.Pattern == "" || len(b.Pattern) > MaxPatternLength {
			return fmt.Errorf("%w: binding pattern of %d bytes", ErrInvalid, len(b.Pattern))
		}
		if i > 0 && c.Bindings[i-1].Pattern >= b.Pattern {
			return fmt.Errorf("%w: bindings out of order or repeated at %q", ErrInvalid, b.Pattern)
		}
		if _, ok := c.Stream(b.Stream); !ok {
			return fmt.Errorf("%w: binding %q names stream %q, which does not exist", ErrInvalid, b.Pattern, b.Stream)
		}
	}
	return nil
}
