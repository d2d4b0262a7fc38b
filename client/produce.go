package client

import (
	"context"
	"fmt"
	"math"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// Header is one record header: a name and an opaque value.
type Header struct {
	Name  string
	Value []byte
}

// Record is what a producer sends. Key and Subject are at most 65,535
// bytes each. The client compresses the payload when its Compression says
// it is worth it, frames the record body (codec and raw length included)
// and computes the CRC32C, over the bytes as stored, that travels with it
// to the disk and back to every consumer.
type Record struct {
	Key     []byte
	Subject string
	Headers []Header
	Payload []byte
	// Tombstone makes the record delete its Key from a compacted stream:
	// it needs a Key and no Payload.
	Tombstone bool
}

// Ack is where an acknowledged record was stored. An Ack means the
// record is durable: the broker sends it only after the fdatasync that
// covers the record (at its default durability level).
type Ack struct {
	Partition uint32
	Offset    uint64
}

// produceFrameOverhead is the frame length of a Produce besides its
// stream name and record body: type and request id (5), the stream's
// length prefix (2), partition (4), flags (1) and body CRC (4).
const produceFrameOverhead = 5 + 2 + 4 + 1 + 4

// encoder holds the scratch space to frame one record. Producers own one
// and awaited produces borrow one from a pool, so steady-state sends
// reuse the same buffers.
type encoder struct {
	compressor *codec.Compressor // nil: payloads go as they are
	body       []byte
	stream     []byte // awaited produces: the stream name, copied to reuse
	subject    []byte
	headers    []record.Header
	msg        wire.Produce
}

// encode frames r as a record body for stream and prepares the Produce
// message, checking sizes against the server's limits first so nothing
// too large is ever sent.
func (e *encoder) encode(c *Client, t target, r *Record) error {
	if len(r.Key) > math.MaxUint16 || len(r.Subject) > math.MaxUint16 {
		return fmt.Errorf("%w: key of %d bytes or subject of %d bytes (maximum %d each)", ErrInvalidArgument, len(r.Key), len(r.Subject), math.MaxUint16)
	}
	e.subject = append(e.subject[:0], r.Subject...)
	if err := checkRecordSubject(e.subject, t.bySubject); err != nil {
		return err
	}
	stream := t.stream
	e.headers = e.headers[:0]
	for _, h := range r.Headers {
		e.headers = append(e.headers, record.Header{Name: h.Name, Value: h.Value})
	}
	b := record.Body{Key: r.Key, Subject: e.subject, Headers: e.headers, Payload: r.Payload, Tombstone: r.Tombstone}
	// Sizes are checked uncompressed: compression saves disk and network
	// but never admits a record the server would refuse uncompressed, so
	// a consumer's default decompression cap fits every record.
	size := record.BodySize(b)
	if limit := c.info.MaxRecordBytes; limit > 0 && size > limit {
		return fmt.Errorf("%w: record body of %d bytes, the server stores at most %d", ErrRecordTooLarge, size, limit)
	}
	if frame := produceFrameOverhead + len(stream) + size; frame > int(c.info.MaxFrame) {
		return fmt.Errorf("%w: produce frame of %d bytes, the server accepts at most %d", ErrRecordTooLarge, frame, c.info.MaxFrame)
	}
	if e.compressor != nil && !r.Tombstone {
		b.Payload, b.Codec = e.compressor.Compress(r.Payload)
		b.RawLength = uint32(len(r.Payload))
	}
	body, err := record.AppendBody(e.body[:0], b)
	clear(e.headers) // do not keep the caller's header values alive
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	e.body = body
	e.msg = wire.Produce{Stream: stream, Partition: t.partition, Flags: t.flags, BodyCRC: record.Checksum(body), Body: body}
	return nil
}

// Produce sends one record to stream and waits until it is durable: it
// is ProduceTo(ctx, ToStream(stream), record). It returns where the
// record was stored, or the error the server answered (*wire.Error: for
// example busy or no_space, which are retryable), or why it could not be
// sent.
//
// When ctx ends first, Produce returns ctx.Err() and the record may still
// be stored: retrying it can store it twice (at-least-once). The same
// holds when the connection breaks while Produce waits.
func (c *Client) Produce(ctx context.Context, stream string, record Record) (Ack, error) {
	return c.ProduceTo(ctx, ToStream(stream), record)
}

// produceEncoded sends the Produce enc holds and waits for its answer.
func (c *Client) produceEncoded(ctx context.Context, enc *encoder) (Ack, error) {
	if err := c.acquireWindow(ctx); err != nil {
		return Ack{}, err
	}
	cl := getCall()
	id, err := c.register(entry{kind: kindProduce, call: cl})
	if err != nil {
		<-c.window
		putCall(cl)
		return Ack{}, err
	}
	c.enqueueAwaited(id, &enc.msg)
	if err := c.await(ctx, id, cl); err != nil {
		return Ack{}, err
	}
	ack, err := cl.ack, cl.err
	putCall(cl)
	return ack, err
}
