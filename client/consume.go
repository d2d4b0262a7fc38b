package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// Defaults for FetchOptions.
const (
	DefaultFetchRecords = 100
	DefaultFetchBytes   = 1 << 20
)

// FetchOptions shape one Fetch.
type FetchOptions struct {
	// Partition is the stream partition to read, or AllPartitions for
	// every partition (each Message names its own; order holds per
	// partition).
	Partition uint32
	// Filter, when set, is a subject pattern (`*` matches one token, `>`
	// the rest): only records whose subject matches are delivered, and
	// the offsets skipped come as Gaps with Reason GapFiltered, so the
	// group's position always advances. A group's own filter (set when
	// OpenGroup created it) wins over this one.
	Filter string
	// Type is the group's type (GroupWork when zero). A group that does
	// not exist is created with it, starting at the earliest record
	// (OpenGroup picks another start); one that exists must have it.
	Type       GroupType
	MaxRecords int // default DefaultFetchRecords
	// MaxBytes bounds the record bodies of one Fetch, except that the
	// first record is delivered whatever its size; default
	// DefaultFetchBytes.
	MaxBytes int
	// Wait is how long the broker may wait for a first record when none
	// is ready (long poll); 0 answers at once.
	Wait time.Duration
	// Lease is the visibility timeout of the records delivered: until it
	// expires, no other consumer of the group gets them. 0 = the broker's
	// default.
	Lease time.Duration
}

// Message is one delivered record. It owns its bytes: nothing in it
// aliases the client's buffers.
type Message struct {
	Stream      string
	Partition   uint32
	Offset      uint64
	Lease       uint64 // quote it to Ack or Nack; a stale one is fenced
	Attempt     uint32 // 1 on the first delivery
	Redelivered bool   // an earlier attempt was not acknowledged
	Timestamp   time.Time
	Key         []byte
	Subject     string
	Headers     []Header
	// Payload is the record's payload, decompressed.
	Payload []byte
	// Codec is how the payload was stored (and sent): CodecNone, CodecLZ4
	// or CodecZstd. Informational: Payload is already decompressed.
	Codec Codec
	// Tombstone marks a record that deletes its Key from a compacted
	// stream (it has no payload).
	Tombstone bool
}

// Gap says that offsets [From, To) of a partition will never be
// delivered to the group, and why: GapRetention (removed before the
// group read them), GapLost (lost to damage, as reported by the broker's
// recovery), GapFiltered (no record there matches the consumer's
// subject filter; such gaps are coalesced, and they are how a filtered
// consumer's position advances past what it does not want) or
// GapCompacted (key compaction removed records a later record of the
// same key superseded).
type Gap struct {
	Partition uint32
	From, To  uint64
	Reason    string
	Detail    string
}

// FetchResult is the answer to one Fetch. Reason is why it ended:
// "limit", "caught_up" or "waited".
type FetchResult struct {
	Messages []Message
	Gaps     []Gap
	Reason   string
}

// Fetch leases up to MaxRecords records of a stream partition to group
// and returns them. In a work group each record goes to one consumer at
// a time; in a key-shared group each key's records go to one connection,
// one at a time; a broadcast or streaming group's records come without
// a lease (Lease 0) and are settled with CumulativeAck or Commit. Acknowledge each with Ack once processed, or Nack it;
// a record neither acked nor nacked is redelivered when its lease
// expires, so processing is at-least-once.
//
// Every record's CRC32C is verified before it is decoded. Records that
// fail are never returned: Fetch returns the others together with a
// *DeliveryError (errors.Is(err, ErrCorruptDelivery)) listing them.
//
// When ctx ends first, Fetch returns ctx.Err() and any records the broker
// delivers afterwards stay leased until their leases expire.
func (c *Client) Fetch(ctx context.Context, stream, group string, opts FetchOptions) (FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return FetchResult{}, err
	}
	if err := errors.Join(checkName("stream", stream), checkName("group", group), c.consumeScope(opts.Partition, opts.Filter)); err != nil {
		return FetchResult{}, err
	}
	msg := consumeMessage(stream, group, opts)
	key := streamPartition{stream: stream, partition: opts.Partition}
	var rd redirect
	for conn := c.routeOf(key); ; {
		result, err := conn.fetchOn(ctx, stream, msg)
		if !redirectable(err) {
			return result, err
		}
		if conn, err = c.follow(ctx, conn, key, err, &rd); conn == nil {
			return FetchResult{}, err
		}
	}
}

// fetchOn sends a Consume on this connection and collects its answer.
func (c *Client) fetchOn(ctx context.Context, stream string, msg *wire.Consume) (FetchResult, error) {
	cl := getCall()
	cl.fetch.stream, cl.fetch.decompressor = stream, c.decompressor
	id, err := c.register(entry{kind: kindFetch, call: cl})
	if err != nil {
		putCall(cl)
		return FetchResult{}, err
	}
	c.enqueueAwaited(id, msg)
	if err := c.await(ctx, id, cl); err != nil {
		return FetchResult{}, err
	}
	cl.fetch.decompress()
	result, err := cl.fetch.result(), cl.err
	if err == nil && len(cl.fetch.rejected) > 0 {
		err = &DeliveryError{Rejected: cl.fetch.rejected}
	}
	putCall(cl)
	return result, err
}

func consumeMessage(stream, group string, opts FetchOptions) *wire.Consume {
	msg := &wire.Consume{
		Stream: []byte(stream), Partition: opts.Partition, Group: []byte(group), Mode: opts.Type.mode(),
		MaxRecords: DefaultFetchRecords, MaxBytes: DefaultFetchBytes,
		WaitMs: clampMillis(opts.Wait), LeaseMs: clampMillis(opts.Lease),
	}
	if opts.Filter != "" {
		msg.Filter = []byte(opts.Filter)
	}
	if opts.MaxRecords > 0 {
		msg.MaxRecords = clampCount(opts.MaxRecords)
	}
	if opts.MaxBytes > 0 {
		msg.MaxBytes = clampCount(opts.MaxBytes)
	}
	if msg.WaitMs == 0 {
		msg.Flags |= wire.ConsumeNoWait
	}
	return msg
}

// clampMillis converts d to whole milliseconds that fit a u32, rounding
// a positive sub-millisecond duration up so it does not turn into "none".
func clampMillis(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return uint32(min(ms, math.MaxUint32-1)) // MaxUint32 means "group default" in Nack
}

// fetchState accumulates the answer to a Consume, filled by whoever reads
// the socket.
type fetchState struct {
	stream       string
	decompressor *codec.Decompressor
	compressed   []compressedMessage // messages whose Payload is still compressed
	messages     []Message
	gaps         []Gap
	rejected     []RejectedDelivery
	delivered    int // records delivered, accepted or not: ConsumeEnd counts them
	reason       uint8

	// raw keeps DeliverBatch frames as they came, for a Stream to verify
	// and decode on its own goroutine; a Fetch decodes them at once.
	raw    bool
	frames []byte      // raw: the frames of every DeliverBatch, back to back
	spans  []batchSpan // raw: one per DeliverBatch, in order
}

// batchSpan locates one DeliverBatch's frames in fetchState.frames.
type batchSpan struct {
	partition   uint32
	first, next uint64
	count       int
	start, end  int
}

// batch takes one DeliverBatch: kept raw for a Stream, or verified and
// decoded record by record for a Fetch (the frames alias the read buffer,
// so a Fetch copies each body it keeps).
func (f *fetchState) batch(b wire.DeliverBatch) {
	f.delivered += int(b.Count)
	if f.raw {
		start := len(f.frames)
		f.frames = append(f.frames, b.Frames...)
		f.spans = append(f.spans, batchSpan{partition: b.Partition, first: b.First, next: b.Next,
			count: int(b.Count), start: start, end: len(f.frames)})
		return
	}
	err := walkRecords(b, func(h record.FrameHeader, frame []byte, corrupt error) error {
		if corrupt != nil {
			f.reject(Message{Stream: f.stream, Partition: b.Partition, Offset: h.Offset, Attempt: 1}, corrupt)
			return nil
		}
		f.deliver(wire.Deliver{Partition: b.Partition, Offset: h.Offset, Attempt: 1, Timestamp: h.Timestamp,
			BodyCRC: h.BodyCRC, Body: frame[record.FrameHeaderSize : record.FrameHeaderSize+int(h.BodyLength)]})
		f.delivered-- // counted with the batch
		return nil
	})
	var corrupt *CorruptBatchError
	if errors.As(err, &corrupt) {
		corrupt.Stream = f.stream
		f.reject(Message{Stream: f.stream, Partition: b.Partition, Offset: corrupt.Offset, Attempt: 1}, err)
	}
}

// deliver verifies and copies one delivered record. The CRC is checked
// before anything else reads the body (integrity before transform).
func (f *fetchState) deliver(d wire.Deliver) {
	f.delivered++
	m := Message{Stream: f.stream, Partition: d.Partition, Offset: d.Offset, Lease: d.Lease,
		Attempt: d.Attempt, Redelivered: d.Flags&wire.DeliverRedelivered != 0, Timestamp: time.Unix(0, d.Timestamp)}
	if crc := record.Checksum(d.Body); crc != d.BodyCRC {
		f.reject(m, fmt.Errorf("%w: %s/%d offset %d: body CRC32C %08x, the record says %08x",
			ErrCorruptDelivery, f.stream, d.Partition, d.Offset, crc, d.BodyCRC))
		return
	}
	owned := bytes.Clone(d.Body) // the frame aliases the read buffer
	view, err := record.Parse(owned)
	switch {
	case errors.Is(err, record.ErrTooNew):
		f.reject(m, fmt.Errorf("%w: %s/%d offset %d: %w", ErrUnsupportedRecord, f.stream, d.Partition, d.Offset, err))
		return
	case err != nil:
		f.reject(m, fmt.Errorf("%w: %s/%d offset %d: %w", ErrCorruptDelivery, f.stream, d.Partition, d.Offset, err))
		return
	}
	m.Key, m.Subject, m.Payload, m.Codec = view.Key, string(view.Subject), view.Payload, view.Codec
	m.Tombstone = view.Tombstone
	if view.Codec != record.CodecNone {
		// Decompressed later, on the caller's goroutine (decompress), so
		// a large payload never stalls the connection's reader.
		f.compressed = append(f.compressed, compressedMessage{index: len(f.messages), view: view})
	}
	for name, value := range view.Headers() {
		m.Headers = append(m.Headers, Header{Name: string(name), Value: value})
	}
	f.messages = append(f.messages, m)
}

// compressedMessage is a verified message whose payload awaits
// decompression; view aliases the message's own copy of the body.
type compressedMessage struct {
	index int
	view  record.View
}

// decompress restores the payloads the reader left compressed, each into
// its own allocation (a Message owns its bytes). A record that fails
// leaves messages for rejected, keeping only its coordinates, so it can
// still be nacked. It runs on the goroutine of the Fetch (or Stream).
func (f *fetchState) decompress() {
	if len(f.compressed) == 0 {
		return
	}
	failed := map[int]bool{}
	for _, c := range f.compressed {
		m := &f.messages[c.index]
		payload, err := decompressPayload(f.decompressor, nil, c.view, f.stream, m.Partition, m.Offset)
		if err != nil {
			failed[c.index] = true
			m.Key, m.Subject, m.Headers, m.Payload = nil, "", nil, nil
			f.reject(*m, err)
			continue
		}
		m.Payload = payload
	}
	f.compressed = f.compressed[:0]
	if len(failed) == 0 {
		return
	}
	kept := f.messages[:0]
	for i, m := range f.messages {
		if !failed[i] {
			kept = append(kept, m)
		}
	}
	clear(f.messages[len(kept):])
	f.messages = kept
}

func (f *fetchState) reject(m Message, err error) {
	f.rejected = append(f.rejected, RejectedDelivery{Message: m, Err: err})
}

func (f *fetchState) gap(g wire.Gap) {
	var reason string
	switch g.Reason {
	case wire.GapRetention:
		reason = GapRetention
	case wire.GapLost:
		reason = GapLost
	case wire.GapFiltered:
		reason = GapFiltered
	case wire.GapCompacted:
		reason = GapCompacted
	default:
		// Formatted only here: a sparse filter answers with thousands of
		// gaps, each of a known reason.
		reason = fmt.Sprintf("reason(%d)", g.Reason)
	}
	f.gaps = append(f.gaps, Gap{Partition: g.Partition, From: g.From, To: g.To, Reason: reason, Detail: g.Detail})
}

func (f *fetchState) result() FetchResult {
	var reason string
	switch f.reason {
	case wire.EndLimit:
		reason = "limit"
	case wire.EndCaughtUp:
		reason = "caught_up"
	case wire.EndWaited:
		reason = "waited"
	default:
		reason = fmt.Sprintf("reason(%d)", f.reason)
	}
	return FetchResult{Messages: f.messages, Gaps: f.gaps, Reason: reason}
}
