package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ironbus/ironbus/wire"
)

// PublishBatch stores records atomically in one partition: the broker
// makes all of them visible together, at consecutive offsets, or none of
// them (also across a broker crash in the middle of the batch). It
// returns one Ack per record, in order, or one error and no Acks: a
// refused record refuses the whole batch (a *wire.Error, batch_incomplete
// naming the record and the reason, when the broker refused one record
// or the batch is over its limits). When ctx ends or the connection
// breaks first, the batch may or may not have been stored, whole.
//
// For a ToStream destination whose partition count the client can read,
// the records' keys must hash to one partition (checked here, refused
// with ErrInvalidArgument), and the batch is sent to it.
//
// The batch travels as consecutive Produce frames sharing a batch id of
// the connection, the last one flagged commit; its records are not
// stamped for idempotence (a conditional first record, ExpectLastOffset,
// makes a resend safe). It needs a broker with the producers capability,
// and at most Client.Window records (and the broker's batch limits).
func (c *Client) PublishBatch(ctx context.Context, d Destination, records []Record) ([]Ack, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case !c.producersServed():
		return nil, fmt.Errorf("%w: an atomic batch needs a broker with the producers capability", ErrInvalidArgument)
	case len(records) == 0:
		return nil, fmt.Errorf("%w: an empty batch", ErrInvalidArgument)
	case len(records) > c.Window():
		// The broker answers a batch at its commit, so all of it must fit
		// in the window at once.
		return nil, fmt.Errorf("%w: a batch of %d records, the window holds %d", ErrInvalidArgument, len(records), c.Window())
	}
	// A member that does not lead the partition refuses the whole batch,
	// so it goes whole to the leader.
	key := c.produceRoute(d, records[0].Key)
	var rd redirect
	for conn := c.routeOf(key); ; {
		acks, err := conn.publishBatchOn(ctx, d, records)
		if !redirectable(err) {
			return acks, err
		}
		if conn, err = c.follow(ctx, conn, key, err, &rd); conn == nil {
			return nil, err
		}
	}
}

// publishBatchOn sends an atomic batch on this connection: PublishBatch
// without leader following.
func (c *Client) publishBatchOn(ctx context.Context, d Destination, records []Record) ([]Ack, error) {
	if len(records) > c.Window() {
		return nil, fmt.Errorf("%w: a batch of %d records, the window of %s holds %d", ErrInvalidArgument, len(records), c.addr, c.Window())
	}
	t, err := c.resolve(d, nil)
	if err != nil {
		return nil, err
	}
	if t.partition, err = c.batchPartition(ctx, t, d.stream, records); err != nil {
		return nil, err
	}
	batchID := c.batchID.Add(1)
	frames, err := c.encodeBatch(t, batchID, records)
	if err != nil {
		return nil, err
	}
	calls, ids, err := c.registerBatch(ctx, len(records))
	if err != nil {
		return nil, err
	}
	for i, frame := range frames {
		// The frame header is length (4), type (1), then the request id.
		binary.LittleEndian.PutUint32(frame[5:9], ids[i])
	}
	c.enqueueFrames(frames)
	acks := make([]Ack, len(records))
	var first error
	for i, cl := range calls {
		if err := c.await(ctx, ids[i], cl); err != nil {
			return nil, err
		}
		acks[i] = cl.ack
		if cl.err != nil && first == nil {
			first = cl.err
		}
		putCall(cl)
	}
	if first != nil {
		return nil, first
	}
	return acks, nil
}

// batchPartition is the partition a batch to t is sent to. A batch goes
// to one partition, so for a ToStream destination whose partition count
// is known the keys must agree, and the batch is sent to their partition;
// otherwise the broker picks (and refuses a batch that would span two).
func (c *Client) batchPartition(ctx context.Context, t target, stream string, records []Record) (uint32, error) {
	if t.bySubject || t.partition != AnyPartition {
		return t.partition, nil
	}
	count, err := c.partitionCount(ctx, stream)
	if err != nil || count == 0 {
		return t.partition, err
	}
	if count == 1 {
		return 0, nil
	}
	partition, first := AnyPartition, 0
	for i, r := range records {
		p := AnyPartition // keyless: the connection's own partition
		if len(r.Key) > 0 {
			p = wire.PartitionForKey(r.Key, count)
		}
		if i == 0 {
			partition = p
		} else if p != partition {
			return 0, fmt.Errorf("%w: an atomic batch goes to one partition, but records %d and %d go to %s and %s of %q",
				ErrInvalidArgument, first, i, partitionName(partition), partitionName(p), stream)
		}
	}
	return partition, nil
}

func partitionName(p uint32) string {
	if p == AnyPartition {
		return "the connection's own partition"
	}
	return fmt.Sprintf("partition %d", p)
}

// encodeBatch frames the Produce frames of a batch (request ids are set
// once registered).
func (c *Client) encodeBatch(t target, batchID uint32, records []Record) ([][]byte, error) {
	enc := c.encoders.Get().(*encoder)
	defer c.encoders.Put(enc)
	frames := make([][]byte, len(records))
	for i := range records {
		if err := enc.encode(c, t, t.partition, &records[i], stamp{}); err != nil {
			return nil, fmt.Errorf("batch record %d: %w", i, err)
		}
		enc.msg.Options.Batch, enc.msg.Options.BatchID = true, batchID
		if i == len(records)-1 {
			enc.msg.Options.BatchFlags = wire.BatchCommit
		}
		frames[i] = wire.Append(nil, 0, &enc.msg)
	}
	return frames, nil
}

// registerBatch takes n places in the window and registers n awaited
// produces.
func (c *Client) registerBatch(ctx context.Context, n int) ([]*call, []uint32, error) {
	calls, ids := make([]*call, 0, n), make([]uint32, 0, n)
	release := func() {
		for range len(calls) {
			<-c.window
		}
		c.pmu.Lock()
		for _, id := range ids {
			if slot := c.pending.get(id); slot != nil {
				c.pending.remove(slot)
			}
		}
		c.pmu.Unlock()
	}
	for range n {
		if err := c.acquireWindow(ctx); err != nil {
			release()
			return nil, nil, err
		}
		cl := getCall()
		id, err := c.register(entry{kind: kindProduce, call: cl})
		calls = append(calls, cl)
		if err != nil {
			release()
			return nil, nil, err
		}
		ids = append(ids, id)
	}
	return calls, ids, nil
}

// noAckRequestID is the request id of fire-and-forget records: the
// broker never answers them, so they take no id from the table.
const noAckRequestID = math.MaxUint32

// PublishAsync sends record to d without asking for any answer (fire and
// forget, for telemetry that may be lost): no Ack, no error from the
// broker, no place in the window. It returns once the record is queued
// for writing, or an error when it was not sent (invalid, too large, the
// connection finished). A queued record may still be lost with the
// connection, or shed by an overloaded broker (which counts what it
// sheds); AsyncSent counts what was queued. Close drops records still
// queued: call Ping first to wait until the broker has read them. Records
// are unstamped. It needs a broker with the producers capability.
func (c *Client) PublishAsync(ctx context.Context, d Destination, record Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !c.producersServed() {
		return fmt.Errorf("%w: fire-and-forget publishing needs a broker with the producers capability", ErrInvalidArgument)
	}
	if err := c.Err(); err != nil {
		return err
	}
	enc := c.encoders.Get().(*encoder)
	defer c.encoders.Put(enc)
	t, err := c.resolve(d, enc.stream)
	enc.stream = t.stream
	if err != nil {
		return err
	}
	if err := enc.encode(c, t, t.partition, &record, stamp{}); err != nil {
		return err
	}
	enc.msg.Flags |= wire.ProduceNoAck
	c.enqueue(noAckRequestID, &enc.msg)
	c.asyncSent.Add(1)
	return nil
}

// AsyncSent returns how many records PublishAsync queued on this
// connection.
func (c *Client) AsyncSent() uint64 { return c.asyncSent.Load() }
