package wire

import (
	"fmt"
	"math"
)

// Hello opens a connection (C→S).
type Hello struct {
	MinVersion   uint16 // lowest protocol version the client speaks
	MaxVersion   uint16 // highest
	Capabilities uint64 // Cap* bits the client understands
	MaxFrame     uint32 // largest frame the client accepts
	Window       uint32 // produce requests the client wants in flight
	ClientName   string // for logs and metrics
	// AuthMechanism and AuthMaterial carry credentials; 0 = none. The
	// security issue defines the mechanisms; version 1 servers without
	// auth ignore them.
	AuthMechanism uint8
	AuthMaterial  []byte
}

// Type implements Message.
func (*Hello) Type() Type { return TypeHello }

// AppendBody implements Message.
func (m *Hello) AppendBody(dst []byte) []byte {
	dst = le.AppendUint16(dst, m.MinVersion)
	dst = le.AppendUint16(dst, m.MaxVersion)
	dst = le.AppendUint64(dst, m.Capabilities)
	dst = le.AppendUint32(dst, m.MaxFrame)
	dst = le.AppendUint32(dst, m.Window)
	dst = appendString16(dst, m.ClientName)
	dst = append(dst, m.AuthMechanism)
	return appendBytes16(dst, m.AuthMaterial)
}

// DecodeHello decodes a Hello body.
func DecodeHello(body []byte) (Hello, error) {
	r := reader{buf: body, what: "Hello"}
	m := Hello{MinVersion: r.u16("min version"), MaxVersion: r.u16("max version"),
		Capabilities: r.u64("capabilities"), MaxFrame: r.u32("max frame"), Window: r.u32("window")}
	m.ClientName = string(r.bytes16("client name"))
	m.AuthMechanism = r.u8("auth mechanism")
	m.AuthMaterial = r.bytes16("auth material")
	if err := r.done(); err != nil {
		return m, err
	}
	if m.MinVersion > m.MaxVersion || m.MinVersion == 0 {
		return m, fmt.Errorf("%w: Hello: version range %d..%d", ErrMalformed, m.MinVersion, m.MaxVersion)
	}
	return m, nil
}

// Welcome answers Hello (S→C).
type Welcome struct {
	Version        uint16 // the protocol version of this connection
	Capabilities   uint64 // bits both sides have
	MaxFrame       uint32 // largest frame the server accepts
	Window         uint32 // produce requests the server reads ahead of acks
	MaxRecordBytes uint32 // largest record body the server stores
	IdleTimeoutMs  uint32 // the server closes a connection silent this long; ping sooner
	ServerVersion  string
}

// Type implements Message.
func (*Welcome) Type() Type { return TypeWelcome }

// AppendBody implements Message.
func (m *Welcome) AppendBody(dst []byte) []byte {
	dst = le.AppendUint16(dst, m.Version)
	dst = le.AppendUint64(dst, m.Capabilities)
	dst = le.AppendUint32(dst, m.MaxFrame)
	dst = le.AppendUint32(dst, m.Window)
	dst = le.AppendUint32(dst, m.MaxRecordBytes)
	dst = le.AppendUint32(dst, m.IdleTimeoutMs)
	return appendString16(dst, m.ServerVersion)
}

// DecodeWelcome decodes a Welcome body.
func DecodeWelcome(body []byte) (Welcome, error) {
	r := reader{buf: body, what: "Welcome"}
	m := Welcome{Version: r.u16("version"), Capabilities: r.u64("capabilities"), MaxFrame: r.u32("max frame"),
		Window: r.u32("window"), MaxRecordBytes: r.u32("max record bytes"), IdleTimeoutMs: r.u32("idle timeout")}
	m.ServerVersion = string(r.bytes16("server version"))
	return m, r.done()
}

// Ping asks the peer to answer Pong with the same payload.
type Ping struct{ Payload uint64 }

// Type implements Message.
func (*Ping) Type() Type { return TypePing }

// AppendBody implements Message.
func (m *Ping) AppendBody(dst []byte) []byte { return le.AppendUint64(dst, m.Payload) }

// Pong answers Ping.
type Pong struct{ Payload uint64 }

// Type implements Message.
func (*Pong) Type() Type { return TypePong }

// AppendBody implements Message.
func (m *Pong) AppendBody(dst []byte) []byte { return le.AppendUint64(dst, m.Payload) }

// DecodePing decodes a Ping or Pong body.
func DecodePing(body []byte) (uint64, error) {
	r := reader{buf: body, what: "Ping"}
	v := r.u64("payload")
	return v, r.done()
}

// Produce carries one record (C→S). The body is the record body exactly as
// the producer framed it (see docs/FORMAT.md) and BodyCRC its CRC32C,
// which the broker verifies and stores as sent.
type Produce struct {
	Stream    []byte // empty with ProduceRouteBySubject: the broker routes by the record's subject
	Partition uint32 // PartitionAny: the broker picks it from the record's key
	Flags     uint8  // Produce* bits; ProduceHasOptions is set by the encoder from Options
	BodyCRC   uint32
	Options   ProduceOptions // sent only with CapProducers
	Body      []byte
}

// Type implements Message.
func (*Produce) Type() Type { return TypeProduce }

// AppendBody implements Message.
func (m *Produce) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	flags := m.Flags &^ ProduceHasOptions
	if !m.Options.IsZero() {
		flags |= ProduceHasOptions
	}
	dst = append(dst, flags)
	dst = le.AppendUint32(dst, m.BodyCRC)
	if flags&ProduceHasOptions != 0 {
		dst = appendProduceOptions(dst, &m.Options)
	}
	return append(dst, m.Body...)
}

// DecodeProduce decodes a Produce body; Stream and Body alias it. An
// unknown critical option fails with an error wrapping
// ErrUnsupportedOption, with the rest of m decoded: the record is refused
// and the connection stays.
func DecodeProduce(body []byte) (Produce, error) {
	r := reader{buf: body, what: "Produce"}
	m := Produce{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Flags: r.u8("flags"), BodyCRC: r.u32("body crc")}
	if m.Flags&ProduceHasOptions == 0 || r.err != nil {
		m.Body = r.rest()
		return m, r.err
	}
	block := r.bytes16("options")
	m.Body = r.rest()
	if r.err != nil {
		return m, r.err
	}
	var err error
	m.Options, err = decodeProduceOptions(block)
	return m, err
}

// ProduceAck says a record is durable (S→C).
type ProduceAck struct {
	Partition uint32
	Offset    uint64
	// Flags (Ack* bits) are sent only when set, and only on connections
	// with CapProducers; a plain ack is 12 bytes.
	Flags uint8
}

// Type implements Message.
func (*ProduceAck) Type() Type { return TypeProduceAck }

// AppendBody implements Message.
func (m *ProduceAck) AppendBody(dst []byte) []byte {
	dst = le.AppendUint32(dst, m.Partition)
	dst = le.AppendUint64(dst, m.Offset)
	if m.Flags != 0 {
		dst = append(dst, m.Flags)
	}
	return dst
}

// DecodeProduceAck decodes a ProduceAck body.
func DecodeProduceAck(body []byte) (ProduceAck, error) {
	r := reader{buf: body, what: "ProduceAck"}
	m := ProduceAck{Partition: r.u32("partition"), Offset: r.u64("offset")}
	if r.err == nil && len(r.buf) > 0 {
		if m.Flags = r.u8("flags"); m.Flags == 0 {
			return m, fmt.Errorf("%w: ProduceAck: a flags byte of zero is sent by leaving it out", ErrMalformed)
		}
	}
	return m, r.done()
}

// Consume modes: a group's type, fixed when the group is created.
const (
	ModeWork      uint8 = 1 // competing consumers, each record leased to one
	ModeKeyShared uint8 = 2 // competing consumers, each key owned by one of them, per-key order
	ModeBroadcast uint8 = 3 // one reader at a time, no leases, settled by a cumulative ack
	ModeStreaming uint8 = 4 // no leases: the consumer commits its position
)

// Consume flag bits.
const (
	ConsumeNoWait uint8 = 1 << 0 // answer at once even when nothing is ready
)

// Consume asks for records for a group (C→S). The answer is zero or more
// Deliver and Gap frames with the same request id, then one ConsumeEnd.
type Consume struct {
	Stream     []byte
	Partition  uint32
	Group      []byte
	Mode       uint8
	Flags      uint8
	MaxRecords uint32
	MaxBytes   uint32 // body bytes; at least one record is delivered whatever its size
	WaitMs     uint32 // wait this long for a first record when none is ready
	LeaseMs    uint32 // visibility timeout of the leases; 0 = the broker's default
	// Filter, when set, is a subject pattern (CapStreams): only matching
	// records are delivered, the rest reach the consumer as GapFiltered
	// ranges. A group's own filter (OpenGroup) wins over it. The field is
	// optional on the wire: absent when empty, so older peers interoperate.
	Filter []byte
}

// Type implements Message.
func (*Consume) Type() Type { return TypeConsume }

// AppendBody implements Message.
func (m *Consume) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	dst = appendBytes16(dst, m.Group)
	dst = append(dst, m.Mode, m.Flags)
	dst = le.AppendUint32(dst, m.MaxRecords)
	dst = le.AppendUint32(dst, m.MaxBytes)
	dst = le.AppendUint32(dst, m.WaitMs)
	dst = le.AppendUint32(dst, m.LeaseMs)
	if len(m.Filter) > 0 {
		dst = appendBytes16(dst, m.Filter)
	}
	return dst
}

// DecodeConsume decodes a Consume body; Stream and Group alias it.
func DecodeConsume(body []byte) (Consume, error) {
	r := reader{buf: body, what: "Consume"}
	m := Consume{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.bytes16("group"),
		Mode: r.u8("mode"), Flags: r.u8("flags"), MaxRecords: r.u32("max records"), MaxBytes: r.u32("max bytes"),
		WaitMs: r.u32("wait ms"), LeaseMs: r.u32("lease ms")}
	m.Filter = r.optionalBytes16("filter")
	return m, r.done()
}

// Deliver flag bits.
const (
	DeliverRedelivered uint8 = 1 << 0
)

// Deliver carries one record answering a Consume (S→C).
type Deliver struct {
	Partition uint32
	Offset    uint64
	Lease     uint64 // token to quote in Ack; a stale one is fenced
	Attempt   uint32 // 1 on the first delivery
	Flags     uint8
	Timestamp int64 // broker wall clock when stored, unix ns
	BodyCRC   uint32
	Body      []byte // the record body as the producer framed it
}

// Type implements Message.
func (*Deliver) Type() Type { return TypeDeliver }

// AppendBody implements Message.
func (m *Deliver) AppendBody(dst []byte) []byte {
	dst = le.AppendUint32(dst, m.Partition)
	dst = le.AppendUint64(dst, m.Offset)
	dst = le.AppendUint64(dst, m.Lease)
	dst = le.AppendUint32(dst, m.Attempt)
	dst = append(dst, m.Flags)
	dst = le.AppendUint64(dst, uint64(m.Timestamp))
	dst = le.AppendUint32(dst, m.BodyCRC)
	return append(dst, m.Body...)
}

// DecodeDeliver decodes a Deliver body; Body aliases it.
func DecodeDeliver(body []byte) (Deliver, error) {
	r := reader{buf: body, what: "Deliver"}
	m := Deliver{Partition: r.u32("partition"), Offset: r.u64("offset"), Lease: r.u64("lease"),
		Attempt: r.u32("attempt"), Flags: r.u8("flags"), Timestamp: int64(r.u64("timestamp")), BodyCRC: r.u32("body crc")}
	m.Body = r.rest()
	return m, r.err
}

// ConsumeEnd reasons.
const (
	EndLimit    uint8 = 0 // max records or bytes reached
	EndCaughtUp uint8 = 1 // nothing more is ready now
	EndWaited   uint8 = 2 // the wait elapsed with nothing new
)

// ConsumeEnd closes the answer to a Consume (S→C).
type ConsumeEnd struct {
	Delivered uint32
	Reason    uint8
}

// Type implements Message.
func (*ConsumeEnd) Type() Type { return TypeConsumeEnd }

// AppendBody implements Message.
func (m *ConsumeEnd) AppendBody(dst []byte) []byte {
	dst = le.AppendUint32(dst, m.Delivered)
	return append(dst, m.Reason)
}

// DecodeConsumeEnd decodes a ConsumeEnd body.
func DecodeConsumeEnd(body []byte) (ConsumeEnd, error) {
	r := reader{buf: body, what: "ConsumeEnd"}
	m := ConsumeEnd{Delivered: r.u32("delivered"), Reason: r.u8("reason")}
	return m, r.done()
}

// Ack operations. Ops 0–4 take (offset, lease) entries of leased
// records; AckRange takes (from, to) pairs; AckCumulative and AckCommit
// take entries whose offset is the new position (lease 0).
const (
	AckDone       uint8 = 0 // processed: commit
	AckNack       uint8 = 1 // not processed: redeliver after the delay
	AckExtend     uint8 = 2 // still in progress: renew the lease for delay_ms (0 = the group's visibility)
	AckTerm       uint8 = 3 // settle without processing and without the dead-letter queue
	AckReject     uint8 = 4 // move to the dead-letter queue now
	AckRange      uint8 = 5 // settle every record in [offset, lease) leased to this connection
	AckCumulative uint8 = 6 // broadcast: every offset below the entry's offset is done
	AckCommit     uint8 = 7 // streaming: store the entry's offset as the committed position
)

// NackDefaultDelay asks for the group's backoff schedule.
const NackDefaultDelay = math.MaxUint32

// AckEntry names one leased record.
type AckEntry struct {
	Offset uint64
	Lease  uint64
}

// MaxAckEntries bounds the entries of one Ack.
const MaxAckEntries = 4096

// Ack acknowledges (or returns) leased records of one group (C→S).
type Ack struct {
	Stream    []byte
	Partition uint32
	Group     []byte
	Op        uint8
	DelayMs   uint32 // Nack only: NackDefaultDelay = the group's backoff
	Entries   []AckEntry
}

// Type implements Message.
func (*Ack) Type() Type { return TypeAck }

// AppendBody implements Message.
func (m *Ack) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	dst = appendBytes16(dst, m.Group)
	dst = append(dst, m.Op)
	dst = le.AppendUint32(dst, m.DelayMs)
	dst = le.AppendUint16(dst, uint16(min(len(m.Entries), MaxAckEntries)))
	for _, e := range m.Entries[:min(len(m.Entries), MaxAckEntries)] {
		dst = le.AppendUint64(dst, e.Offset)
		dst = le.AppendUint64(dst, e.Lease)
	}
	return dst
}

// DecodeAck decodes an Ack body into entries, reusing its capacity so a
// connection decodes acks without allocating.
func DecodeAck(body []byte, entries []AckEntry) (Ack, error) {
	r := reader{buf: body, what: "Ack"}
	m := Ack{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.bytes16("group"),
		Op: r.u8("op"), DelayMs: r.u32("delay ms")}
	count := int(r.u16("count"))
	if count > MaxAckEntries {
		return m, fmt.Errorf("%w: Ack: %d entries, at most %d", ErrMalformed, count, MaxAckEntries)
	}
	if r.err == nil && len(r.buf) != count*16 {
		return m, fmt.Errorf("%w: Ack: %d entries need %d bytes, have %d", ErrMalformed, count, count*16, len(r.buf))
	}
	m.Entries = entries[:0]
	for i := 0; i < count && r.err == nil; i++ {
		m.Entries = append(m.Entries, AckEntry{Offset: r.u64("offset"), Lease: r.u64("lease")})
	}
	return m, r.done()
}

// AckResult statuses.
const (
	AckOK         uint8 = 0 // done
	AckStale      uint8 = 1 // the lease was not the current one (fenced); nothing changed
	AckUnknown    uint8 = 2 // the record is not leased (already acked, or never delivered)
	AckExpired    uint8 = 3 // the lease lapsed (timeout or its holder left); nothing changed, the record will be redelivered
	AckCapped     uint8 = 4 // Extend: extended, but only up to the hard cap of the attempt
	AckOutOfRange uint8 = 5 // cumulative ack or commit past what the group can have seen; nothing changed
)

// AckResult answers an Ack with one status per entry (S→C).
type AckResult struct {
	Statuses []uint8
}

// Type implements Message.
func (*AckResult) Type() Type { return TypeAckResult }

// AppendBody implements Message.
func (m *AckResult) AppendBody(dst []byte) []byte {
	dst = le.AppendUint16(dst, uint16(min(len(m.Statuses), MaxAckEntries)))
	return append(dst, m.Statuses[:min(len(m.Statuses), MaxAckEntries)]...)
}

// DecodeAckResult decodes an AckResult body; Statuses aliases it.
func DecodeAckResult(body []byte) (AckResult, error) {
	r := reader{buf: body, what: "AckResult"}
	count := int(r.u16("count"))
	if r.err == nil && len(r.buf) != count {
		return AckResult{}, fmt.Errorf("%w: AckResult: %d statuses, %d bytes", ErrMalformed, count, len(r.buf))
	}
	return AckResult{Statuses: r.rest()}, r.err
}

// Gap reasons.
const (
	GapRetention uint8 = 1 // removed by retention before the group read it
	GapLost      uint8 = 2 // lost to damage or a missing segment, reported by recovery
	GapFiltered  uint8 = 3 // skipped: no record in the range matches the consumer's subject filter
	GapCompacted uint8 = 4 // removed by compaction: a later record of the same key superseded each
)

// Gap tells a consumer that offsets [From, To) will never be delivered
// (S→C). It arrives inside the answer to a Consume.
type Gap struct {
	Partition uint32
	From      uint64
	To        uint64 // exclusive
	Reason    uint8
	Detail    string
}

// Type implements Message.
func (*Gap) Type() Type { return TypeGap }

// AppendBody implements Message.
func (m *Gap) AppendBody(dst []byte) []byte {
	dst = le.AppendUint32(dst, m.Partition)
	dst = le.AppendUint64(dst, m.From)
	dst = le.AppendUint64(dst, m.To)
	dst = append(dst, m.Reason)
	return appendString16(dst, m.Detail)
}

// DecodeGap decodes a Gap body.
func DecodeGap(body []byte) (Gap, error) {
	r := reader{buf: body, what: "Gap"}
	m := Gap{Partition: r.u32("partition"), From: r.u64("from"), To: r.u64("to"), Reason: r.u8("reason")}
	m.Detail = string(r.bytes16("detail"))
	if err := r.done(); err != nil {
		return m, err
	}
	if m.To < m.From {
		return m, fmt.Errorf("%w: Gap: to %d below from %d", ErrMalformed, m.To, m.From)
	}
	return m, nil
}
