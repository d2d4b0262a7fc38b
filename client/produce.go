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
	// MessageID, when set, travels as the record's MessageIDHeader
	// header (at most MaxMessageIDBytes). A broker that keeps a dedup
	// window for the stream stores the first record of each id and
	// answers a second one inside the window with the first one's offset
	// and Ack.Duplicate, storing nothing: an application can resend a
	// record it is unsure about, even from another connection or process.
	MessageID string
	// ExpectLastOffset, when set (ExpectOffset, ExpectNone), makes the
	// append conditional: the partition's last record must be at that
	// offset, or the partition empty. A mismatch stores nothing and fails
	// with an *ExpectationError stating the actual last offset.
	ExpectLastOffset Expectation
	// ExpectLastSubjectOffset is the same for the last record with this
	// record's Subject.
	ExpectLastSubjectOffset Expectation
	// Tombstone makes the record delete its Key from a compacted stream:
	// it needs a Key and no Payload.
	Tombstone bool
}

// MessageIDHeader is the header that carries Record.MessageID.
const MessageIDHeader = record.MessageIDHeader

// MaxMessageIDBytes bounds Record.MessageID.
const MaxMessageIDBytes = record.MaxMessageIDBytes

// Ack is where an acknowledged record was stored. An Ack means the
// record is durable: the broker sends it only after the fdatasync that
// covers the record (at its default durability level).
type Ack struct {
	Partition uint32
	Offset    uint64
	// Duplicate: the record was stored before (an idempotent producer's
	// resend, or a MessageID inside the stream's dedup window); Offset is
	// where the first copy is, and nothing new was stored.
	Duplicate bool
	// OffsetUnknown: with Duplicate, the first copy is older than the
	// broker remembers, so Offset means nothing. The record is stored.
	OffsetUnknown bool
}

// ackOf converts a ProduceAck.
func ackOf(m wire.ProduceAck) Ack {
	return Ack{Partition: m.Partition, Offset: m.Offset, Duplicate: m.Flags&wire.AckDuplicate != 0,
		OffsetUnknown: m.Flags&wire.AckDuplicate != 0 && m.Flags&wire.AckOffsetUnknown != 0}
}

// Expectation is the condition of a conditional append: the last offset
// a partition (or a subject) must have. The zero value expects nothing.
type Expectation struct {
	set    bool
	offset uint64
}

// ExpectOffset expects the last record to be at offset.
func ExpectOffset(offset uint64) Expectation { return Expectation{set: true, offset: offset} }

// ExpectNone expects no record yet: an empty partition, or no record of
// the subject.
func ExpectNone() Expectation { return Expectation{set: true, offset: wire.ExpectNone} }

// IsSet reports whether e expects anything.
func (e Expectation) IsSet() bool { return e.set }

// stamp is what an idempotent record carries besides its content: the
// producer id and sequence in the body, the epoch in the options.
type stamp struct {
	idempotent bool
	producerID uint64
	sequence   uint64
	epoch      uint32
}

// produceFrameOverhead is the frame length of a Produce besides its
// stream name and record body: type and request id (5), the stream's
// length prefix (2), partition (4), flags (1) and body CRC (4).
const produceFrameOverhead = 5 + 2 + 4 + 1 + 4

// maxOptionsBytes bounds a Produce's options block: its length prefix
// and the producer (7), two expectation (11 each), batch (8) and
// transaction (11) options.
const maxOptionsBytes = 2 + 7 + 11 + 11 + 8 + 11

// encoder holds the scratch space to frame one record. Producers own one
// and awaited produces borrow one from a pool, so steady-state sends
// reuse the same buffers.
type encoder struct {
	compressor *codec.Compressor // nil: payloads go as they are
	body       []byte
	stream     []byte // awaited produces: the stream name, copied to reuse
	subject    []byte
	messageID  []byte // the last message id encoded; hasMessage: the current record has one
	hasMessage bool
	headers    []record.Header
	msg        wire.Produce
}

// encode frames r as a record body for stream and prepares the Produce
// message (to partition, with s), checking sizes against the server's
// limits first so nothing too large is ever sent.
func (e *encoder) encode(c *Client, t target, partition uint32, r *Record, s stamp) error {
	if len(r.Key) > math.MaxUint16 || len(r.Subject) > math.MaxUint16 {
		return fmt.Errorf("%w: key of %d bytes or subject of %d bytes (maximum %d each)", ErrInvalidArgument, len(r.Key), len(r.Subject), math.MaxUint16)
	}
	e.subject = append(e.subject[:0], r.Subject...)
	if err := checkRecordSubject(e.subject, t.bySubject); err != nil {
		return err
	}
	options, err := c.publishOptions(r, s)
	if err != nil {
		return err
	}
	stream := t.stream
	e.headers = e.headers[:0]
	for _, h := range r.Headers {
		if r.MessageID != "" && h.Name == MessageIDHeader {
			return fmt.Errorf("%w: a %s header beside Record.MessageID", ErrInvalidArgument, MessageIDHeader)
		}
		e.headers = append(e.headers, record.Header{Name: h.Name, Value: h.Value})
	}
	e.hasMessage = r.MessageID != ""
	if r.MessageID != "" {
		if len(r.MessageID) > MaxMessageIDBytes {
			return fmt.Errorf("%w: message id of %d bytes (maximum %d)", ErrInvalidArgument, len(r.MessageID), MaxMessageIDBytes)
		}
		e.messageID = append(e.messageID[:0], r.MessageID...)
		e.headers = append(e.headers, record.Header{Name: MessageIDHeader, Value: e.messageID})
	}
	b := record.Body{Key: r.Key, Subject: e.subject, Headers: e.headers, Payload: r.Payload, Tombstone: r.Tombstone,
		HasProducer: s.idempotent, ProducerID: s.producerID, Sequence: s.sequence}
	// Sizes are checked uncompressed: compression saves disk and network
	// but never admits a record the server would refuse uncompressed, so
	// a consumer's default decompression cap fits every record.
	size := record.BodySize(b)
	if limit := c.info.MaxRecordBytes; limit > 0 && size > limit {
		return fmt.Errorf("%w: record body of %d bytes, the server stores at most %d", ErrRecordTooLarge, size, limit)
	}
	frame := produceFrameOverhead + len(stream) + size
	if c.producersServed() {
		frame += maxOptionsBytes // room for any options the caller adds
	}
	if frame > int(c.info.MaxFrame) {
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
	e.msg = wire.Produce{Stream: stream, Partition: partition, Flags: t.flags, BodyCRC: record.Checksum(body), Options: options, Body: body}
	return nil
}

// publishOptions builds the options of r's Produce; expectations need a
// broker with the producers capability.
func (c *Client) publishOptions(r *Record, s stamp) (wire.ProduceOptions, error) {
	o := wire.ProduceOptions{Idempotent: s.idempotent, Epoch: s.epoch,
		HasExpectLastOffset: r.ExpectLastOffset.set, ExpectLastOffset: r.ExpectLastOffset.offset,
		HasExpectLastSubjectOffset: r.ExpectLastSubjectOffset.set, ExpectLastSubjectOffset: r.ExpectLastSubjectOffset.offset}
	if (o.HasExpectLastOffset || o.HasExpectLastSubjectOffset) && c.info.Capabilities&wire.CapProducers == 0 {
		return o, fmt.Errorf("%w: a conditional append needs a broker with the producers capability", ErrInvalidArgument)
	}
	if o.HasExpectLastSubjectOffset && r.Subject == "" {
		return o, fmt.Errorf("%w: ExpectLastSubjectOffset on a record without a subject", ErrInvalidArgument)
	}
	return o, nil
}

// Produce sends one record to stream and waits until it is durable: it
// is ProduceTo(ctx, ToStream(stream), record). It returns where the
// record was stored, or the error the server answered (*wire.Error: for
// example busy or no_space, which are retryable; an *ExpectationError),
// or why it could not be sent.
//
// Produce stamps the record for idempotence when it can know its
// partition (Options.Idempotence says which records; the first such call
// sends the Client's ProducerInit, and the first to each ToStream stream
// reads its partition count), and renumbers it itself after a sequence
// gap that a refusal of a concurrent call left. It never resends: when
// ctx ends first, Produce returns ctx.Err() and the record may still be
// stored, so retrying it can store it twice (use Record.MessageID, or a
// Producer, to make a retry safe). The same holds when the connection
// breaks while Produce waits.
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
