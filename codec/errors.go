package codec

import "errors"

// Sentinel errors; every error this package returns wraps one of them.
var (
	// ErrUnknownCodec: a codec byte this binary has no decoder for, or a
	// policy naming one.
	ErrUnknownCodec = errors.New("codec: unknown codec")
	// ErrTooLarge: the raw length a record declares is above the
	// decompression cap. Nothing was allocated.
	ErrTooLarge = errors.New("codec: decompressed size over the cap")
	// ErrCorrupt: the compressed bytes do not decode, or decode to another
	// length than the record declares.
	ErrCorrupt = errors.New("codec: corrupt compressed payload")
)
