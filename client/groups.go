package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// GroupType is a consumer group's delivery model, fixed when the group
// is created (the broker refuses another type for an existing group with
// a *wire.Error of code group_mode_mismatch).
type GroupType uint8

// Group types. The zero value means GroupWork.
const (
	// GroupWork: competing consumers; each record is leased to one of
	// them until acked, nacked, or its lease expires.
	GroupWork = GroupType(wire.ModeWork)
	// GroupKeyShared: competing consumers; each record key belongs to one
	// connection at a time, which gets that key's records one at a time,
	// in offset order.
	GroupKeyShared = GroupType(wire.ModeKeyShared)
	// GroupBroadcast: one reader at a time, no leases; the reader settles
	// with CumulativeAck.
	GroupBroadcast = GroupType(wire.ModeBroadcast)
	// GroupStreaming: no leases; the connection reads on from the group's
	// committed position and stores its position with Commit.
	GroupStreaming = GroupType(wire.ModeStreaming)
)

func (t GroupType) mode() uint8 {
	if t == 0 {
		return wire.ModeWork
	}
	return uint8(t)
}

func (t GroupType) String() string {
	switch t.mode() {
	case wire.ModeWork:
		return "work"
	case wire.ModeKeyShared:
		return "key-shared"
	case wire.ModeBroadcast:
		return "broadcast"
	case wire.ModeStreaming:
		return "streaming"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// StartKind says where a new group starts.
type StartKind uint8

// Start kinds. The zero value starts at the earliest record.
const (
	StartEarliest = StartKind(wire.StartEarliest) // the first record the partition holds
	StartLatest   = StartKind(wire.StartLatest)   // only records stored after the group is created
	StartOffset   = StartKind(wire.StartOffset)   // StartPosition.Offset (clamped to what is held)
	StartTime     = StartKind(wire.StartTime)     // the first record stored at or after StartPosition.Time
)

// StartPosition is where a group begins when OpenGroup creates it; it is
// ignored for a group that exists.
type StartPosition struct {
	Kind   StartKind
	Offset uint64    // StartOffset
	Time   time.Time // StartTime: compared with the broker's stored timestamps, to the millisecond
}

// GroupOptions shape OpenGroup.
type GroupOptions struct {
	Partition uint32 // a partition, or AllPartitions
	Type      GroupType
	Start     StartPosition
	// Filter is the group's subject pattern, fixed when the group is
	// created: its consumers get only matching records (and GapFiltered
	// gaps for the rest), whatever filter they ask for.
	Filter string
}

// GroupInfo describes an open group.
type GroupInfo struct {
	Type      GroupType
	Committed uint64 // every offset below it is done
}

// OpenGroup opens a consumer group of a stream partition, creating it
// with opts.Type and opts.Start if it does not exist yet; opening is
// idempotent. A group that exists with another type is refused with a
// *wire.Error of code group_mode_mismatch naming both types.
func (c *Client) OpenGroup(ctx context.Context, stream, group string, opts GroupOptions) (GroupInfo, error) {
	if err := ctx.Err(); err != nil {
		return GroupInfo{}, err
	}
	if err := errors.Join(checkName("stream", stream), checkName("group", group), c.needGroups(),
		c.consumeScope(opts.Partition, opts.Filter)); err != nil {
		return GroupInfo{}, err
	}
	msg := &wire.OpenGroup{Stream: []byte(stream), Partition: opts.Partition, Group: []byte(group),
		Mode: opts.Type.mode(), StartKind: uint8(opts.Start.Kind)}
	if opts.Filter != "" {
		msg.Filter = []byte(opts.Filter)
	}
	switch opts.Start.Kind {
	case StartOffset:
		msg.StartValue = opts.Start.Offset
	case StartTime:
		msg.StartValue = uint64(max(opts.Start.Time.UnixMilli(), 0))
	case StartEarliest, StartLatest:
	default:
		return GroupInfo{}, fmt.Errorf("%w: start kind %d", ErrInvalidArgument, opts.Start.Kind)
	}
	key := streamPartition{stream: stream, partition: opts.Partition}
	var rd redirect
	for conn := c.routeOf(key); ; {
		info, err := conn.openGroupOn(ctx, msg)
		if !redirectable(err) {
			return info, err
		}
		if conn, err = c.follow(ctx, conn, key, err, &rd); conn == nil {
			return GroupInfo{}, err
		}
	}
}

// openGroupOn sends an OpenGroup on this connection and waits for its
// answer.
func (c *Client) openGroupOn(ctx context.Context, msg *wire.OpenGroup) (GroupInfo, error) {
	cl := getCall()
	id, err := c.register(entry{kind: kindOpenGroup, call: cl})
	if err != nil {
		putCall(cl)
		return GroupInfo{}, err
	}
	c.enqueue(id, msg)
	if err := c.await(ctx, id, cl); err != nil {
		return GroupInfo{}, err
	}
	info, err := cl.group, cl.err
	putCall(cl)
	return info, err
}

// needGroups fails a call that needs the broker's groups capability when
// the connection does not have it (an older broker).
func (c *Client) needGroups() error {
	if c.info.Capabilities&wire.CapGroups == 0 {
		return fmt.Errorf("%w: the broker does not serve group types, start positions or ack ops beyond ack and nack (no groups capability)", ErrInvalidArgument)
	}
	return nil
}

// Extend tells the broker messages are still being processed: each lease
// now ends visibility from now (0 = the group's visibility), never later
// than the hard cap of the attempt (AckCapped says the cap cut it short).
func (c *Client) Extend(ctx context.Context, stream, group string, visibility time.Duration, messages ...Message) ([]AckStatus, error) {
	if err := c.needGroups(); err != nil {
		return nil, err
	}
	return c.acknowledge(ctx, stream, group, wire.AckExtend, clampMillis(visibility), messages)
}

// Term settles messages without processing them and without the
// dead-letter queue: they will never be delivered to the group again.
func (c *Client) Term(ctx context.Context, stream, group string, messages ...Message) ([]AckStatus, error) {
	if err := c.needGroups(); err != nil {
		return nil, err
	}
	return c.acknowledge(ctx, stream, group, wire.AckTerm, 0, messages)
}

// Reject moves messages to the stream's dead-letter queue now, whatever
// their attempt: they can never be processed. The call returns once the
// dead letters are durable.
func (c *Client) Reject(ctx context.Context, stream, group string, messages ...Message) ([]AckStatus, error) {
	if err := c.needGroups(); err != nil {
		return nil, err
	}
	return c.acknowledge(ctx, stream, group, wire.AckReject, 0, messages)
}

// AckRange acknowledges every record of partition with from ≤ offset < to
// that is leased to this connection (records leased to others are left
// alone). AckOK means at least one was acknowledged, AckUnknown none.
func (c *Client) AckRange(ctx context.Context, stream, group string, partition uint32, from, to uint64) (AckStatus, error) {
	return c.positionOp(ctx, stream, group, partition, wire.AckRange, wire.AckEntry{Offset: from, Lease: to})
}

// CumulativeAck settles a broadcast group up to upTo: every offset below
// it is done. It is idempotent; AckOutOfRange means upTo is past what the
// reader was given.
func (c *Client) CumulativeAck(ctx context.Context, stream, group string, partition uint32, upTo uint64) (AckStatus, error) {
	return c.positionOp(ctx, stream, group, partition, wire.AckCumulative, wire.AckEntry{Offset: upTo})
}

// Commit stores a streaming group's position: every offset below offset
// is done, and a new connection reads on from there. AckOutOfRange means
// offset is past the partition's end.
func (c *Client) Commit(ctx context.Context, stream, group string, partition uint32, offset uint64) (AckStatus, error) {
	return c.positionOp(ctx, stream, group, partition, wire.AckCommit, wire.AckEntry{Offset: offset})
}

// positionOp sends a one-entry Ack whose entry is not a lease.
func (c *Client) positionOp(ctx context.Context, stream, group string, partition uint32, op uint8, e wire.AckEntry) (AckStatus, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := errors.Join(checkName("stream", stream), checkName("group", group), c.needGroups()); err != nil {
		return 0, err
	}
	statuses, err := c.ackRequest(ctx, &wire.Ack{Stream: []byte(stream), Partition: partition, Group: []byte(group),
		Op: op, Entries: []wire.AckEntry{e}})
	if err != nil {
		return 0, err
	}
	return statuses[0], nil
}

// clampCount converts a positive count to a u32 field.
func clampCount(n int) uint32 { return uint32(min(int64(n), math.MaxUint32)) }
