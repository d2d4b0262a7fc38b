package format

import (
	"fmt"
	"slices"
)

// ControlHeaderSize is the size of a control frame's header; its payload
// follows.
const ControlHeaderSize = 32

// Control is a frame that owns no offsets: a replicated log's entry that
// carries no records (a new leader's no-op, a configuration change, a
// control payload). It stands alone in its batch, which a commit frame with
// a record count of zero closes; readers of records walk past both.
type Control struct {
	Token   uint64 // the segment's token
	Type    uint8  // the entry type, the replica's to define
	Payload []byte // aliases the decoded bytes
}

// ControlFrameSize is the size of a control frame with a payload of n bytes.
func ControlFrameSize(n int) int { return ControlHeaderSize + n }

// AppendControl appends the encoding of c to dst.
func AppendControl(dst []byte, c Control) []byte {
	start := len(dst)
	dst = slices.Grow(dst, ControlHeaderSize+len(c.Payload))[:len(dst)+ControlHeaderSize]
	b := dst[start : start+ControlHeaderSize]
	clear(b)
	putPrefix(b, magicControl, 0, uint32(ControlHeaderSize+len(c.Payload)))
	le.PutUint64(b[8:16], c.Token)
	b[16] = c.Type
	le.PutUint32(b[20:24], uint32(len(c.Payload)))
	le.PutUint32(b[24:28], CRC(c.Payload))
	le.PutUint32(b[28:32], CRC(b[0:28]))
	return append(dst, c.Payload...)
}

// DecodeControl checks and decodes a control frame at the start of b. The
// header is checked before the payload length is trusted, and a payload
// longer than maxPayload is refused before it is read.
func DecodeControl(b []byte, maxPayload uint32) (Control, error) {
	if len(b) < ControlHeaderSize {
		return Control{}, fmt.Errorf("%w: control frame needs %d bytes, have %d", ErrShort, ControlHeaderSize, len(b))
	}
	if [2]byte(b[0:2]) != magicControl {
		return Control{}, fmt.Errorf("%w: control frame magic %q", ErrCorrupt, b[0:2])
	}
	if got, want := le.Uint32(b[28:32]), CRC(b[0:28]); got != want {
		return Control{}, fmt.Errorf("%w: control frame checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	if b[2] > FrameVersion {
		return Control{}, fmt.Errorf("%w: control frame version %d (this binary knows %d)", ErrTooNew, b[2], FrameVersion)
	}
	length, payloadLength := le.Uint32(b[4:8]), le.Uint32(b[20:24])
	if b[2] == 0 || payloadLength > maxPayload || uint64(length) != ControlHeaderSize+uint64(payloadLength) {
		return Control{}, fmt.Errorf("%w: control frame version %d length %d payload %d (at most %d)", ErrCorrupt, b[2], length, payloadLength, maxPayload)
	}
	if uint64(len(b)) < uint64(length) {
		return Control{}, fmt.Errorf("%w: control frame of %d bytes, have %d", ErrShort, length, len(b))
	}
	payload := b[ControlHeaderSize:length]
	if got, want := le.Uint32(b[24:28]), CRC(payload); got != want {
		return Control{}, fmt.Errorf("%w: control payload checksum %08x, computed %08x", ErrCorrupt, want, got)
	}
	return Control{Token: le.Uint64(b[8:16]), Type: b[16], Payload: payload}, nil
}
