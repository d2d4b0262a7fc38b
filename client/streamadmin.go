package client

import (
	"context"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Stream admin calls: named streams and subject bindings of a running
// broker (admin and streams capabilities). Changes return once the
// broker made them durable.

// StreamSettings are what CreateStream asks for. Zero bounds take the
// broker's default retention; zero partitions means one.
type StreamSettings struct {
	Partitions uint32
	MaxBytes   uint64        // retention bound per partition, bytes
	MaxAge     time.Duration // retention bound by record age (millisecond resolution)
	MaxRecords uint64        // retention bound per partition, records
	// Compact keeps only the latest record per key in sealed segments;
	// DeleteRetention is how long it keeps a tombstone (zero: the
	// broker's default, 24 hours). Both need a broker with the producers
	// capability.
	Compact         bool
	DeleteRetention time.Duration
	// CompactPastGroups (with Compact) lets compaction remove records a
	// consumer group has not committed; by default it never does.
	CompactPastGroups bool
	// DedupWindow is how long the stream remembers message ids
	// (Record.MessageID): zero takes the broker's default (2 minutes), a
	// negative value turns message-id dedup off; at most 24 hours. Needs
	// a broker with the producers capability.
	DedupWindow time.Duration
	// Replicas is the replication factor (0 or 1: one copy). More than
	// one needs a cluster member (the cluster capability); the stream is
	// then created through the cluster's metadata group, and a create sent
	// to another node follows it there.
	Replicas int
}

// StreamPartition is one partition of a stream.
type StreamPartition struct {
	First uint64 // the first offset it still holds
	End   uint64 // its committed end
	Bytes uint64 // bytes of its segments on disk
}

// StreamState is a stream as the broker reports it.
type StreamState struct {
	Name       string
	Created    time.Time // zero for a stream made by its first publish
	MaxBytes   uint64    // retention bounds; 0 = the broker's default
	MaxAge     time.Duration
	MaxRecords uint64
	Groups     int // consumer groups over all partitions
	Partitions []StreamPartition
	Bindings   []Binding // the subject patterns routed to it
	// Compact and the delete retention in force, from a broker with the
	// producers capability.
	Compact           bool
	DeleteRetention   time.Duration
	CompactPastGroups bool
	// DedupWindow is how long the stream remembers message ids (0: off,
	// or a broker without the producers capability).
	DedupWindow time.Duration
	// Replicas is the replication factor of a replicated stream (0: one
	// copy, or a broker without the cluster capability).
	Replicas int
}

// CompactedPartition is what compacting one partition did.
type CompactedPartition struct {
	RecordsRemoved    uint64 // tombstones included
	TombstonesRemoved uint64
	RecordsKept       uint64 // in the sealed segments, after
	BytesBefore       uint64 // of the sealed segments
	BytesAfter        uint64
	Segments          int // sealed segments rewritten
	Passes            int // key-map passes
}

// Binding routes subjects matching Pattern to Stream.
type Binding struct {
	Pattern string
	Stream  string
}

// CreateStream creates a stream and returns it. The same settings again
// are not an error; other settings for an existing stream are a
// *wire.Error of code conflict.
func (c *Client) CreateStream(ctx context.Context, name string, settings StreamSettings) (StreamState, error) {
	if settings.MaxAge < 0 || settings.DeleteRetention < 0 {
		return StreamState{}, fmt.Errorf("%w: negative max age %v or delete retention %v", ErrInvalidArgument, settings.MaxAge, settings.DeleteRetention)
	}
	m := &wire.StreamAdmin{Op: wire.StreamOpCreate, Stream: []byte(name), Partitions: settings.Partitions,
		MaxBytes: settings.MaxBytes, MaxAgeMs: uint64(settings.MaxAge.Milliseconds()), MaxRecords: settings.MaxRecords}
	if settings.Compact {
		if c.info.Capabilities&wire.CapProducers == 0 {
			return StreamState{}, fmt.Errorf("%w: the broker does not serve compacted streams (no producers capability)", ErrInvalidArgument)
		}
		m.Settings, m.DeleteRetentionMs = wire.StreamCompact, uint64(settings.DeleteRetention.Milliseconds())
		if settings.CompactPastGroups {
			m.Settings |= wire.StreamCompactPastGroups
		}
	} else if settings.DeleteRetention != 0 || settings.CompactPastGroups {
		return StreamState{}, fmt.Errorf("%w: a delete retention or compacting past groups needs a compacted stream", ErrInvalidArgument)
	}
	if settings.DedupWindow != 0 {
		if c.info.Capabilities&wire.CapProducers == 0 {
			return StreamState{}, fmt.Errorf("%w: the broker does not keep message-id windows (no producers capability)", ErrInvalidArgument)
		}
		m.Settings |= wire.StreamDedupWindowSet
		m.DedupWindowMs = uint64(max(settings.DedupWindow, 0).Milliseconds())
	}
	if settings.Replicas > 1 {
		if c.info.Capabilities&wire.CapCluster == 0 {
			return StreamState{}, fmt.Errorf("%w: %d replicas need a cluster member (this broker has no cluster capability)", ErrInvalidArgument, settings.Replicas)
		}
		if settings.Replicas > 255 {
			return StreamState{}, fmt.Errorf("%w: %d replicas", ErrInvalidArgument, settings.Replicas)
		}
		m.Settings |= wire.StreamReplicated
		m.Replicas = uint8(settings.Replicas)
	}
	return c.oneStream(ctx, m)
}

// CompactStream seals the active segment of each partition of a
// compacted stream and compacts it now; it returns what each partition's
// compaction did. A stream that is not compacted is a *wire.Error of
// code invalid_request.
func (c *Client) CompactStream(ctx context.Context, name string) ([]CompactedPartition, error) {
	if err := checkName("stream", name); err != nil {
		return nil, err
	}
	if c.info.Capabilities&wire.CapStreams == 0 {
		return nil, fmt.Errorf("%w: the broker does not serve stream admin requests (no streams capability)", ErrInvalidArgument)
	}
	reply, err := c.adminCall(ctx, &wire.StreamAdmin{Op: wire.StreamOpCompact, Stream: []byte(name)})
	if err != nil {
		return nil, err
	}
	compacted, ok := reply.(*wire.StreamCompacted)
	if !ok {
		return nil, fmt.Errorf("%w: a %s answered a compaction", ErrProtocol, reply.Type())
	}
	out := make([]CompactedPartition, 0, len(compacted.Partitions))
	for _, p := range compacted.Partitions {
		out = append(out, CompactedPartition{RecordsRemoved: p.RecordsRemoved, TombstonesRemoved: p.TombstonesRemoved,
			RecordsKept: p.RecordsKept, BytesBefore: p.BytesBefore, BytesAfter: p.BytesAfter, Segments: int(p.Segments), Passes: int(p.Passes)})
	}
	return out, nil
}

// Streams lists every stream, sorted by name, each with its bindings.
func (c *Client) Streams(ctx context.Context) ([]StreamState, error) {
	list, err := c.streamAdmin(ctx, &wire.StreamAdmin{Op: wire.StreamOpList})
	if err != nil {
		return nil, err
	}
	return streamStates(list), nil
}

// StreamInfo returns one stream; one that does not exist is a
// *wire.Error of code not_found.
func (c *Client) StreamInfo(ctx context.Context, name string) (StreamState, error) {
	return c.oneStream(ctx, &wire.StreamAdmin{Op: wire.StreamOpInfo, Stream: []byte(name)})
}

// PurgeStream drops every record of every partition of a stream and
// returns it after the purge. Offsets keep rising: the first offset
// becomes the committed end, and groups behind it get a retention gap.
func (c *Client) PurgeStream(ctx context.Context, name string) (StreamState, error) {
	return c.oneStream(ctx, &wire.StreamAdmin{Op: wire.StreamOpPurge, Flags: wire.StreamForce, Stream: []byte(name)})
}

// RemoveStream deletes a stream with its partitions, groups, dead-letter
// queue and bindings, and returns it as it was. It fails with
// ErrGroupActive while a group of the stream has consumers.
func (c *Client) RemoveStream(ctx context.Context, name string) (StreamState, error) {
	return c.oneStream(ctx, &wire.StreamAdmin{Op: wire.StreamOpRemove, Flags: wire.StreamForce, Stream: []byte(name)})
}

// Bind routes subjects matching pattern to stream and returns every
// binding. A pattern some subject could match together with a binding
// to another stream is a *wire.Error of code conflict naming it.
func (c *Client) Bind(ctx context.Context, pattern, stream string) ([]Binding, error) {
	if err := checkName("stream", stream); err != nil {
		return nil, err
	}
	list, err := c.streamAdmin(ctx, &wire.StreamAdmin{Op: wire.StreamOpBind, Stream: []byte(stream), Pattern: []byte(pattern)})
	if err != nil {
		return nil, err
	}
	return bindings(list.Bindings), nil
}

// Unbind removes the binding of pattern and returns the bindings left;
// no such binding is a *wire.Error of code not_found.
func (c *Client) Unbind(ctx context.Context, pattern string) ([]Binding, error) {
	list, err := c.streamAdmin(ctx, &wire.StreamAdmin{Op: wire.StreamOpUnbind, Pattern: []byte(pattern)})
	if err != nil {
		return nil, err
	}
	return bindings(list.Bindings), nil
}

// Bindings returns every subject binding, sorted by pattern.
func (c *Client) Bindings(ctx context.Context) ([]Binding, error) {
	list, err := c.streamAdmin(ctx, &wire.StreamAdmin{Op: wire.StreamOpList})
	if err != nil {
		return nil, err
	}
	return bindings(list.Bindings), nil
}

func (c *Client) oneStream(ctx context.Context, m *wire.StreamAdmin) (StreamState, error) {
	if err := checkName("stream", string(m.Stream)); err != nil {
		return StreamState{}, err
	}
	list, err := c.streamAdmin(ctx, m)
	if err != nil {
		return StreamState{}, err
	}
	if len(list.Streams) != 1 {
		return StreamState{}, fmt.Errorf("%w: the broker answered a stream request with %d streams", ErrProtocol, len(list.Streams))
	}
	return streamStates(list)[0], nil
}

func (c *Client) streamAdmin(ctx context.Context, m *wire.StreamAdmin) (*wire.StreamList, error) {
	if c.info.Capabilities&wire.CapStreams == 0 {
		return nil, fmt.Errorf("%w: the broker does not serve stream admin requests (no streams capability)", ErrInvalidArgument)
	}
	reply, err := c.adminCall(ctx, m)
	if err != nil {
		return nil, err
	}
	list, ok := reply.(*wire.StreamList)
	if !ok {
		return nil, fmt.Errorf("%w: a %s answered StreamAdmin", ErrProtocol, reply.Type())
	}
	return list, nil
}

// decodeStreamList decodes a StreamList answer, copying every name out
// of the read buffer.
func decodeStreamList(body []byte) (*wire.StreamList, error) {
	list, err := wire.DecodeStreamList(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	for i := range list.Streams {
		list.Streams[i].Name = append([]byte(nil), list.Streams[i].Name...)
	}
	for i := range list.Bindings {
		list.Bindings[i].Pattern = append([]byte(nil), list.Bindings[i].Pattern...)
		list.Bindings[i].Stream = append([]byte(nil), list.Bindings[i].Stream...)
	}
	return &list, nil
}

func streamStates(list *wire.StreamList) []StreamState {
	out := make([]StreamState, 0, len(list.Streams))
	for _, s := range list.Streams {
		state := StreamState{Name: string(s.Name), MaxBytes: s.MaxBytes, MaxAge: time.Duration(min(s.MaxAgeMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond,
			MaxRecords: s.MaxRecords, Groups: int(s.Groups), Partitions: make([]StreamPartition, 0, len(s.Partitions)), Bindings: []Binding{}}
		if s.CreatedMs != 0 {
			state.Created = time.UnixMilli(int64(min(s.CreatedMs, 1<<62))).UTC()
		}
		state.DedupWindow = time.Duration(min(s.DedupWindowMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
		if s.Settings&wire.StreamCompact != 0 {
			state.Compact = true
			state.DeleteRetention = time.Duration(min(s.DeleteRetentionMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
			state.CompactPastGroups = s.Settings&wire.StreamCompactPastGroups != 0
		}
		if s.Settings&wire.StreamReplicated != 0 {
			state.Replicas = int(s.Replicas)
		}
		for _, p := range s.Partitions {
			state.Partitions = append(state.Partitions, StreamPartition(p))
		}
		for _, b := range list.Bindings {
			if string(b.Stream) == state.Name {
				state.Bindings = append(state.Bindings, Binding{Pattern: string(b.Pattern), Stream: string(b.Stream)})
			}
		}
		out = append(out, state)
	}
	return out
}

func bindings(list []wire.StreamBinding) []Binding {
	out := make([]Binding, 0, len(list))
	for _, b := range list {
		out = append(out, Binding{Pattern: string(b.Pattern), Stream: string(b.Stream)})
	}
	return out
}
