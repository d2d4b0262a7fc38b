package format

import "errors"

// Sentinel errors. Decoders wrap them with %w and a detail, so callers test
// the class with errors.Is.
var (
	// ErrShort means the input ends before the structure does: at the end
	// of a segment this is a torn tail, not corruption.
	ErrShort = errors.New("format: input too short")
	// ErrCorrupt means the bytes are present but fail a magic, checksum,
	// length or consistency check.
	ErrCorrupt = errors.New("format: corrupt")
	// ErrTooNew means the bytes carry a format version newer than this
	// binary understands.
	ErrTooNew = errors.New("format: written by a newer IronBus format version")
)
