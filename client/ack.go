package client

import (
	"context"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// AckStatus is the outcome of acknowledging (or returning) one message.
type AckStatus int

// Ack statuses. Stale and unknown are not errors of the call: the other
// messages of the same call still took effect.
const (
	// AckOK: the message was committed (Ack) or returned (Nack).
	AckOK = AckStatus(wire.AckOK)
	// AckStale: the lease is not the current one: it expired and the
	// record was leased again (perhaps to another consumer). Nothing
	// changed; whoever holds the current lease acks it.
	AckStale = AckStatus(wire.AckStale)
	// AckUnknown: the record is not leased: already acknowledged, or
	// never delivered.
	AckUnknown = AckStatus(wire.AckUnknown)
	// AckExpired: the lease lapsed (its time ran out, or the connection
	// holding it closed). Nothing changed; the record is delivered again.
	AckExpired = AckStatus(wire.AckExpired)
	// AckCapped: Extend renewed the lease, but only up to the hard cap of
	// the attempt (5 minutes from its delivery): finish or give it back.
	AckCapped = AckStatus(wire.AckCapped)
	// AckOutOfRange: CumulativeAck or Commit named an offset past what
	// the group can have seen; nothing changed.
	AckOutOfRange = AckStatus(wire.AckOutOfRange)
)

func (s AckStatus) String() string {
	switch s {
	case AckOK:
		return "ok"
	case AckStale:
		return "stale"
	case AckUnknown:
		return "unknown"
	case AckExpired:
		return "expired"
	case AckCapped:
		return "capped"
	case AckOutOfRange:
		return "out_of_range"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Ack commits messages delivered by Fetch to group: they are never
// delivered to the group again. It returns one status per message, in
// order. Messages of several partitions (from an AllPartitions
// consumer) are grouped into one request per partition, and more than
// the protocol's 4,096 per request into several; on an error the
// statuses of the requests that completed are returned with it (the
// others are left zero, AckOK, so read the error first).
func (c *Client) Ack(ctx context.Context, stream, group string, messages ...Message) ([]AckStatus, error) {
	return c.acknowledge(ctx, stream, group, wire.AckDone, 0, messages)
}

// Nack returns messages to group for redelivery after delay; a negative
// delay asks for the group's backoff schedule. Statuses as for Ack.
func (c *Client) Nack(ctx context.Context, stream, group string, delay time.Duration, messages ...Message) ([]AckStatus, error) {
	delayMs := uint32(wire.NackDefaultDelay)
	if delay >= 0 {
		delayMs = clampMillis(delay)
	}
	return c.acknowledge(ctx, stream, group, wire.AckNack, delayMs, messages)
}

func (c *Client) acknowledge(ctx context.Context, stream, group string, op uint8, delayMs uint32, messages []Message) ([]AckStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkName("stream", stream); err != nil {
		return nil, err
	}
	if err := checkName("group", group); err != nil {
		return nil, err
	}
	for i := range messages {
		if s := messages[i].Stream; s != "" && s != stream {
			return nil, fmt.Errorf("%w: message %d is from stream %q, not %q", ErrInvalidArgument, i, s, stream)
		}
	}
	statuses := make([]AckStatus, len(messages))
	for _, run := range partitionRuns(messages) {
		msg := &wire.Ack{Stream: []byte(stream), Partition: run.partition, Group: []byte(group),
			Op: op, DelayMs: delayMs, Entries: make([]wire.AckEntry, len(run.indexes))}
		for i, index := range run.indexes {
			msg.Entries[i] = wire.AckEntry{Offset: messages[index].Offset, Lease: messages[index].Lease}
		}
		got, err := c.ackRequest(ctx, msg)
		for i, status := range got {
			statuses[run.indexes[i]] = status
		}
		if err != nil {
			return statuses, err
		}
	}
	return statuses, nil
}

// single reports whether messages fit one Ack frame: one partition, at
// most wire.MaxAckEntries (the common case, taken without a map).
func single(messages []Message) bool {
	if len(messages) == 0 || len(messages) > wire.MaxAckEntries {
		return false
	}
	for _, m := range messages[1:] {
		if m.Partition != messages[0].Partition {
			return false
		}
	}
	return true
}

// ackRun is the messages of one Ack frame: one partition (a frame names
// one), at most wire.MaxAckEntries, as indexes into the caller's slice.
type ackRun struct {
	partition uint32
	indexes   []int
}

// partitionRuns groups messages by partition, in the order each
// partition first appears, so messages of an AllPartitions consumer
// settle in one request per partition however they interleave.
func partitionRuns(messages []Message) []ackRun {
	if single(messages) {
		run := ackRun{partition: messages[0].Partition, indexes: make([]int, len(messages))}
		for i := range run.indexes {
			run.indexes[i] = i
		}
		return []ackRun{run}
	}
	var runs []ackRun
	open := map[uint32]int{} // partition → its run still taking entries
	for index, m := range messages {
		at, ok := open[m.Partition]
		if !ok || len(runs[at].indexes) == wire.MaxAckEntries {
			at = len(runs)
			open[m.Partition] = at
			runs = append(runs, ackRun{partition: m.Partition})
		}
		runs[at].indexes = append(runs[at].indexes, index)
	}
	return runs
}

func (c *Client) ackRequest(ctx context.Context, msg *wire.Ack) ([]AckStatus, error) {
	key := streamPartition{stream: string(msg.Stream), partition: msg.Partition}
	var rd redirect
	for conn := c.routeOf(key); ; {
		statuses, err := conn.ackOn(ctx, msg)
		if !redirectable(err) {
			return statuses, err
		}
		if conn, err = c.follow(ctx, conn, key, err, &rd); conn == nil {
			return nil, err
		}
	}
}

// ackOn sends an Ack on this connection and waits for its statuses.
func (c *Client) ackOn(ctx context.Context, msg *wire.Ack) ([]AckStatus, error) {
	cl := getCall()
	cl.want = len(msg.Entries)
	id, err := c.register(entry{kind: kindAck, call: cl})
	if err != nil {
		putCall(cl)
		return nil, err
	}
	c.enqueueAwaited(id, msg)
	if err := c.await(ctx, id, cl); err != nil {
		return nil, err
	}
	statuses, err := cl.statuses, cl.err
	putCall(cl)
	return statuses, err
}

// Ping measures the round trip to the server.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cl := getCall()
	sent := c.now()
	cl.payload = uint64(sent)
	id, err := c.register(entry{kind: kindPing, call: cl})
	if err != nil {
		putCall(cl)
		return 0, err
	}
	c.enqueue(id, &wire.Ping{Payload: uint64(sent)})
	if err := c.await(ctx, id, cl); err != nil {
		return 0, err
	}
	err = cl.err
	putCall(cl)
	if err != nil {
		return 0, err
	}
	return time.Duration(c.now() - sent), nil
}
