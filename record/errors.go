package record

import "errors"

// Sentinel errors. Decoders wrap them with %w and a detail, so callers test
// the class with errors.Is.
var (
	// ErrShort means the input ends before the record frame does: at the
	// end of a segment this is a torn tail, not corruption.
	ErrShort = errors.New("record: input too short")
	// ErrCorrupt means a frame's bytes are present but fail a magic,
	// checksum, length or consistency check.
	ErrCorrupt = errors.New("record: corrupt")
	// ErrTooNew means the bytes carry a frame or body version newer than
	// this binary understands.
	ErrTooNew = errors.New("record: written by a newer IronBus record version")
	// ErrTooLarge means a declared body length exceeds the maximum; nothing
	// was allocated for it.
	ErrTooLarge = errors.New("record: body length exceeds the maximum")
	// ErrMalformed means a body's internal fields do not add up, or a Body
	// has a field longer than its length prefix allows.
	ErrMalformed = errors.New("record: malformed body")
)
