package format

import (
	"fmt"
	"slices"
)

// FooterFrameSize is the size of the footer frame that seals a segment.
const FooterFrameSize = 80

// Footer seals a segment: no record is ever appended after it, and the file
// ends right after it.
type Footer struct {
	Token      uint64
	BaseOffset uint64
	// NextOffset is one past the last offset the segment covers, whether
	// by a record or by a skip frame; the next segment starts there.
	NextOffset   uint64
	Count        uint64 // records held
	DataEnd      uint64 // file position of this footer
	MinTimestamp int64  // of the records held; zero when there are none
	MaxTimestamp int64
}

// AppendFooter appends the encoding of f to dst.
func AppendFooter(dst []byte, f Footer) []byte {
	start := len(dst)
	dst = slices.Grow(dst, FooterFrameSize)[:len(dst)+FooterFrameSize]
	b := dst[start : start+FooterFrameSize]
	clear(b)
	putPrefix(b, magicFooter, 0, FooterFrameSize)
	le.PutUint64(b[8:16], f.Token)
	le.PutUint64(b[16:24], f.BaseOffset)
	le.PutUint64(b[24:32], f.NextOffset)
	le.PutUint64(b[32:40], f.Count)
	le.PutUint64(b[40:48], f.DataEnd)
	le.PutUint64(b[48:56], uint64(f.MinTimestamp))
	le.PutUint64(b[56:64], uint64(f.MaxTimestamp))
	le.PutUint32(b[76:80], CRC(b[0:76]))
	return dst
}

// DecodeFooter checks and decodes a footer frame at the start of b.
func DecodeFooter(b []byte) (Footer, error) {
	if err := checkFixedFrame(b, magicFooter, FooterFrameSize, "footer"); err != nil {
		return Footer{}, err
	}
	f := Footer{
		Token:        le.Uint64(b[8:16]),
		BaseOffset:   le.Uint64(b[16:24]),
		NextOffset:   le.Uint64(b[24:32]),
		Count:        le.Uint64(b[32:40]),
		DataEnd:      le.Uint64(b[40:48]),
		MinTimestamp: int64(le.Uint64(b[48:56])),
		MaxTimestamp: int64(le.Uint64(b[56:64])),
	}
	if f.NextOffset < f.BaseOffset || f.Count > f.NextOffset-f.BaseOffset {
		return f, fmt.Errorf("%w: footer covers offsets %d..%d with %d records", ErrCorrupt, f.BaseOffset, f.NextOffset, f.Count)
	}
	if f.DataEnd < SegmentDataStart {
		return f, fmt.Errorf("%w: footer data end %d", ErrCorrupt, f.DataEnd)
	}
	return f, nil
}
