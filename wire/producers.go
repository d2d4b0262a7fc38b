package wire

import (
	"errors"
	"fmt"
	"math"
)

// Produce flag bits beyond ProduceRouteBySubject (streams.go), sent only
// on connections with CapProducers.
const (
	// ProduceHasOptions: a u16-length block of publish options (TLV, see
	// ProduceOptions) follows BodyCRC and precedes the body.
	ProduceHasOptions uint8 = 1 << 1
	// ProduceNoAck: fire and forget. The broker sends no ProduceAck and no
	// Error for the record; it may shed the record under overload, and it
	// counts every record it sheds.
	ProduceNoAck uint8 = 1 << 2
)

// ExpectNone is the expected last offset that means "no record yet": the
// partition (or the subject) must be empty.
const ExpectNone uint64 = math.MaxUint64

// Publish option tags. A tag with the high bit set is critical: a broker
// that does not know it refuses the record with CodeUnsupportedOption
// rather than store it without the guarantee asked for. Unknown
// non-critical tags are skipped.
const (
	optionCritical uint8 = 0x80

	optionProducer                = optionCritical | 1 // epoch u32: the body's producer id and sequence are checked
	optionExpectLastOffset        = optionCritical | 2 // u64: the partition's last offset must be this
	optionExpectLastSubjectOffset = optionCritical | 3 // u64: the last offset of the record's subject must be this
	optionBatch                   = optionCritical | 4 // batch id u32, flags u8: an atomic batch
	optionTransaction             = optionCritical | 5 // transaction id u64: the record belongs to an open transaction
)

// Batch flag bits of the batch option.
const (
	// BatchCommit marks the last record of an atomic batch: the batch is
	// stored, whole, when it arrives.
	BatchCommit uint8 = 1 << 0
)

// ProduceOptions are the publish options of one Produce: requests to the
// broker that travel beside the record body and are not stored with it.
// The zero value asks for nothing.
type ProduceOptions struct {
	// Idempotent: the body carries a producer id and sequence
	// (record.Body.HasProducer) that the broker checks against its
	// producer table; Epoch is the producer's epoch from ProducerInfo.
	Idempotent bool
	Epoch      uint32
	// ExpectLastOffset, when HasExpectLastOffset: the partition's last
	// assigned offset must equal it (ExpectNone: the partition is empty).
	HasExpectLastOffset bool
	ExpectLastOffset    uint64
	// ExpectLastSubjectOffset, when HasExpectLastSubjectOffset: the last
	// offset of a record with this record's subject must equal it
	// (ExpectNone: no record of the subject yet).
	HasExpectLastSubjectOffset bool
	ExpectLastSubjectOffset    uint64
	// Batch: the record belongs to atomic batch BatchID of this
	// connection; BatchFlags&BatchCommit ends the batch.
	Batch      bool
	BatchID    uint32
	BatchFlags uint8
	// Transaction: the record belongs to open transaction TransactionID
	// (TxnBegin); it is acked when durable, with AckPending, and seen by
	// consumers only once the transaction commits.
	Transaction   bool
	TransactionID uint64
	// others holds the non-critical options this version does not know,
	// as received, so a decode and re-encode keeps them.
	others string
}

// IsZero reports whether o asks for nothing (no options block is sent).
func (o *ProduceOptions) IsZero() bool { return *o == ProduceOptions{} }

// ErrUnsupportedOption wraps a critical publish option this broker does
// not know.
var ErrUnsupportedOption = errors.New("wire: unsupported publish option")

func appendProduceOptions(dst []byte, o *ProduceOptions) []byte {
	at := len(dst)
	dst = append(dst, 0, 0)
	dst = append(dst, o.others...)
	if o.Idempotent {
		dst = append(dst, optionProducer, 4, 0)
		dst = le.AppendUint32(dst, o.Epoch)
	}
	if o.HasExpectLastOffset {
		dst = append(dst, optionExpectLastOffset, 8, 0)
		dst = le.AppendUint64(dst, o.ExpectLastOffset)
	}
	if o.HasExpectLastSubjectOffset {
		dst = append(dst, optionExpectLastSubjectOffset, 8, 0)
		dst = le.AppendUint64(dst, o.ExpectLastSubjectOffset)
	}
	if o.Batch {
		dst = append(dst, optionBatch, 5, 0)
		dst = le.AppendUint32(dst, o.BatchID)
		dst = append(dst, o.BatchFlags)
	}
	if o.Transaction {
		dst = append(dst, optionTransaction, 8, 0)
		dst = le.AppendUint64(dst, o.TransactionID)
	}
	le.PutUint16(dst[at:], uint16(len(dst)-at-2))
	return dst
}

// decodeProduceOptions reads the options block. Tags come in ascending
// order, each at most once, so every set of options has one encoding (and
// the unknown non-critical ones, below 0x80, come first). An empty block,
// tags out of order, or a value of the wrong size is malformed; an unknown
// critical tag wraps ErrUnsupportedOption, which refuses the record, not
// the connection.
func decodeProduceOptions(block []byte) (ProduceOptions, error) {
	var o ProduceOptions
	if len(block) == 0 {
		return o, fmt.Errorf("%w: Produce: an empty options block is sent by leaving it out", ErrMalformed)
	}
	all, previous := block, -1
	for len(block) > 0 {
		if len(block) < 3 {
			return o, fmt.Errorf("%w: Produce: option header needs 3 bytes, %d left", ErrMalformed, len(block))
		}
		tag, size := block[0], int(le.Uint16(block[1:3]))
		if len(block)-3 < size {
			return o, fmt.Errorf("%w: Produce: option 0x%02x of %d bytes, %d left", ErrMalformed, tag, size, len(block)-3)
		}
		if int(tag) <= previous {
			return o, fmt.Errorf("%w: Produce: option 0x%02x after 0x%02x (ascending, each once)", ErrMalformed, tag, previous)
		}
		previous = int(tag)
		value := block[3 : 3+size]
		block = block[3+size:]
		if tag&optionCritical == 0 {
			o.others = string(all[:len(all)-len(block)])
			continue
		}
		if err := o.set(tag, value); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (o *ProduceOptions) set(tag uint8, value []byte) error {
	if want := optionSize(tag); want != 0 && len(value) != want {
		return fmt.Errorf("%w: Produce: option 0x%02x has %d bytes, want %d", ErrMalformed, tag, len(value), want)
	}
	switch tag {
	case optionProducer:
		o.Idempotent, o.Epoch = true, le.Uint32(value)
	case optionExpectLastOffset:
		o.HasExpectLastOffset, o.ExpectLastOffset = true, le.Uint64(value)
	case optionExpectLastSubjectOffset:
		o.HasExpectLastSubjectOffset, o.ExpectLastSubjectOffset = true, le.Uint64(value)
	case optionBatch:
		o.Batch, o.BatchID, o.BatchFlags = true, le.Uint32(value), value[4]
	case optionTransaction:
		o.Transaction, o.TransactionID = true, le.Uint64(value)
	default:
		return fmt.Errorf("%w: tag 0x%02x", ErrUnsupportedOption, tag)
	}
	return nil
}

// optionSize is the value size of a known option tag, 0 for an unknown one.
func optionSize(tag uint8) int {
	switch tag {
	case optionProducer:
		return 4
	case optionExpectLastOffset, optionExpectLastSubjectOffset:
		return 8
	case optionBatch:
		return 5
	case optionTransaction:
		return 8
	}
	return 0
}

// ProduceAck flag bits, sent only on connections with CapProducers.
const (
	// AckDuplicate: the record was already stored (a producer's resend or
	// a message id inside the stream's dedup window); Offset is where the
	// first copy is, and nothing new was stored.
	AckDuplicate uint8 = 1 << 0
	// AckOffsetUnknown: with AckDuplicate, the record is known to be
	// stored but its offset is older than the broker remembers; Offset is
	// meaningless.
	AckOffsetUnknown uint8 = 1 << 1
	// AckPending: the record is durable inside an open transaction and
	// invisible until it commits; Offset is its index in the transaction.
	// TxnState names the offsets it went to.
	AckPending uint8 = 1 << 2
)

// ProducerInit asks for the identity of a named idempotent producer
// (C→S, with CapProducers). Each name maps to one producer id for life;
// every ProducerInit raises the name's epoch, which fences the earlier
// incarnations: their idempotent records are refused with
// CodeProducerFenced.
type ProducerInit struct {
	Name []byte // 1..MaxProducerNameBytes bytes
}

// MaxProducerNameBytes bounds a producer name.
const MaxProducerNameBytes = 128

// Type implements Message.
func (*ProducerInit) Type() Type { return TypeProducerInit }

// AppendBody implements Message.
func (m *ProducerInit) AppendBody(dst []byte) []byte { return appendBytes16(dst, m.Name) }

// DecodeProducerInit decodes a ProducerInit body; Name aliases it.
func DecodeProducerInit(body []byte) (ProducerInit, error) {
	r := reader{buf: body, what: "ProducerInit"}
	m := ProducerInit{Name: r.bytes16("name")}
	if err := r.done(); err != nil {
		return m, err
	}
	if len(m.Name) == 0 || len(m.Name) > MaxProducerNameBytes {
		return m, fmt.Errorf("%w: ProducerInit: name of %d bytes (1 to %d)", ErrMalformed, len(m.Name), MaxProducerNameBytes)
	}
	return m, nil
}

// ProducerPosition is where a producer's sequence stands on one
// partition: the next sequence the broker expects from it there.
type ProducerPosition struct {
	Stream       []byte
	Partition    uint32
	NextSequence uint64
}

// MaxProducerPositions bounds the positions one ProducerInfo carries.
const MaxProducerPositions = 1024

// ProducerInfo answers ProducerInit (S→C): the producer's id, its new
// epoch and, for each partition where the broker holds its state, the
// next sequence it expects. Sequences continue across epochs, so a
// restarted producer resumes from Positions and a resend of a record it
// kept is recognised as a duplicate.
type ProducerInfo struct {
	ID        uint64
	Epoch     uint32
	Positions []ProducerPosition
}

// Type implements Message.
func (*ProducerInfo) Type() Type { return TypeProducerInfo }

// AppendBody implements Message.
func (m *ProducerInfo) AppendBody(dst []byte) []byte {
	dst = le.AppendUint64(dst, m.ID)
	dst = le.AppendUint32(dst, m.Epoch)
	positions := m.Positions[:min(len(m.Positions), MaxProducerPositions)]
	dst = le.AppendUint16(dst, uint16(len(positions)))
	for _, p := range positions {
		dst = appendBytes16(dst, p.Stream)
		dst = le.AppendUint32(dst, p.Partition)
		dst = le.AppendUint64(dst, p.NextSequence)
	}
	return dst
}

// DecodeProducerInfo decodes a ProducerInfo body; stream names alias it.
func DecodeProducerInfo(body []byte) (ProducerInfo, error) {
	r := reader{buf: body, what: "ProducerInfo"}
	m := ProducerInfo{ID: r.u64("id"), Epoch: r.u32("epoch")}
	count := int(r.u16("positions"))
	if count > MaxProducerPositions {
		return m, fmt.Errorf("%w: ProducerInfo: %d positions (maximum %d)", ErrMalformed, count, MaxProducerPositions)
	}
	for i := 0; i < count && r.err == nil; i++ {
		m.Positions = append(m.Positions, ProducerPosition{Stream: r.bytes16("stream"), Partition: r.u32("partition"), NextSequence: r.u64("next sequence")})
	}
	return m, r.done()
}

// Transactions (CapProducers): a producer opens a transaction with
// TxnBegin, publishes records tagged with its id (the transaction
// option), and ends it with TxnEnd. Records of an open transaction are
// durable but no consumer sees them; a commit makes all of them visible
// (with the group commits it carries, for consume-transform-produce), an
// abort or the timeout none.

// TxnBegin opens a transaction (C→S). Answered by TxnState.
type TxnBegin struct {
	TimeoutMs uint32 // the broker aborts the transaction this long after it began; 0 = its default
}

// Type implements Message.
func (*TxnBegin) Type() Type { return TypeTxnBegin }

// AppendBody implements Message.
func (m *TxnBegin) AppendBody(dst []byte) []byte { return le.AppendUint32(dst, m.TimeoutMs) }

// DecodeTxnBegin decodes a TxnBegin body.
func DecodeTxnBegin(body []byte) (TxnBegin, error) {
	r := reader{buf: body, what: "TxnBegin"}
	m := TxnBegin{TimeoutMs: r.u32("timeout ms")}
	return m, r.done()
}

// TxnEnd ops.
const (
	TxnCommit uint8 = 1
	TxnAbort  uint8 = 2
)

// MaxTxnGroupCommits bounds the group commits one TxnEnd carries.
const MaxTxnGroupCommits = 256

// TxnGroupCommit is a consumer group's position committed together with
// a transaction: a streaming group's next offset on one partition.
type TxnGroupCommit struct {
	Stream    []byte
	Partition uint32
	Group     []byte
	Offset    uint64 // the group's next offset
}

// TxnEnd commits or aborts a transaction (C→S). Answered by TxnState once
// the outcome is durable.
type TxnEnd struct {
	ID           uint64
	Op           uint8 // TxnCommit or TxnAbort
	GroupCommits []TxnGroupCommit
}

// Type implements Message.
func (*TxnEnd) Type() Type { return TypeTxnEnd }

// AppendBody implements Message.
func (m *TxnEnd) AppendBody(dst []byte) []byte {
	dst = le.AppendUint64(dst, m.ID)
	dst = append(dst, m.Op)
	commits := m.GroupCommits[:min(len(m.GroupCommits), MaxTxnGroupCommits)]
	dst = le.AppendUint16(dst, uint16(len(commits)))
	for _, c := range commits {
		dst = appendBytes16(dst, c.Stream)
		dst = le.AppendUint32(dst, c.Partition)
		dst = appendBytes16(dst, c.Group)
		dst = le.AppendUint64(dst, c.Offset)
	}
	return dst
}

// DecodeTxnEnd decodes a TxnEnd body; names alias it. An unknown op
// decodes (the broker answers invalid_request).
func DecodeTxnEnd(body []byte) (TxnEnd, error) {
	r := reader{buf: body, what: "TxnEnd"}
	m := TxnEnd{ID: r.u64("id"), Op: r.u8("op")}
	count := int(r.u16("group commits"))
	if count > MaxTxnGroupCommits {
		return m, fmt.Errorf("%w: TxnEnd: %d group commits (maximum %d)", ErrMalformed, count, MaxTxnGroupCommits)
	}
	for i := 0; i < count && r.err == nil; i++ {
		m.GroupCommits = append(m.GroupCommits, TxnGroupCommit{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.bytes16("group"), Offset: r.u64("offset")})
	}
	return m, r.done()
}

// Transaction outcomes in TxnState.
const (
	TxnOpen      uint8 = 1
	TxnCommitted uint8 = 2
	TxnAborted   uint8 = 3
)

// TxnRange is where a committed transaction's records on one partition
// went: Count records from offset First, in the order they were
// published.
type TxnRange struct {
	Stream    []byte
	Partition uint32
	First     uint64
	Count     uint32
}

// MaxTxnRanges bounds the ranges one TxnState carries.
const MaxTxnRanges = 1024

// TxnState answers TxnBegin (Outcome TxnOpen, with the new ID) and TxnEnd
// (TxnCommitted with the Ranges the records went to, or TxnAborted)
// (S→C).
type TxnState struct {
	ID      uint64
	Outcome uint8
	Ranges  []TxnRange
}

// Type implements Message.
func (*TxnState) Type() Type { return TypeTxnState }

// AppendBody implements Message.
func (m *TxnState) AppendBody(dst []byte) []byte {
	dst = le.AppendUint64(dst, m.ID)
	dst = append(dst, m.Outcome)
	ranges := m.Ranges[:min(len(m.Ranges), MaxTxnRanges)]
	dst = le.AppendUint16(dst, uint16(len(ranges)))
	for _, r := range ranges {
		dst = appendBytes16(dst, r.Stream)
		dst = le.AppendUint32(dst, r.Partition)
		dst = le.AppendUint64(dst, r.First)
		dst = le.AppendUint32(dst, r.Count)
	}
	return dst
}

// DecodeTxnState decodes a TxnState body; names alias it.
func DecodeTxnState(body []byte) (TxnState, error) {
	r := reader{buf: body, what: "TxnState"}
	m := TxnState{ID: r.u64("id"), Outcome: r.u8("outcome")}
	count := int(r.u16("ranges"))
	if count > MaxTxnRanges {
		return m, fmt.Errorf("%w: TxnState: %d ranges (maximum %d)", ErrMalformed, count, MaxTxnRanges)
	}
	for i := 0; i < count && r.err == nil; i++ {
		m.Ranges = append(m.Ranges, TxnRange{Stream: r.bytes16("stream"), Partition: r.u32("partition"), First: r.u64("first"), Count: r.u32("count")})
	}
	return m, r.done()
}
