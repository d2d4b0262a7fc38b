package record

import (
	"fmt"
	"iter"
	"math"
	"slices"
)

// Body layout constants.
const (
	// BodyVersion is the body version this binary writes and the newest it
	// reads.
	BodyVersion = 1
	// BodyFixedSize is the fixed prefix every body starts with.
	BodyFixedSize = 20
	// BodyProducerSize is the producer id and sequence that follow the
	// prefix when the producer flag is set.
	BodyProducerSize = 16

	bodyFlagProducer   = 1 << 0
	bodyFlagTombstone  = 1 << 1
	maxHeaderNameBytes = math.MaxUint16
)

// Header is one record header: a name and an opaque value.
type Header struct {
	Name  string
	Value []byte
}

// Body is a record body before encoding. The producer encodes it and
// computes its CRC32C; from then on the bytes travel and rest unchanged.
type Body struct {
	Codec   Codec
	Key     []byte
	Subject []byte
	Headers []Header
	// Payload is the stored payload: compressed when Codec is not
	// CodecNone.
	Payload []byte
	// RawLength is the payload length before compression; it is the
	// Payload length when Codec is CodecNone.
	RawLength uint32
	// HasProducer marks a body carrying a producer id and sequence.
	HasProducer bool
	ProducerID  uint64
	Sequence    uint64
	// Tombstone marks a record that deletes its key from a compacted
	// stream: it has a key and no payload.
	Tombstone bool
}

// BodySize returns the encoded size of b.
func BodySize(b Body) int {
	size := BodyFixedSize + len(b.Key) + len(b.Subject) + len(b.Payload) + headersSize(b.Headers)
	if b.HasProducer {
		size += BodyProducerSize
	}
	return size
}

func headersSize(headers []Header) int {
	size := 0
	for _, h := range headers {
		size += 2 + len(h.Name) + 4 + len(h.Value)
	}
	return size
}

// AppendBody appends the encoding of b to dst. It fails with ErrMalformed,
// returning dst as it was, when a field is longer than its length prefix
// allows or an uncompressed payload's RawLength is neither zero nor its
// length.
func AppendBody(dst []byte, b Body) ([]byte, error) {
	hdrBytes := headersSize(b.Headers)
	switch {
	case len(b.Key) > math.MaxUint16:
		return dst, fmt.Errorf("%w: key of %d bytes (maximum %d)", ErrMalformed, len(b.Key), math.MaxUint16)
	case len(b.Subject) > math.MaxUint16:
		return dst, fmt.Errorf("%w: subject of %d bytes (maximum %d)", ErrMalformed, len(b.Subject), math.MaxUint16)
	case uint64(hdrBytes) > math.MaxUint32 || uint64(len(b.Payload)) > math.MaxUint32:
		return dst, fmt.Errorf("%w: headers or payload beyond 4 GiB", ErrMalformed)
	case b.Codec == CodecNone && b.RawLength != 0 && b.RawLength != uint32(len(b.Payload)):
		return dst, fmt.Errorf("%w: raw length %d differs from an uncompressed payload of %d", ErrMalformed, b.RawLength, len(b.Payload))
	case b.Tombstone && (len(b.Key) == 0 || len(b.Payload) != 0):
		return dst, fmt.Errorf("%w: a tombstone needs a key and no payload", ErrMalformed)
	}
	for _, h := range b.Headers {
		if len(h.Name) > maxHeaderNameBytes || uint64(len(h.Value)) > math.MaxUint32 {
			return dst, fmt.Errorf("%w: header %.32q too long", ErrMalformed, h.Name)
		}
	}
	raw := b.RawLength
	if b.Codec == CodecNone {
		raw = uint32(len(b.Payload))
	}
	var flags uint16
	if b.HasProducer {
		flags |= bodyFlagProducer
	}
	if b.Tombstone {
		flags |= bodyFlagTombstone
	}
	start := len(dst)
	dst = slices.Grow(dst, BodyFixedSize)[:len(dst)+BodyFixedSize]
	fixed := dst[start:]
	fixed[0] = BodyVersion
	fixed[1] = byte(b.Codec)
	le.PutUint16(fixed[2:4], flags)
	le.PutUint16(fixed[4:6], uint16(len(b.Key)))
	le.PutUint16(fixed[6:8], uint16(len(b.Subject)))
	le.PutUint32(fixed[8:12], uint32(hdrBytes))
	le.PutUint32(fixed[12:16], uint32(len(b.Payload)))
	le.PutUint32(fixed[16:20], raw)
	if b.HasProducer {
		dst = le.AppendUint64(dst, b.ProducerID)
		dst = le.AppendUint64(dst, b.Sequence)
	}
	dst = append(dst, b.Key...)
	dst = append(dst, b.Subject...)
	for _, h := range b.Headers {
		dst = le.AppendUint16(dst, uint16(len(h.Name)))
		dst = append(dst, h.Name...)
		dst = le.AppendUint32(dst, uint32(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	return append(dst, b.Payload...), nil
}

// View is a parsed body whose byte fields alias the input: it is valid as
// long as the input is. Each field's capacity is clipped to its length, so
// appending to one never overwrites the next.
type View struct {
	Version     uint8
	Codec       Codec
	Key         []byte
	Subject     []byte
	HeaderBytes []byte // the encoded header list; iterate with Headers
	Payload     []byte
	RawLength   uint32
	HasProducer bool
	ProducerID  uint64
	Sequence    uint64
	Tombstone   bool
}

// Parse decodes and validates an encoded body. Every length is checked
// against the input before it is used, and the header list is walked to its
// end; nothing is allocated unless the body is refused. A body is not
// self-delimiting (its length comes from the frame around it), so b must be
// exactly one body. A version newer than BodyVersion fails with ErrTooNew,
// anything else that does not add up with ErrMalformed. Parse does not
// check the CRC32C: the caller has done so (Checksum) before it trusts
// the bytes.
func Parse(b []byte) (View, error) {
	if len(b) < BodyFixedSize {
		return View{}, fmt.Errorf("%w: body of %d bytes is shorter than its %d-byte prefix", ErrMalformed, len(b), BodyFixedSize)
	}
	v := View{Version: b[0], Codec: Codec(b[1])}
	if v.Version > BodyVersion {
		return v, fmt.Errorf("%w: body version %d (this binary knows %d)", ErrTooNew, v.Version, BodyVersion)
	}
	if v.Version == 0 {
		return v, fmt.Errorf("%w: body version 0", ErrMalformed)
	}
	flags := le.Uint16(b[2:4])
	keyLen := uint64(le.Uint16(b[4:6]))
	subjectLen := uint64(le.Uint16(b[6:8]))
	headerLen := uint64(le.Uint32(b[8:12]))
	payloadLen := uint64(le.Uint32(b[12:16]))
	v.RawLength = le.Uint32(b[16:20])
	v.HasProducer = flags&bodyFlagProducer != 0
	v.Tombstone = flags&bodyFlagTombstone != 0
	at := uint64(BodyFixedSize)
	if v.HasProducer {
		at += BodyProducerSize
	}
	if want := at + keyLen + subjectLen + headerLen + payloadLen; want != uint64(len(b)) {
		return v, fmt.Errorf("%w: fields add up to %d bytes, body has %d", ErrMalformed, want, len(b))
	}
	if v.HasProducer {
		v.ProducerID = le.Uint64(b[BodyFixedSize : BodyFixedSize+8])
		v.Sequence = le.Uint64(b[BodyFixedSize+8 : BodyFixedSize+16])
	}
	v.Key = b[at : at+keyLen : at+keyLen]
	at += keyLen
	v.Subject = b[at : at+subjectLen : at+subjectLen]
	at += subjectLen
	v.HeaderBytes = b[at : at+headerLen : at+headerLen]
	at += headerLen
	v.Payload = b[at:len(b):len(b)]
	if v.Codec == CodecNone && v.RawLength != uint32(len(v.Payload)) {
		return v, fmt.Errorf("%w: raw length %d differs from an uncompressed payload of %d", ErrMalformed, v.RawLength, len(v.Payload))
	}
	if v.Tombstone && (len(v.Key) == 0 || len(v.Payload) != 0) {
		return v, fmt.Errorf("%w: a tombstone needs a key and no payload", ErrMalformed)
	}
	if err := validateHeaders(v.HeaderBytes); err != nil {
		return v, err
	}
	return v, nil
}

func validateHeaders(b []byte) error {
	for name, value := range walkHeaders(b) {
		if name == nil && value == nil {
			return fmt.Errorf("%w: header list is truncated", ErrMalformed)
		}
	}
	return nil
}

// walkHeaders yields each header; a (nil, nil) pair means the list is
// truncated and ends the walk.
func walkHeaders(b []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for len(b) > 0 {
			if len(b) < 2 {
				yield(nil, nil)
				return
			}
			nameLen := int(le.Uint16(b[0:2]))
			if len(b) < 2+nameLen+4 {
				yield(nil, nil)
				return
			}
			name := b[2 : 2+nameLen : 2+nameLen]
			valueLen := uint64(le.Uint32(b[2+nameLen : 6+nameLen]))
			rest := b[6+nameLen:]
			if uint64(len(rest)) < valueLen {
				yield(nil, nil)
				return
			}
			if !yield(name, rest[:valueLen:valueLen]) {
				return
			}
			b = rest[valueLen:]
		}
	}
}

// Headers yields the name and value of each header in order. The slices
// alias the body. Parse has already validated the list; on a View built by
// hand with a broken list, Headers yields what parses and stops.
func (v View) Headers() iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for name, value := range walkHeaders(v.HeaderBytes) {
			if name == nil && value == nil {
				return
			}
			if !yield(name, value) {
				return
			}
		}
	}
}
