package format

import (
	"fmt"

	"github.com/ironbus/ironbus/record"
)

// Kind identifies a frame by its two magic bytes. Zero bytes are never a
// valid frame, so the zero-filled, preallocated space after the last write
// reads as the end of the data.
type Kind uint8

// Frame kinds.
const (
	KindNone    Kind = iota // zero bytes: end of written data
	KindRecord              // "IR": one record (package record owns its layout)
	KindCommit              // "IC": closes a batch of records
	KindFooter              // "IF": seals the segment
	KindSkip                // "IS": covers a quarantined, damaged region
	KindControl             // "IK": a replicated entry that owns no offsets
	KindUnknown
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindRecord:
		return "record"
	case KindCommit:
		return "commit"
	case KindFooter:
		return "footer"
	case KindSkip:
		return "skip"
	case KindControl:
		return "control"
	}
	return "unknown"
}

// FramePrefixSize is the prefix every frame shares: magic (2), version (1),
// flags (1), frame length (4).
const FramePrefixSize = 8

// FrameVersion is the version of the commit, skip, control and footer frames this
// binary writes. Record frames carry their own, record.FrameVersion.
const FrameVersion = 1

// The record frame's magic, "IR", is package record's.
var (
	magicCommit = [2]byte{'I', 'C'}
	magicFooter = [2]byte{'I', 'F'}
	magicSkip   = [2]byte{'I', 'S'}
	// "IC" is the commit frame's, so the control frame is "IK".
	magicControl = [2]byte{'I', 'K'}
)

// PeekKind classifies the frame starting at b[0]. It needs two bytes; with
// fewer it reports KindNone.
func PeekKind(b []byte) Kind {
	if len(b) < 2 {
		return KindNone
	}
	if record.IsFrame(b) {
		return KindRecord
	}
	switch [2]byte(b[0:2]) {
	case [2]byte{}:
		return KindNone
	case magicCommit:
		return KindCommit
	case magicFooter:
		return KindFooter
	case magicSkip:
		return KindSkip
	case magicControl:
		return KindControl
	}
	return KindUnknown
}

// IsZero reports whether every byte of b is zero (unwritten space).
func IsZero(b []byte) bool {
	for len(b) >= 8 {
		if le.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func putPrefix(b []byte, magic [2]byte, flags uint8, length uint32) {
	b[0], b[1] = magic[0], magic[1]
	b[2] = FrameVersion
	b[3] = flags
	le.PutUint32(b[4:8], length)
}

// checkFixedFrame validates the prefix and CRC of a fixed-size frame whose
// CRC sits in its last four bytes.
func checkFixedFrame(b []byte, magic [2]byte, size int, what string) error {
	if len(b) < size {
		return fmt.Errorf("%w: %s frame needs %d bytes, have %d", ErrShort, what, size, len(b))
	}
	if [2]byte(b[0:2]) != magic {
		return fmt.Errorf("%w: %s frame magic %q", ErrCorrupt, what, b[0:2])
	}
	if got, want := le.Uint32(b[size-4:size]), CRC(b[:size-4]); got != want {
		return fmt.Errorf("%w: %s frame checksum %08x, computed %08x", ErrCorrupt, what, got, want)
	}
	if b[2] > FrameVersion {
		return fmt.Errorf("%w: %s frame version %d (this binary knows %d)", ErrTooNew, what, b[2], FrameVersion)
	}
	if b[2] == 0 || le.Uint32(b[4:8]) != uint32(size) {
		return fmt.Errorf("%w: %s frame version %d length %d", ErrCorrupt, what, b[2], le.Uint32(b[4:8]))
	}
	return nil
}
