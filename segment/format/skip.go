package format

import (
	"fmt"
	"slices"
)

// SkipFrameSize is the size of the skip frame header. The frame itself
// covers Length bytes: its header followed by the damaged bytes it hides.
const SkipFrameSize = 48

// Skip is written by recovery over the start of a damaged region after the
// region was copied to quarantine. It makes the damage self-describing:
// later scans jump over Length bytes and know which offsets are gone, so a
// loss is reported once, when it is found, and readers see a gap.
type Skip struct {
	Token      uint64
	Length     uint32 // bytes from the start of this frame to the next frame
	FirstLost  uint64 // first offset lost (inclusive)
	LostCount  uint64 // offsets lost: FirstLost .. FirstLost+LostCount-1
	ReasonCode uint32
}

// AppendSkip appends the header of a skip frame to dst.
func AppendSkip(dst []byte, s Skip) []byte {
	start := len(dst)
	dst = slices.Grow(dst, SkipFrameSize)[:len(dst)+SkipFrameSize]
	b := dst[start : start+SkipFrameSize]
	clear(b)
	putPrefix(b, magicSkip, 0, s.Length)
	le.PutUint64(b[8:16], s.Token)
	le.PutUint64(b[16:24], s.FirstLost)
	le.PutUint64(b[24:32], s.LostCount)
	le.PutUint32(b[32:36], s.ReasonCode)
	le.PutUint32(b[44:48], CRC(b[0:44]))
	return dst
}

// DecodeSkip checks and decodes a skip frame header at the start of b.
func DecodeSkip(b []byte) (Skip, error) {
	if len(b) < SkipFrameSize {
		return Skip{}, fmt.Errorf("%w: skip frame needs %d bytes, have %d", ErrShort, SkipFrameSize, len(b))
	}
	if [2]byte(b[0:2]) != magicSkip {
		return Skip{}, fmt.Errorf("%w: skip frame magic %q", ErrCorrupt, b[0:2])
	}
	if got, want := le.Uint32(b[44:48]), CRC(b[0:44]); got != want {
		return Skip{}, fmt.Errorf("%w: skip frame checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	if b[2] > FrameVersion {
		return Skip{}, fmt.Errorf("%w: skip frame version %d (this binary knows %d)", ErrTooNew, b[2], FrameVersion)
	}
	s := Skip{
		Length:     le.Uint32(b[4:8]),
		Token:      le.Uint64(b[8:16]),
		FirstLost:  le.Uint64(b[16:24]),
		LostCount:  le.Uint64(b[24:32]),
		ReasonCode: le.Uint32(b[32:36]),
	}
	if b[2] == 0 || s.Length < SkipFrameSize {
		return s, fmt.Errorf("%w: skip frame version %d length %d", ErrCorrupt, b[2], s.Length)
	}
	return s, nil
}
