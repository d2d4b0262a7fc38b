package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Envelope layout.
const (
	// ProtocolVersion is the version this package speaks.
	ProtocolVersion = 1
	// HeaderSize is the envelope: length (4), type (1), request id (4).
	HeaderSize = 9
	// minLength is the smallest valid length field: type and request id.
	minLength = 5
	// DefaultMaxFrame bounds a frame: a 16 MiB record plus room for its
	// envelope and fields.
	DefaultMaxFrame = 16<<20 + 64<<10
	// MinMaxFrame is the smallest maximum either side may announce.
	MinMaxFrame = 64 << 10
)

var le = binary.LittleEndian

// Sentinel errors.
var (
	// ErrIncomplete means the buffer holds only part of a frame; read more.
	ErrIncomplete = errors.New("wire: incomplete frame")
	// ErrFrameTooLarge means a length field exceeds the maximum frame; the
	// stream cannot be trusted past it.
	ErrFrameTooLarge = errors.New("wire: frame exceeds the maximum frame size")
	// ErrMalformed means a frame or body is not what its type says.
	ErrMalformed = errors.New("wire: malformed frame")
	// ErrUnknownType means the type byte names no frame this version knows.
	ErrUnknownType = errors.New("wire: unknown frame type")
)

// Frame is one decoded envelope. Body aliases the buffer it was parsed
// from.
type Frame struct {
	Type      Type
	RequestID uint32
	Body      []byte
}

// ParseFrame reads the frame at the start of buf. It returns the frame and
// the bytes it spans, ErrIncomplete when buf ends inside the frame (the
// returned int is then the total bytes the frame needs, or HeaderSize while
// the length field itself has not arrived), or ErrFrameTooLarge /
// ErrMalformed as soon as the length field cannot be right. The type is not checked here, so a peer
// can answer an unknown type with a structured error and carry on.
func ParseFrame(buf []byte, maxFrame uint32) (Frame, int, error) {
	if len(buf) < 4 {
		return Frame{}, HeaderSize, ErrIncomplete
	}
	// Judge the length as soon as it arrives: a peer that sent a bad one
	// may send nothing more.
	length := le.Uint32(buf[0:4])
	switch {
	case length < minLength:
		return Frame{}, 0, fmt.Errorf("%w: length %d below the %d-byte minimum", ErrMalformed, length, minLength)
	case length > maxFrame || uint64(length)+4 > uint64(math.MaxInt):
		// The second test matters on 32-bit platforms, where int is
		// smaller than the largest length a peer can claim.
		return Frame{}, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, length, maxFrame)
	}
	total := int(length) + 4
	if len(buf) < total {
		return Frame{}, total, ErrIncomplete
	}
	return Frame{Type: Type(buf[4]), RequestID: le.Uint32(buf[5:9]), Body: buf[HeaderSize:total:total]}, total, nil
}

// AppendFrame appends a frame with the given body to dst.
func AppendFrame(dst []byte, t Type, requestID uint32, body []byte) []byte {
	dst = le.AppendUint32(dst, uint32(minLength+len(body)))
	dst = append(dst, byte(t))
	dst = le.AppendUint32(dst, requestID)
	return append(dst, body...)
}

// Message is a frame body this package can encode.
type Message interface {
	// Type is the frame type that carries the message.
	Type() Type
	// AppendBody appends the encoded body to dst.
	AppendBody(dst []byte) []byte
}

// Append appends the frame carrying m to dst, encoding the body in place
// (no intermediate buffer).
func Append(dst []byte, requestID uint32, m Message) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(m.Type()), 0, 0, 0, 0)
	le.PutUint32(dst[start+5:], requestID)
	dst = m.AppendBody(dst)
	le.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendProduceAck appends a ProduceAck frame without going through the
// Message interface, so the broker's ack path does not allocate.
func AppendProduceAck(dst []byte, requestID, partition uint32, offset uint64) []byte {
	dst = le.AppendUint32(dst, minLength+12)
	dst = append(dst, byte(TypeProduceAck))
	dst = le.AppendUint32(dst, requestID)
	dst = le.AppendUint32(dst, partition)
	return le.AppendUint64(dst, offset)
}
