package datadir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Options configure Open.
type Options struct {
	// Exclusive takes the directory's lock exclusively, which changes
	// need, and finishes what a crash interrupted; otherwise the lock is
	// shared and nothing is written.
	Exclusive bool
	// RefuseDamage fails the open (ErrDamaged) on a damaged catalog
	// instead of falling back to its previous copy.
	RefuseDamage bool
	// Storage configures the logs; Open sets its ReadOnly and, when set
	// here, its Logger.
	Storage segment.Options
	// Logger receives the logs' recovery reports.
	Logger *slog.Logger
}

// Dir is a data directory opened by an offline tool: its lock, logs and
// streams. Not safe for concurrent use.
type Dir struct {
	fs      vfs.FS
	logs    *segment.Dir
	streams *Streams
}

// Open opens the data directory at root. Opening it exclusive creates it
// when missing; opening it shared fails with segment.ErrNotFound then.
// Either fails with segment.ErrLocked while another process (a broker)
// holds the lock in a conflicting mode.
func Open(fsys vfs.FS, root string, opts Options) (*Dir, Recovery, error) {
	storage := opts.Storage
	storage.ReadOnly = !opts.Exclusive
	if opts.Logger != nil {
		storage.Logger = opts.Logger
	}
	logs, err := segment.Open(fsys, root, storage)
	if err != nil {
		return nil, Recovery{}, err
	}
	streams, rec, err := OpenStreams(fsys, logs, StreamsOptions{Shared: !opts.Exclusive, RefuseDamage: opts.RefuseDamage})
	if err != nil {
		_ = logs.Close()
		return nil, rec, err
	}
	return &Dir{fs: fsys, logs: logs, streams: streams}, rec, nil
}

// Close closes the logs and releases the lock.
func (d *Dir) Close() error { return d.logs.Close() }

// Path is the directory's path.
func (d *Dir) Path() string { return d.logs.Path() }

// Streams is the stream side of the directory.
func (d *Dir) Streams() *Streams { return d.streams }

// Catalog returns a copy of the catalog.
func (d *Dir) Catalog() catalog.Catalog { return d.streams.Catalog() }

// Stream returns the named stream: ErrNoSuchStream when there is none.
func (d *Dir) Stream(name string) (catalog.Stream, error) { return d.streams.Stream(name) }

// Logs lists the logs on disk.
func (d *Dir) Logs() ([]segment.LogID, error) { return d.logs.Logs() }

// Log opens an existing log: ErrNoSuchLog (wrapping segment.ErrNotFound)
// when it is not on disk, even in a directory opened exclusive, where
// opening would create it.
func (d *Dir) Log(id segment.LogID) (*segment.Log, error) {
	ids, err := d.logs.Logs()
	if err != nil {
		return nil, fmt.Errorf("datadir: listing the logs of %s: %w", d.Path(), err)
	}
	if !slices.Contains(ids, id) {
		return nil, fmt.Errorf("%w: %s in %s: %w", ErrNoSuchLog, id.String(), d.Path(), segment.ErrNotFound)
	}
	return d.logs.OpenLog(id)
}

// PartitionState is one partition as its log holds it.
type PartitionState struct {
	First, End, Bytes uint64
}

// StreamState describes a stream: its settings, each partition (empty
// when it has no log yet) and how many groups its partitions hold.
type StreamState struct {
	Stream     catalog.Stream
	Partitions []PartitionState
	Groups     int
}

// Describe reads a stream's partitions, creating nothing.
func (d *Dir) Describe(s catalog.Stream) StreamState {
	state := StreamState{Stream: s, Partitions: make([]PartitionState, s.Partitions)}
	ids, _ := d.logs.Logs()
	for p := range state.Partitions {
		id := segment.LogID{Stream: s.Name, Partition: uint32(p)}
		if !slices.Contains(ids, id) {
			continue
		}
		l, err := d.logs.OpenLog(id)
		if err != nil {
			continue
		}
		part := PartitionState{First: l.FirstOffset(), End: l.Committed()}
		for _, seg := range l.Segments() {
			part.Bytes += uint64(seg.Bytes)
		}
		state.Partitions[p] = part
		summaries, _ := consumer.Inspect(l)
		state.Groups += len(summaries)
	}
	return state
}

// CreateStream records a stream (Streams.Create) and creates the log of
// every partition. It returns the stream as recorded: the existing one
// when it exists with the same settings.
func (d *Dir) CreateStream(want catalog.Stream) (catalog.Stream, error) {
	s, err := d.streams.Create(want)
	if err != nil {
		return s, err
	}
	for p := range s.Partitions {
		if _, err := d.logs.OpenLog(segment.LogID{Stream: s.Name, Partition: p}); err != nil {
			return s, fmt.Errorf("datadir: creating partition %d of %s: %w", p, s.Name, err)
		}
	}
	return s, nil
}

// RemoveStream removes a stream whole: its partitions with their groups,
// its dead-letter queue and its bindings.
func (d *Dir) RemoveStream(name string) error {
	s, err := d.streams.Stream(name)
	if err != nil {
		return err
	}
	// The logs must be closed before their files go.
	for p := range s.Partitions {
		if l, err := d.Log(segment.LogID{Stream: name, Partition: p}); err == nil {
			_ = l.Close()
		}
	}
	aside, err := d.streams.Remove(name)
	if err != nil {
		return err
	}
	return d.streams.FinishRemoval(name, aside)
}

// PurgeStream drops every record of every partition and keeps the stream:
// each active segment is sealed, then every segment below the seal point
// is deleted. Offsets keep rising.
func (d *Dir) PurgeStream(ctx context.Context, name string) error {
	s, err := d.streams.Stream(name)
	if err != nil {
		return err
	}
	for p := range s.Partitions {
		l, err := d.logs.OpenLog(segment.LogID{Stream: name, Partition: p})
		if err != nil {
			return fmt.Errorf("datadir: opening %s/%d: %w", name, p, err)
		}
		end, err := l.SealActive(ctx)
		if err == nil {
			_, err = l.DeleteBefore(end)
		}
		if err != nil {
			return fmt.Errorf("datadir: purging %s/%d: %w", name, p, err)
		}
	}
	return nil
}

// Bind routes subjects matching pattern to stream (Streams.Bind).
func (d *Dir) Bind(pattern, stream string) error { return d.streams.Bind(pattern, stream) }

// Unbind removes the binding of pattern (Streams.Unbind).
func (d *Dir) Unbind(pattern string) error { return d.streams.Unbind(pattern) }

// Groups returns the groups checkpointed in one log, sorted by name, and
// the log's committed end.
func (d *Dir) Groups(id segment.LogID) ([]consumer.Summary, uint64, error) {
	l, err := d.Log(id)
	if err != nil {
		return nil, 0, err
	}
	summaries, err := consumer.Inspect(l)
	if err != nil {
		return nil, 0, fmt.Errorf("datadir: reading the groups of %s: %w", id.String(), err)
	}
	return summaries, l.Committed(), nil
}

// Group returns one group of a log and the log's committed end:
// ErrNoSuchGroup when the log has no such group.
func (d *Dir) Group(id segment.LogID, name string) (consumer.Summary, uint64, error) {
	l, err := d.Log(id)
	if err != nil {
		return consumer.Summary{}, 0, err
	}
	summary, err := inspectGroup(l, name)
	return summary, l.Committed(), err
}

func inspectGroup(l *segment.Log, name string) (consumer.Summary, error) {
	summary, err := consumer.InspectGroup(l, name)
	if errors.Is(err, consumer.ErrNoGroup) {
		return summary, fmt.Errorf("%w: log %s has no group %q: %w", ErrNoSuchGroup, l.ID().String(), name, err)
	}
	return summary, err
}

// ResetGroup moves a group's cursor to start (ResetLogGroup) and returns
// the group after the change and the log's committed end.
func (d *Dir) ResetGroup(id segment.LogID, name string, start consumer.StartPosition) (consumer.Summary, uint64, error) {
	if !d.writable() {
		return consumer.Summary{}, 0, ErrReadOnly
	}
	l, err := d.Log(id)
	if err != nil {
		return consumer.Summary{}, 0, err
	}
	summary, err := inspectGroup(l, name)
	if err != nil {
		return summary, 0, err
	}
	summary, err = ResetLogGroup(l, summary, start)
	return summary, l.Committed(), err
}

// RemoveGroup deletes a group's checkpoint and returns the group as it
// was and the log's committed end.
func (d *Dir) RemoveGroup(id segment.LogID, name string) (consumer.Summary, uint64, error) {
	if !d.writable() {
		return consumer.Summary{}, 0, ErrReadOnly
	}
	l, err := d.Log(id)
	if err != nil {
		return consumer.Summary{}, 0, err
	}
	summary, err := inspectGroup(l, name)
	if err != nil {
		return summary, 0, err
	}
	if err := consumer.DeleteGroup(l, name); err != nil {
		return summary, 0, err
	}
	return summary, l.Committed(), nil
}

func (d *Dir) writable() bool { return !d.streams.shared }

// ResetLogGroup moves the cursor of the group summary describes, in a log
// opened writable, to start: the group forgets what was acknowledged
// ahead and every delivery count. It returns the group after the change.
func ResetLogGroup(l *segment.Log, summary consumer.Summary, start consumer.StartPosition) (consumer.Summary, error) {
	g, err := consumer.Open(l, summary.Name, consumer.Options{Type: summary.Type})
	if err != nil {
		return summary, err
	}
	if err := g.Reset(start); err != nil {
		_ = g.Close()
		return summary, err
	}
	summary = g.Summary()
	return summary, g.Close()
}

// SettleGroup moves a broadcast group's cursor forward to upTo: every
// offset below it is done for the group. It never moves the cursor back
// (an upTo at or below it changes nothing, so settling is idempotent) and
// refuses an upTo past the log's committed end (ErrOutOfRange) and a
// group of another type (ErrGroupType). It returns the group as it is
// after the call.
func (d *Dir) SettleGroup(id segment.LogID, name string, upTo uint64) (consumer.Summary, error) {
	if !d.writable() {
		return consumer.Summary{}, ErrReadOnly
	}
	l, err := d.Log(id)
	if err != nil {
		return consumer.Summary{}, err
	}
	summary, err := inspectGroup(l, name)
	switch {
	case err != nil:
		return summary, err
	case summary.Type != consumer.TypeBroadcast:
		return summary, fmt.Errorf("%w: group %q is a %s group, not broadcast", ErrGroupType, name, summary.Type)
	case upTo > l.Committed():
		return summary, fmt.Errorf("%w: %d is past the end of log %s (%d)", ErrOutOfRange, upTo, id.String(), l.Committed())
	case upTo <= summary.Committed:
		return summary, nil
	}
	return ResetLogGroup(l, summary, consumer.StartPosition{Kind: consumer.StartOffset, Offset: upTo})
}
