package format

import "fmt"

// Record frame layout (see package segment for the diagram).
const (
	RecordHeaderSize  = 36
	RecordTrailerSize = 4
	// XXH3Threshold is the body size from which a record also carries an
	// xxh3-64 of its body.
	XXH3Threshold = 64 << 10
	// DefaultMaxBody is the default maximum record body (16 MiB).
	DefaultMaxBody = 16 << 20
	// AbsoluteMaxBody bounds any configuration: a frame length must fit in
	// a u32 with room for the header.
	AbsoluteMaxBody = 1 << 30

	recordFlagXXH3 = 1 << 0
)

// RecordHeader is the decoded, CRC-checked header of a record frame.
type RecordHeader struct {
	Flags       uint8
	FrameLength uint32
	Offset      uint64
	Timestamp   int64 // broker wall clock, unix nanoseconds; data only
	BodyLength  uint32
	BodyCRC     uint32 // CRC32C of the body, computed by the producer
}

// HasXXH3 reports whether the frame carries an xxh3-64 of its body.
func (h RecordHeader) HasXXH3() bool { return h.Flags&recordFlagXXH3 != 0 }

// RecordFrameSize returns the bytes a record with a body of bodyLength
// bytes occupies on disk.
func RecordFrameSize(bodyLength int) int {
	size := RecordHeaderSize + bodyLength + RecordTrailerSize
	if bodyLength >= XXH3Threshold {
		size += 8
	}
	return size
}

// BodyHash returns the xxh3-64 a record with this body stores, or zero when
// the body is below XXH3Threshold. Callers compute it before taking locks.
func BodyHash(body []byte) uint64 {
	if len(body) < XXH3Threshold {
		return 0
	}
	return XXH3(body)
}

// AppendRecord appends one record frame to dst. bodyCRC is the producer's
// CRC32C of body and bodyHash the value of BodyHash(body); both are stored
// as given, so a body damaged before this call is caught by every reader.
func AppendRecord(dst []byte, offset uint64, timestamp int64, body []byte, bodyCRC uint32, bodyHash uint64) []byte {
	size := RecordFrameSize(len(body))
	start := len(dst)
	dst = grow(dst, size)
	b := dst[start : start+size]
	var flags uint8
	if len(body) >= XXH3Threshold {
		flags |= recordFlagXXH3
	}
	putPrefix(b, magicRecord, flags, uint32(size))
	le.PutUint64(b[8:16], offset)
	le.PutUint64(b[16:24], uint64(timestamp))
	le.PutUint32(b[24:28], uint32(len(body)))
	le.PutUint32(b[28:32], bodyCRC)
	le.PutUint32(b[32:36], CRC(b[0:32]))
	copy(b[RecordHeaderSize:], body)
	tail := RecordHeaderSize + len(body)
	if flags&recordFlagXXH3 != 0 {
		le.PutUint64(b[tail:tail+8], bodyHash)
		tail += 8
	}
	le.PutUint32(b[tail:tail+4], uint32(size))
	return dst
}

func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	grown := make([]byte, len(dst)+n, 2*cap(dst)+n)
	copy(grown, dst)
	return grown
}

// DecodeRecordHeader checks and decodes the header at the start of b. It
// reads at most RecordHeaderSize bytes and rejects a body longer than
// maxBody before anything is allocated for it.
func DecodeRecordHeader(b []byte, maxBody uint32) (RecordHeader, error) {
	if len(b) < RecordHeaderSize {
		return RecordHeader{}, fmt.Errorf("%w: record header needs %d bytes, have %d", ErrShort, RecordHeaderSize, len(b))
	}
	if [2]byte(b[0:2]) != magicRecord {
		return RecordHeader{}, fmt.Errorf("%w: record magic %q", ErrCorrupt, b[0:2])
	}
	if got, want := le.Uint32(b[32:36]), CRC(b[0:32]); got != want {
		return RecordHeader{}, fmt.Errorf("%w: record header checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	h := RecordHeader{
		Flags:       b[3],
		FrameLength: le.Uint32(b[4:8]),
		Offset:      le.Uint64(b[8:16]),
		Timestamp:   int64(le.Uint64(b[16:24])),
		BodyLength:  le.Uint32(b[24:28]),
		BodyCRC:     le.Uint32(b[28:32]),
	}
	if b[2] > FrameVersion {
		return h, fmt.Errorf("%w: record frame version %d (this binary knows %d)", ErrTooNew, b[2], FrameVersion)
	}
	if b[2] == 0 {
		return h, fmt.Errorf("%w: record frame version 0", ErrCorrupt)
	}
	if h.BodyLength > maxBody || h.BodyLength > AbsoluteMaxBody {
		return h, fmt.Errorf("%w: record body of %d bytes (maximum %d)", ErrTooLarge, h.BodyLength, maxBody)
	}
	if want := uint32(RecordFrameSize(int(h.BodyLength))); h.FrameLength != want {
		return h, fmt.Errorf("%w: record frame length %d, body length %d implies %d", ErrCorrupt, h.FrameLength, h.BodyLength, want)
	}
	if h.HasXXH3() != (h.BodyLength >= XXH3Threshold) {
		return h, fmt.Errorf("%w: record xxh3 flag does not match body length %d", ErrCorrupt, h.BodyLength)
	}
	return h, nil
}

// VerifyRecord checks the rest of a record frame whose header h was decoded
// from frame[0:RecordHeaderSize] and returns its body, a sub-slice of
// frame. frame must hold at least h.FrameLength bytes.
func VerifyRecord(frame []byte, h RecordHeader) ([]byte, error) {
	if len(frame) < int(h.FrameLength) {
		return nil, fmt.Errorf("%w: record frame needs %d bytes, have %d", ErrShort, h.FrameLength, len(frame))
	}
	end := int(h.FrameLength)
	if got := le.Uint32(frame[end-4 : end]); got != h.FrameLength {
		return nil, fmt.Errorf("%w: record trailer length %d, header says %d", ErrCorrupt, got, h.FrameLength)
	}
	body := frame[RecordHeaderSize : RecordHeaderSize+int(h.BodyLength)]
	if got := CRC(body); got != h.BodyCRC {
		return nil, fmt.Errorf("%w: record body checksum %08x, header says %08x", ErrCorrupt, got, h.BodyCRC)
	}
	if h.HasXXH3() {
		at := RecordHeaderSize + int(h.BodyLength)
		if got, want := XXH3(body), le.Uint64(frame[at:at+8]); got != want {
			return nil, fmt.Errorf("%w: record body xxh3 %016x, stored %016x", ErrCorrupt, got, want)
		}
	}
	return body, nil
}

// DecodeRecord checks and decodes the record frame at the start of b.
func DecodeRecord(b []byte, maxBody uint32) (RecordHeader, []byte, error) {
	h, err := DecodeRecordHeader(b, maxBody)
	if err != nil {
		return h, nil, err
	}
	body, err := VerifyRecord(b, h)
	return h, body, err
}
