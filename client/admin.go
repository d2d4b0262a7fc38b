package client

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/ironbus/ironbus/wire"
)

// Admin calls: what an operator does to groups and dead-letter queues of
// a running broker. They need the broker's admin capability. The broker
// answers a reset or delete of a group that has live consumers with a
// *wire.Error of code group_active (errors.Is(err, ErrGroupActive)): stop
// the consumers and call again.

// ErrGroupActive matches the broker's refusal to reset or delete a group
// that has live consumers; test with errors.Is.
var ErrGroupActive error = &wire.Error{Code: wire.CodeGroupActive}

// GroupState is a consumer group as the broker reports it: its live state
// when the broker has it open, otherwise its last checkpoint.
type GroupState struct {
	Stream         string
	Partition      uint32
	Group          string
	Type           GroupType
	Committed      uint64 // every offset below it is done
	AckedAhead     uint64 // offsets done above Committed
	Unsettled      int    // records above Committed delivered and not settled
	MostDeliveries uint32 // the highest delivery count among them
	PendingMoves   int    // dead-letter moves begun and not finished
	LogEnd         uint64 // the partition's committed end
	Members        int    // live consumers
	Leased         int    // live leases
}

// DeadLetterQueue is one stream's dead-letter queue.
type DeadLetterQueue struct {
	Stream   string // the source stream; the queue reads as ".dlq.<stream>"
	First    uint64 // the first offset the queue holds
	End      uint64 // the queue's committed end
	Redriven uint64 // every dead letter below it has been redriven
}

// RedriveResult is what a Redrive did.
type RedriveResult struct {
	Republished uint64 // records republished to the stream by this call
	Skipped     uint64 // dead letters found already republished, or not dead letters
	Queue       DeadLetterQueue
}

// ListGroups lists the groups of a stream partition, or of every stream
// when stream is empty.
func (c *Client) ListGroups(ctx context.Context, stream string, partition uint32) ([]GroupState, error) {
	if stream != "" {
		if err := checkName("stream", stream); err != nil {
			return nil, err
		}
	}
	return c.groupAdmin(ctx, &wire.GroupAdmin{Op: wire.GroupOpList, Stream: []byte(stream), Partition: partition})
}

// GroupInfo returns one group; a group that does not exist is a
// *wire.Error of code not_found.
func (c *Client) GroupInfo(ctx context.Context, stream, group string, partition uint32) (GroupState, error) {
	return c.oneGroup(ctx, &wire.GroupAdmin{Op: wire.GroupOpInfo, Stream: []byte(stream), Partition: partition, Group: []byte(group)})
}

// ResetGroup moves a group's cursor to start (clamped to what the
// partition holds), forgetting acked-ahead ranges and delivery counts, and
// returns the group after the reset, durable. It fails with
// ErrGroupActive while the group has consumers.
func (c *Client) ResetGroup(ctx context.Context, stream, group string, partition uint32, start StartPosition) (GroupState, error) {
	m := &wire.GroupAdmin{Op: wire.GroupOpReset, Stream: []byte(stream), Partition: partition, Group: []byte(group),
		TargetKind: uint8(start.Kind)}
	switch start.Kind {
	case StartOffset:
		m.TargetValue = start.Offset
	case StartTime:
		m.TargetValue = uint64(max(start.Time.UnixMilli(), 0))
	case StartEarliest, StartLatest:
	default:
		return GroupState{}, fmt.Errorf("%w: start kind %d", ErrInvalidArgument, start.Kind)
	}
	return c.oneGroup(ctx, m)
}

// DeleteGroup removes a group and its checkpoint, and returns it as it
// was; the next consumer of that name creates it afresh. It fails with
// ErrGroupActive while the group has consumers.
func (c *Client) DeleteGroup(ctx context.Context, stream, group string, partition uint32) (GroupState, error) {
	return c.oneGroup(ctx, &wire.GroupAdmin{Op: wire.GroupOpDelete, Stream: []byte(stream), Partition: partition, Group: []byte(group)})
}

func (c *Client) oneGroup(ctx context.Context, m *wire.GroupAdmin) (GroupState, error) {
	if err := errors.Join(checkName("stream", string(m.Stream)), checkName("group", string(m.Group))); err != nil {
		return GroupState{}, err
	}
	groups, err := c.groupAdmin(ctx, m)
	if err != nil {
		return GroupState{}, err
	}
	if len(groups) != 1 {
		return GroupState{}, fmt.Errorf("%w: the broker answered a group request with %d groups", ErrProtocol, len(groups))
	}
	return groups[0], nil
}

func (c *Client) groupAdmin(ctx context.Context, m *wire.GroupAdmin) ([]GroupState, error) {
	reply, err := c.adminCall(ctx, m)
	if err != nil {
		return nil, err
	}
	list, ok := reply.(*wire.GroupList)
	if !ok {
		return nil, fmt.Errorf("%w: a %s answered GroupAdmin", ErrProtocol, reply.Type())
	}
	groups := make([]GroupState, 0, len(list.Groups))
	for _, g := range list.Groups {
		groups = append(groups, GroupState{Stream: string(g.Stream), Partition: g.Partition, Group: string(g.Group),
			Type: GroupType(g.Mode), Committed: g.Committed, AckedAhead: g.AckedAhead, Unsettled: int(g.Unsettled),
			MostDeliveries: g.MostDeliveries, PendingMoves: int(g.PendingMoves), LogEnd: g.LogEnd,
			Members: int(g.Members), Leased: int(g.Leased)})
	}
	return groups, nil
}

// DeadLetters lists the dead-letter queues: one stream's, or every one
// when stream is empty.
func (c *Client) DeadLetters(ctx context.Context, stream string) ([]DeadLetterQueue, error) {
	state, err := c.deadLetterAdmin(ctx, &wire.DeadLetterAdmin{Op: wire.DeadLetterOpList, Stream: []byte(stream)})
	if err != nil {
		return nil, err
	}
	return queues(state), nil
}

// Redrive republishes up to maxLetters dead letters of stream (0 = all)
// back to the stream, oldest first, with their original key, subject,
// headers and payload plus an ironbus-redriven-from header. It is
// idempotent: the queue remembers how far it was redriven, so a second
// call republishes only dead letters that arrived since.
func (c *Client) Redrive(ctx context.Context, stream string, maxLetters int) (RedriveResult, error) {
	if err := checkName("stream", stream); err != nil {
		return RedriveResult{}, err
	}
	m := &wire.DeadLetterAdmin{Op: wire.DeadLetterOpRedrive, Stream: []byte(stream), Max: uint32(min(int64(max(maxLetters, 0)), math.MaxUint32))}
	state, err := c.deadLetterAdmin(ctx, m)
	if err != nil {
		return RedriveResult{}, err
	}
	result := RedriveResult{Republished: state.Republished, Skipped: state.Skipped}
	if q := queues(state); len(q) == 1 {
		result.Queue = q[0]
	}
	return result, nil
}

func (c *Client) deadLetterAdmin(ctx context.Context, m *wire.DeadLetterAdmin) (*wire.DeadLetterState, error) {
	reply, err := c.adminCall(ctx, m)
	if err != nil {
		return nil, err
	}
	state, ok := reply.(*wire.DeadLetterState)
	if !ok {
		return nil, fmt.Errorf("%w: a %s answered DeadLetterAdmin", ErrProtocol, reply.Type())
	}
	return state, nil
}

func queues(state *wire.DeadLetterState) []DeadLetterQueue {
	out := make([]DeadLetterQueue, 0, len(state.Queues))
	for _, q := range state.Queues {
		out = append(out, DeadLetterQueue{Stream: string(q.Stream), First: q.First, End: q.End, Redriven: q.Redriven})
	}
	return out
}

// adminCall sends one admin request and waits for its decoded answer.
func (c *Client) adminCall(ctx context.Context, m wire.Message) (wire.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.info.Capabilities&wire.CapAdmin == 0 {
		return nil, fmt.Errorf("%w: the broker does not serve admin requests (no admin capability)", ErrInvalidArgument)
	}
	var rd redirect
	for conn := c.routeOf(adminRoute); ; {
		reply, err := conn.request(ctx, m)
		if !redirectable(err) {
			return reply, err
		}
		if conn, err = c.follow(ctx, conn, adminRoute, err, &rd); conn == nil {
			return nil, err
		}
	}
}

// request sends m and waits for its one-frame answer (an admin answer or
// a ProducerInfo), decoded with its names copied.
func (c *Client) request(ctx context.Context, m wire.Message) (wire.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl := getCall()
	id, err := c.register(entry{kind: kindAdmin, call: cl})
	if err != nil {
		putCall(cl)
		return nil, err
	}
	c.enqueue(id, m)
	if err := c.await(ctx, id, cl); err != nil {
		return nil, err
	}
	reply, err := cl.admin, cl.err
	putCall(cl)
	return reply, err
}

// onAdmin completes an admin request. The decoded names alias the read
// buffer, so they are copied before the caller sees them.
func (c *Client) onAdmin(f wire.Frame) error {
	var reply wire.Message
	switch f.Type {
	case wire.TypeGroupList:
		list, err := wire.DecodeGroupList(f.Body)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		for i := range list.Groups {
			list.Groups[i].Stream = append([]byte(nil), list.Groups[i].Stream...)
			list.Groups[i].Group = append([]byte(nil), list.Groups[i].Group...)
		}
		reply = &list
	case wire.TypeStreamList:
		list, err := decodeStreamList(f.Body)
		if err != nil {
			return err
		}
		reply = list
	case wire.TypeProducerInfo:
		info, err := decodeProducerInfo(f.Body)
		if err != nil {
			return err
		}
		reply = info
	case wire.TypeClusterState:
		state, err := decodeClusterState(f.Body)
		if err != nil {
			return err
		}
		reply = state
	case wire.TypeLeaderTransferred:
		moved, err := wire.DecodeLeaderTransferred(f.Body)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		moved.Stream = append([]byte(nil), moved.Stream...)
		reply = &moved
	case wire.TypeStreamCompacted:
		compacted, err := wire.DecodeStreamCompacted(f.Body)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		compacted.Stream = append([]byte(nil), compacted.Stream...)
		reply = &compacted
	default:
		state, err := wire.DecodeDeadLetterState(f.Body)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		for i := range state.Queues {
			state.Queues[i].Stream = append([]byte(nil), state.Queues[i].Stream...)
		}
		reply = &state
	}
	e, ok, err := c.take(f, acceptsAdmin)
	if !ok {
		return err // nil for an abandoned request
	}
	e.call.admin = reply
	e.call.done <- struct{}{}
	return nil
}
