package format

import (
	"fmt"
)

// Segment header: the first SegmentHeaderSize bytes of every segment file.
// The rest of the first block is zero so data starts block-aligned.
const (
	SegmentHeaderSize    = 64
	SegmentDataStart     = 4096 // first frame of a segment starts here
	SegmentFormatVersion = 1
)

// segmentMagic identifies an IronBus segment file.
var segmentMagic = [8]byte{'I', 'R', 'O', 'N', 'B', 'S', 'E', 'G'}

// SegmentHeader describes one segment file.
type SegmentHeader struct {
	Version     uint16
	StreamHash  uint64 // xxh3 of the stream name: refuses files of another log
	Partition   uint32
	BaseOffset  uint64 // offset of the first record this segment may hold
	CreatedUnix int64  // wall clock at creation, nanoseconds; data only
	Token       uint64 // random per segment; commit and footer frames repeat it
}

// StreamHash is the log identity stored in segment headers.
func StreamHash(stream string) uint64 { return XXH3([]byte(stream)) }

// AppendSegmentHeader appends the 64-byte encoding of h to dst.
func AppendSegmentHeader(dst []byte, h SegmentHeader) []byte {
	var b [SegmentHeaderSize]byte
	copy(b[0:8], segmentMagic[:])
	le.PutUint16(b[8:10], SegmentFormatVersion)
	le.PutUint16(b[10:12], 0)
	le.PutUint32(b[12:16], SegmentHeaderSize)
	le.PutUint64(b[16:24], h.StreamHash)
	le.PutUint32(b[24:28], h.Partition)
	le.PutUint64(b[32:40], h.BaseOffset)
	le.PutUint64(b[40:48], uint64(h.CreatedUnix))
	le.PutUint64(b[48:56], h.Token)
	le.PutUint32(b[60:64], CRC(b[0:60]))
	return append(dst, b[:]...)
}

// DecodeSegmentHeader validates and decodes a segment header.
func DecodeSegmentHeader(b []byte) (SegmentHeader, error) {
	if len(b) < SegmentHeaderSize {
		return SegmentHeader{}, fmt.Errorf("%w: segment header needs %d bytes, have %d", ErrShort, SegmentHeaderSize, len(b))
	}
	if [8]byte(b[0:8]) != segmentMagic {
		return SegmentHeader{}, fmt.Errorf("%w: segment header magic %q", ErrCorrupt, b[0:8])
	}
	if got, want := le.Uint32(b[60:64]), CRC(b[0:60]); got != want {
		return SegmentHeader{}, fmt.Errorf("%w: segment header checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	h := SegmentHeader{
		Version:     le.Uint16(b[8:10]),
		StreamHash:  le.Uint64(b[16:24]),
		Partition:   le.Uint32(b[24:28]),
		BaseOffset:  le.Uint64(b[32:40]),
		CreatedUnix: int64(le.Uint64(b[40:48])),
		Token:       le.Uint64(b[48:56]),
	}
	if h.Version > SegmentFormatVersion {
		return h, fmt.Errorf("%w: segment format version %d (this binary knows %d)", ErrTooNew, h.Version, SegmentFormatVersion)
	}
	if h.Version == 0 || le.Uint32(b[12:16]) != SegmentHeaderSize {
		return h, fmt.Errorf("%w: segment header version %d length %d", ErrCorrupt, h.Version, le.Uint32(b[12:16]))
	}
	return h, nil
}
