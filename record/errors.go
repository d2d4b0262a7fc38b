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

// Sentinels of encrypted record frames.
var (
	// ErrNoKey means a record is encrypted under a key the reader was not
	// given.
	ErrNoKey = errors.New("record: no key for an encrypted record")
	// ErrDecrypt means an encrypted body whose CRC matched failed
	// authentication: the key is not the one it was sealed with.
	ErrDecrypt = errors.New("record: encrypted body failed authentication")
)
