package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// Idempotence says whether records carry a producer id and a sequence,
// so the broker stores each of them once however often it is sent. The
// zero value is IdempotenceOn.
type Idempotence uint8

const (
	// IdempotenceOn stamps every record whose partition the client can
	// know: a pinned partition (ToPartition), or a record to a ToStream
	// destination whose partition count the client could read (its
	// partition is then computed here with wire.PartitionForKey, and the
	// record is sent to that partition). Records routed by subject, and
	// records to a stream whose partition count cannot be read, go
	// without a stamp. A broker without the producers capability gets no
	// stamps at all.
	IdempotenceOn Idempotence = iota
	// IdempotenceOff sends every record without a stamp: at-least-once.
	IdempotenceOff
)

// Errors of idempotent producing. Each wraps the broker's *wire.Error
// too, so errors.Is(err, &wire.Error{Code: ...}) also holds.
var (
	// ErrProducerFenced: a newer incarnation of the producer (a
	// ProducerInit with the same name, from another producer or process)
	// holds the name. This producer must stop; every record it has not
	// had acknowledged fails with it.
	ErrProducerFenced = errors.New("ironbus client: producer fenced by a newer incarnation")
	// ErrSequenceGap: the broker expected another sequence. A Producer
	// repairs its own gaps; this surfaces only when the broker's and the
	// producer's sequences cannot be reconciled. Nothing was stored.
	ErrSequenceGap = errors.New("ironbus client: producer sequence gap")
	// ErrProducerExpired: the broker no longer holds the producer's state
	// on the partition (idle beyond its expiry, or evicted), so it cannot
	// tell a resend from a new record. A record failed with it may be
	// stored already (a copy went out before a connection failure):
	// sending it again may store it twice. A Producer resends the records
	// it knows are not stored itself.
	ErrProducerExpired = errors.New("ironbus client: producer state expired on the broker")
	// ErrUnknownProducer: the broker does not know the producer id on
	// this connection (it never issued it, its data was replaced, or the
	// connection did not announce it); the record was not stored.
	ErrUnknownProducer = errors.New("ironbus client: producer unknown to the broker")
)

// ExpectationError is the refusal of a conditional append: the partition's
// (or the subject's) last offset was not the one expected. Nothing was
// stored. It wraps the broker's *wire.Error.
type ExpectationError struct {
	// Actual is the last offset the broker found, when HasActual; a
	// HasActual of false means there was no record yet (or the broker
	// did not say).
	Actual    uint64
	HasActual bool
	Err       *wire.Error
}

func (e *ExpectationError) Error() string {
	if e.HasActual {
		return fmt.Sprintf("ironbus client: expectation failed: the last offset is %d: %v", e.Actual, e.Err)
	}
	return fmt.Sprintf("ironbus client: expectation failed: no record yet: %v", e.Err)
}

// Unwrap returns the broker's error.
func (e *ExpectationError) Unwrap() error { return e.Err }

// produceError types a broker's refusal of a produce: an *ExpectationError
// or one of the producer sentinels wrapping it; other errors pass as
// they are.
func produceError(err error) error {
	werr, ok := err.(*wire.Error)
	if !ok {
		return err
	}
	switch werr.Code {
	case wire.CodeExpectationFailed:
		e := &ExpectationError{Err: werr}
		if werr.HasValue && werr.Value != wire.ExpectNone {
			e.Actual, e.HasActual = werr.Value, true
		}
		return e
	case wire.CodeProducerFenced:
		return fmt.Errorf("%w: %w", ErrProducerFenced, werr)
	case wire.CodeSequenceGap:
		return fmt.Errorf("%w: %w", ErrSequenceGap, werr)
	case wire.CodeProducerExpired:
		return fmt.Errorf("%w: %w", ErrProducerExpired, werr)
	case wire.CodeUnknownProducer:
		return fmt.Errorf("%w: %w", ErrUnknownProducer, werr)
	}
	return werr
}

// wireCode returns the code of the *wire.Error in err's chain, 0 if none.
func wireCode(err error) (wire.Code, *wire.Error) {
	var werr *wire.Error
	if errors.As(err, &werr) {
		return werr.Code, werr
	}
	return 0, nil
}

// randomProducerName is the name of a producer that was given none:
// unique, so two producers never fence each other.
func randomProducerName() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "ironbus-go-" + hex.EncodeToString(b[:])
}

// checkProducerName rejects a name ProducerInit cannot carry.
func checkProducerName(name string) error {
	if len(name) == 0 || len(name) > wire.MaxProducerNameBytes {
		return fmt.Errorf("%w: producer name of %d bytes (1 to %d)", ErrInvalidArgument, len(name), wire.MaxProducerNameBytes)
	}
	return nil
}

// producerInit asks the broker for the identity of name: its id, a new
// epoch (fencing older incarnations) and where its sequences stand.
func (c *Client) producerInit(ctx context.Context, name string) (*wire.ProducerInfo, error) {
	reply, err := c.request(ctx, &wire.ProducerInit{Name: []byte(name)})
	if err != nil {
		return nil, err
	}
	info, ok := reply.(*wire.ProducerInfo)
	if !ok {
		return nil, fmt.Errorf("%w: a %s answered ProducerInit", ErrProtocol, reply.Type())
	}
	return info, nil
}

// decodeProducerInfo decodes a ProducerInfo answer, copying the stream
// names out of the read buffer.
func decodeProducerInfo(body []byte) (*wire.ProducerInfo, error) {
	info, err := wire.DecodeProducerInfo(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	for i := range info.Positions {
		info.Positions[i].Stream = append([]byte(nil), info.Positions[i].Stream...)
	}
	return &info, nil
}

// producersServed reports whether the connection takes idempotent records.
func (c *Client) producersServed() bool { return c.info.Capabilities&wire.CapProducers != 0 }

// notServed reports whether err says the broker does not serve a request
// type (a broker that announced a capability it does not implement yet):
// the client then carries on without idempotence.
func notServed(err error) bool {
	code, _ := wireCode(err)
	return code == wire.CodeUnknownType
}

// partitionCounts caches the partition count of streams, read once per
// stream with StreamInfo, so a keyed record's partition can be computed
// here. A stream that cannot be read (no admin scope) is remembered as
// unknown (0); one that does not exist yet as 1, the count its first
// publish creates it with.
type partitionCounts struct {
	readMu sync.Mutex // one StreamInfo at a time: concurrent first users wait for it
	mu     sync.Mutex // guards counts
	counts map[string]uint32
}

func (pc *partitionCounts) lookup(stream string) (uint32, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	count, ok := pc.counts[stream]
	return count, ok
}

// partitionCount returns the partition count of stream, 0 when it cannot
// be known.
func (c *Client) partitionCount(ctx context.Context, stream string) (uint32, error) {
	pc := &c.partitionCounts
	if count, ok := pc.lookup(stream); ok {
		return count, nil
	}
	pc.readMu.Lock()
	defer pc.readMu.Unlock()
	if count, ok := pc.lookup(stream); ok {
		return count, nil
	}
	var count uint32
	if c.info.Capabilities&wire.CapStreams == 0 {
		count = 1 // an older broker has one partition per stream
	} else if c.info.Capabilities&wire.CapAdmin != 0 {
		state, err := c.StreamInfo(ctx, stream)
		code, _ := wireCode(err)
		switch {
		case err == nil:
			count = uint32(len(state.Partitions))
		case code == wire.CodeNotFound:
			count = 1
		case code == 0:
			return 0, err // the context or the connection: ask again next time
		}
	}
	pc.mu.Lock()
	if pc.counts == nil {
		pc.counts = map[string]uint32{}
	}
	pc.counts[stream] = count
	pc.mu.Unlock()
	return count, nil
}

// stampedPartition returns the partition an idempotent record to t goes
// to, given the stream's partition count (0: unknown); ok is false when
// it cannot be known here.
func stampedPartition(t target, key []byte, count uint32) (partition uint32, ok bool) {
	switch {
	case t.bySubject:
		return 0, false
	case t.partition != AnyPartition:
		return t.partition, true
	case count == 1:
		return 0, true // keyless too: the only partition
	case count == 0 || len(key) == 0:
		return 0, false // keyless records go to the connection's own partition
	}
	return wire.PartitionForKey(key, count), true
}

// Offsets of the producer id and sequence in an encoded record body
// (docs/FORMAT.md): right after the fixed prefix when the producer flag
// is set.
const (
	bodyProducerIDAt = record.BodyFixedSize
	bodySequenceAt   = record.BodyFixedSize + 8
)

// restamp rewrites the producer id and sequence of an encoded idempotent
// body and returns its new CRC32C.
func restamp(body []byte, producerID, sequence uint64) uint32 {
	binary.LittleEndian.PutUint64(body[bodyProducerIDAt:], producerID)
	binary.LittleEndian.PutUint64(body[bodySequenceAt:], sequence)
	return record.Checksum(body)
}
