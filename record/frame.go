package record

import (
	"fmt"
	"slices"

	"github.com/zeebo/xxh3"
)

// Record frame layout (docs/FORMAT.md, "Record frame"). The broker wraps
// each body it accepts in one frame, stores the frame and delivers it to
// consumers byte for byte.
const (
	// FrameHeaderSize is the checksummed header in front of the body.
	FrameHeaderSize = 36
	// FrameTrailerSize is the frame length repeated after the body.
	FrameTrailerSize = 4
	// FrameVersion is the record frame version this binary writes and the
	// newest it reads.
	FrameVersion = 1
	// BodyHashThreshold is the body size from which a frame also carries
	// an xxh3-64 of its body: a 32-bit CRC alone detects too little over
	// that many bytes.
	BodyHashThreshold = 64 << 10
	// DefaultMaxBody is the default maximum record body (16 MiB).
	DefaultMaxBody = 16 << 20
	// AbsoluteMaxBody bounds any configuration: a frame length must fit in
	// a u32 with room for the header.
	AbsoluteMaxBody = 1 << 30

	// prefixSize is the prefix every stored frame shares: magic (2),
	// version (1), flags (1), frame length (4).
	prefixSize    = 8
	frameFlagHash = 1 << 0
)

// frameMagic opens every record frame.
var frameMagic = [2]byte{'I', 'R'}

// FrameHeader is the decoded, CRC-checked header of a record frame.
type FrameHeader struct {
	Version     uint8
	Flags       uint8
	FrameLength uint32
	Offset      uint64
	Timestamp   int64 // broker wall clock, unix nanoseconds; data only
	BodyLength  uint32
	BodyCRC     uint32 // CRC32C of the body, computed by the producer
}

// HasBodyHash reports whether the frame carries an xxh3-64 of its body.
func (h FrameHeader) HasBodyHash() bool { return h.Flags&frameFlagHash != 0 }

// FrameSize returns the bytes a record frame around a body of bodyLength
// bytes occupies.
func FrameSize(bodyLength int) int {
	size := FrameHeaderSize + bodyLength + FrameTrailerSize
	if bodyLength >= BodyHashThreshold {
		size += 8
	}
	return size
}

// IsFrame reports whether b starts with the magic of a record frame. It
// checks nothing else: ParseFrameHeader does.
func IsFrame(b []byte) bool { return len(b) >= 2 && [2]byte(b[0:2]) == frameMagic }

// AppendFrame appends one record frame to dst. bodyCRC is the producer's
// CRC32C of body and bodyHash the value of BodyHash(body); both are stored
// as given, so a body damaged before this call is caught by every reader.
func AppendFrame(dst []byte, offset uint64, timestamp int64, body []byte, bodyCRC uint32, bodyHash uint64) []byte {
	size := FrameSize(len(body))
	start := len(dst)
	dst = slices.Grow(dst, size)[:len(dst)+size]
	b := dst[start : start+size]
	var flags uint8
	if len(body) >= BodyHashThreshold {
		flags |= frameFlagHash
	}
	b[0], b[1] = frameMagic[0], frameMagic[1]
	b[2] = FrameVersion
	b[3] = flags
	le.PutUint32(b[4:8], uint32(size))
	le.PutUint64(b[8:16], offset)
	le.PutUint64(b[16:24], uint64(timestamp))
	le.PutUint32(b[24:28], uint32(len(body)))
	le.PutUint32(b[28:32], bodyCRC)
	le.PutUint32(b[32:36], Checksum(b[0:32]))
	copy(b[FrameHeaderSize:], body)
	tail := FrameHeaderSize + len(body)
	if flags&frameFlagHash != 0 {
		le.PutUint64(b[tail:tail+8], bodyHash)
		tail += 8
	}
	le.PutUint32(b[tail:tail+4], uint32(size))
	return dst
}

// ParseFrameHeader checks and decodes the header at the start of b. It
// reads at most FrameHeaderSize bytes and rejects a body longer than
// maxBody (or AbsoluteMaxBody) before anything is allocated for it.
func ParseFrameHeader(b []byte, maxBody uint32) (FrameHeader, error) {
	if len(b) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: record header needs %d bytes, have %d", ErrShort, FrameHeaderSize, len(b))
	}
	if !IsFrame(b) {
		return FrameHeader{}, fmt.Errorf("%w: record magic %q", ErrCorrupt, b[0:2])
	}
	if got, want := le.Uint32(b[32:36]), Checksum(b[0:32]); got != want {
		return FrameHeader{}, fmt.Errorf("%w: record header checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	h := FrameHeader{
		Version:     b[2],
		Flags:       b[3],
		FrameLength: le.Uint32(b[4:8]),
		Offset:      le.Uint64(b[8:16]),
		Timestamp:   int64(le.Uint64(b[16:24])),
		BodyLength:  le.Uint32(b[24:28]),
		BodyCRC:     le.Uint32(b[28:32]),
	}
	if b[2] > EncryptedFrameVersion {
		return h, fmt.Errorf("%w: record frame version %d (this binary knows %d)", ErrTooNew, b[2], EncryptedFrameVersion)
	}
	if b[2] == 0 {
		return h, fmt.Errorf("%w: record frame version 0", ErrCorrupt)
	}
	if h.Version == EncryptedFrameVersion && h.Flags&frameFlagEncrypted == 0 {
		return h, fmt.Errorf("%w: record frame version %d without the encrypted flag", ErrCorrupt, b[2])
	}
	limit := min(maxBody, AbsoluteMaxBody)
	if h.Encrypted() {
		// The envelope is the producer's body plus a fixed overhead; the
		// limit is on the producer's body.
		limit += EncryptionOverhead
	}
	if h.BodyLength > limit {
		return h, fmt.Errorf("%w: record body of %d bytes (maximum %d)", ErrTooLarge, h.BodyLength, maxBody)
	}
	if want := uint32(FrameSize(int(h.BodyLength))); h.FrameLength != want {
		return h, fmt.Errorf("%w: record frame length %d, body length %d implies %d", ErrCorrupt, h.FrameLength, h.BodyLength, want)
	}
	if h.HasBodyHash() != (h.BodyLength >= BodyHashThreshold) {
		return h, fmt.Errorf("%w: record xxh3 flag does not match body length %d", ErrCorrupt, h.BodyLength)
	}
	return h, nil
}

// VerifyFrame checks the rest of a record frame whose header h was parsed
// from frame[0:FrameHeaderSize] (length trailer, body CRC32C, and the xxh3
// of a large body) and returns its body, a sub-slice of frame. frame must
// hold at least h.FrameLength bytes.
func VerifyFrame(frame []byte, h FrameHeader) ([]byte, error) {
	if len(frame) < int(h.FrameLength) {
		return nil, fmt.Errorf("%w: record frame needs %d bytes, have %d", ErrShort, h.FrameLength, len(frame))
	}
	end := int(h.FrameLength)
	if got := le.Uint32(frame[end-4 : end]); got != h.FrameLength {
		return nil, fmt.Errorf("%w: record trailer length %d, header says %d", ErrCorrupt, got, h.FrameLength)
	}
	body := frame[FrameHeaderSize : FrameHeaderSize+int(h.BodyLength)]
	if got := Checksum(body); got != h.BodyCRC {
		return nil, fmt.Errorf("%w: record body checksum %08x, header says %08x", ErrCorrupt, got, h.BodyCRC)
	}
	if h.HasBodyHash() {
		at := FrameHeaderSize + int(h.BodyLength)
		if got, want := xxh3.Hash(body), le.Uint64(frame[at:at+8]); got != want {
			return nil, fmt.Errorf("%w: record body xxh3 %016x, stored %016x", ErrCorrupt, got, want)
		}
	}
	return body, nil
}

// ParseFrame checks and decodes the record frame at the start of b and
// returns its header and body, which aliases b.
func ParseFrame(b []byte, maxBody uint32) (FrameHeader, []byte, error) {
	h, err := ParseFrameHeader(b, maxBody)
	if err != nil {
		return h, nil, err
	}
	body, err := VerifyFrame(b, h)
	return h, body, err
}

// OtherFrameLength returns the length of the stored frame at the start of
// b that is not a record frame, read from the prefix every stored frame
// shares: magic (2), version (1), flags (1), frame length (4). A reader of
// a run of delivered frames (docs/WIRE.md, DeliverBatch) steps over such a
// frame (a commit frame closing a producer batch) without decoding it. It
// fails with ErrCorrupt for zero magic or a length shorter than the prefix,
// and with ErrShort when b ends before the frame does.
func OtherFrameLength(b []byte) (int, error) {
	if len(b) < prefixSize {
		return 0, fmt.Errorf("%w: frame prefix needs %d bytes, have %d", ErrShort, prefixSize, len(b))
	}
	if b[0] == 0 && b[1] == 0 {
		return 0, fmt.Errorf("%w: zero bytes where a frame should start", ErrCorrupt)
	}
	length := uint64(le.Uint32(b[4:8]))
	if length < prefixSize {
		return 0, fmt.Errorf("%w: %q frame of %d bytes is shorter than its prefix", ErrCorrupt, b[0:2], length)
	}
	if length > uint64(len(b)) {
		return 0, fmt.Errorf("%w: %q frame of %d bytes, have %d", ErrShort, b[0:2], length, len(b))
	}
	return int(length), nil
}
