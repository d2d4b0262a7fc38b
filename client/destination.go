package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/wire"
)

// Partition sentinels (they share one value, which no real partition can
// have: a stream holds at most wire.MaxPartitions).
const (
	// AnyPartition, as a producer's partition, lets the broker pick one:
	// the stable hash of the record's key (wire.PartitionForKey), or the
	// connection's own partition for a record without a key.
	AnyPartition = wire.PartitionAny
	// AllPartitions, as a consumer's partition, reads every partition of
	// the stream: each Message and Gap names its partition, order holds
	// per partition, and acks go to the partition a record came from.
	AllPartitions = wire.PartitionAll
)

// Gap reasons, the values of Gap.Reason.
const (
	GapRetention = "retention" // removed by retention before the group read it
	GapLost      = "lost"      // lost to damage, reported by the broker's recovery
	GapFiltered  = "filtered"  // no record in the range matches the consumer's subject filter
	GapCompacted = "compacted" // removed by key compaction: a later record of the same key superseded each
)

// Destination says where a producer's records go: a stream (the broker
// picks the partition from each record's key), one partition of a
// stream, or the stream whose binding matches each record's subject.
// Build one with ToStream, ToPartition or BySubject.
type Destination struct {
	stream    string
	partition uint32
	pinned    bool // partition was named by the caller
	bySubject bool
}

// ToStream sends records to stream; the broker picks each record's
// partition by the stable hash of its key (a record without a key goes
// to the connection's own partition), so a one-partition stream gets
// everything in partition 0 and a key always lands in the same
// partition. A broker without the streams capability stores them in
// partition 0.
func ToStream(stream string) Destination { return Destination{stream: stream, partition: AnyPartition} }

// ToPartition sends records to one partition of stream: order is total
// among everything sent there.
func ToPartition(stream string, partition uint32) Destination {
	return Destination{stream: stream, partition: partition, pinned: true}
}

// BySubject routes each record by its Subject: the broker stores it in
// the one stream whose binding (Client.Bind) matches the subject, in the
// partition of its key. A subject no binding matches is refused with a
// *wire.Error of code no_route and nothing is stored. Every record needs
// a valid subject; one without is refused here, before sending.
func BySubject() Destination { return Destination{partition: AnyPartition, bySubject: true} }

// String names the destination for errors and logs.
func (d Destination) String() string {
	switch {
	case d.bySubject:
		return "subject-routed"
	case d.pinned:
		return fmt.Sprintf("%s/%d", d.stream, d.partition)
	}
	return d.stream
}

// target is a Destination resolved against the connection: what every
// Produce frame of it carries besides the record.
type target struct {
	stream    []byte
	partition uint32
	flags     uint8
	bySubject bool
}

// resolve checks d against the connection's capabilities and returns
// what its Produce frames carry, the stream name copied into buf (reused
// by awaited produces, so they do not allocate).
func (c *Client) resolve(d Destination, buf []byte) (target, error) {
	t := target{stream: append(buf[:0], d.stream...), partition: d.partition, bySubject: d.bySubject}
	streams := c.info.Capabilities&wire.CapStreams != 0
	switch {
	case d.bySubject:
		if !streams {
			return t, fmt.Errorf("%w: routing by subject needs a broker with the streams capability", ErrInvalidArgument)
		}
		t.flags = wire.ProduceRouteBySubject
		return t, nil
	case d.pinned && d.partition >= wire.MaxPartitions:
		return t, fmt.Errorf("%w: partition %d (a stream holds at most %d)", ErrInvalidArgument, d.partition, wire.MaxPartitions)
	case d.pinned && d.partition != 0 && !streams:
		return t, fmt.Errorf("%w: partition %d needs a broker with the streams capability", ErrInvalidArgument, d.partition)
	case !d.pinned && !streams:
		t.partition = 0 // an older broker has one partition and no "any"
	}
	return t, checkName("stream", d.stream)
}

// needStreams fails a call that needs the streams capability (a filter,
// AllPartitions) when the connection does not have it.
func (c *Client) needStreams(what string) error {
	if c.info.Capabilities&wire.CapStreams == 0 {
		return fmt.Errorf("%w: %s needs a broker with the streams capability", ErrInvalidArgument, what)
	}
	return nil
}

// consumeScope checks a consumer's partition and filter against the
// connection: AllPartitions and a filter need the streams capability,
// and the filter must be a valid subject pattern.
func (c *Client) consumeScope(partition uint32, filter string) error {
	var errs []error
	if partition == AllPartitions {
		errs = append(errs, c.needStreams("reading every partition"))
	} else if partition >= wire.MaxPartitions {
		errs = append(errs, fmt.Errorf("%w: partition %d (a stream holds at most %d)", ErrInvalidArgument, partition, wire.MaxPartitions))
	}
	if filter != "" {
		errs = append(errs, c.needStreams("a subject filter"), checkPattern(filter))
	}
	return errors.Join(errs...)
}

// NewProducerTo returns a producer for a destination on this connection:
// NewProducer(stream, opts) is NewProducerTo(ToStream(stream), opts).
func (c *Client) NewProducerTo(d Destination, opts ProducerOptions) *Producer {
	p := c.newProducer(opts)
	t, err := c.resolve(d, nil)
	p.target, p.stream, p.nameErr = t, d.stream, errors.Join(p.nameErr, err)
	return p
}

// ProduceTo is Produce to a destination: Produce(ctx, stream, record) is
// ProduceTo(ctx, ToStream(stream), record). The Ack names the partition
// the record was stored in.
func (c *Client) ProduceTo(ctx context.Context, d Destination, record Record) (Ack, error) {
	if err := ctx.Err(); err != nil {
		return Ack{}, err
	}
	key := c.produceRoute(d, record.Key)
	var rd redirect
	for conn := c.routeOf(key); ; {
		ack, err := conn.produceOn(ctx, d, &record)
		if !redirectable(err) {
			return ack, err
		}
		if conn, err = c.follow(ctx, conn, key, err, &rd); conn == nil {
			return Ack{}, err
		}
	}
}

// produceRoute is the routing key of a record to d: its partition when
// the client can know it from what it has cached, else the stream's.
func (c *Client) produceRoute(d Destination, key []byte) streamPartition {
	route := streamPartition{stream: d.stream, partition: d.partition}
	if d.bySubject || d.partition != AnyPartition || len(key) == 0 {
		return route
	}
	if count, ok := c.partitionCounts.lookup(d.stream); ok && count > 0 {
		route.partition = wire.PartitionForKey(key, count)
	}
	return route
}

// produceOn sends one record on this connection and waits for its
// answer: ProduceTo without leader following.
func (c *Client) produceOn(ctx context.Context, d Destination, record *Record) (Ack, error) {
	enc := c.encoders.Get().(*encoder)
	defer c.encoders.Put(enc)
	t, err := c.resolve(d, enc.stream)
	enc.stream = t.stream
	if err != nil {
		return Ack{}, err
	}
	partition, idempotent, err := c.awaitedStamp(ctx, t, d.stream, record)
	if err != nil {
		return Ack{}, err
	}
	// The stamp's id and sequence are set under the identity's lock, as
	// the record is written; these placeholders reserve their room.
	if err := enc.encode(c, t, partition, record, stamp{idempotent: idempotent}); err != nil {
		return Ack{}, err
	}
	if idempotent {
		return c.produceStamped(ctx, enc, streamPartition{stream: d.stream, partition: partition})
	}
	return c.produceEncoded(ctx, enc)
}
