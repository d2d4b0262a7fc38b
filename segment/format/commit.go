package format

import (
	"fmt"
	"slices"
)

// CommitFrameSize is the size of a commit frame.
const CommitFrameSize = 80

// Commit closes a batch: the record frames written in one write since the
// previous commit frame (or the start of the segment data), or one control
// frame. Recovery treats a batch as acknowledged-or-not as a whole. A
// commit frame that closes a control frame has a count of zero, and both
// its offsets are the offset the next record carries: it owns none.
type Commit struct {
	Token       uint64 // the segment's token; a frame from another segment never matches
	FirstOffset uint64
	LastOffset  uint64 // inclusive
	Count       uint32
	BatchLength uint32 // bytes of record frames this frame closes
	BatchCRC    uint32 // CRC32C over those bytes
	// DurableNext says every offset below it was known durable when the
	// batch was written: a hint that helps recovery label a loss, never an
	// authority.
	DurableNext uint64
	Term        uint64 // replication term; zero in a log that is not replicated
	Index       uint64 // replication index; zero in a log that is not replicated
}

// AppendCommit appends the encoding of c to dst.
func AppendCommit(dst []byte, c Commit) []byte {
	start := len(dst)
	dst = slices.Grow(dst, CommitFrameSize)[:len(dst)+CommitFrameSize]
	b := dst[start : start+CommitFrameSize]
	clear(b)
	putPrefix(b, magicCommit, 0, CommitFrameSize)
	le.PutUint64(b[8:16], c.Token)
	le.PutUint64(b[16:24], c.FirstOffset)
	le.PutUint64(b[24:32], c.LastOffset)
	le.PutUint32(b[32:36], c.Count)
	le.PutUint32(b[36:40], c.BatchLength)
	le.PutUint32(b[40:44], c.BatchCRC)
	le.PutUint64(b[48:56], c.DurableNext)
	le.PutUint64(b[56:64], c.Term)
	le.PutUint64(b[64:72], c.Index)
	le.PutUint32(b[76:80], CRC(b[0:76]))
	return dst
}

// DecodeCommit checks and decodes a commit frame at the start of b.
func DecodeCommit(b []byte) (Commit, error) {
	if err := checkFixedFrame(b, magicCommit, CommitFrameSize, "commit"); err != nil {
		return Commit{}, err
	}
	c := Commit{
		Token:       le.Uint64(b[8:16]),
		FirstOffset: le.Uint64(b[16:24]),
		LastOffset:  le.Uint64(b[24:32]),
		Count:       le.Uint32(b[32:36]),
		BatchLength: le.Uint32(b[36:40]),
		BatchCRC:    le.Uint32(b[40:44]),
		DurableNext: le.Uint64(b[48:56]),
		Term:        le.Uint64(b[56:64]),
		Index:       le.Uint64(b[64:72]),
	}
	if c.Count == 0 {
		if c.LastOffset != c.FirstOffset {
			return c, fmt.Errorf("%w: commit frame of no records closes offsets %d..%d", ErrCorrupt, c.FirstOffset, c.LastOffset)
		}
		return c, nil
	}
	if c.LastOffset < c.FirstOffset || c.LastOffset-c.FirstOffset != uint64(c.Count-1) {
		return c, fmt.Errorf("%w: commit frame closes offsets %d..%d with count %d", ErrCorrupt, c.FirstOffset, c.LastOffset, c.Count)
	}
	return c, nil
}
