package producer

import (
	"errors"
	"fmt"
)

// Errors of the producer table. The broker maps them to wire codes.
var (
	ErrFenced      = errors.New("producer: fenced by a newer incarnation")
	ErrSequenceGap = errors.New("producer: sequence gap")
	ErrExpired     = errors.New("producer: state expired")
	ErrUnknown     = errors.New("producer: unknown producer id")
	ErrInvalidName = errors.New("producer: invalid name")
)

// GapError is a sequence gap: Expected is the sequence the table wants
// next. It wraps ErrSequenceGap.
type GapError struct{ Expected uint64 }

func (e *GapError) Error() string {
	return fmt.Sprintf("%v: expected sequence %d", ErrSequenceGap, e.Expected)
}

// Unwrap makes errors.Is(err, ErrSequenceGap) hold.
func (e *GapError) Unwrap() error { return ErrSequenceGap }

// Identity is a producer's id and current epoch.
type Identity struct {
	ID    uint64
	Epoch uint32
}

// Verdict is the outcome of a Check that is not an error.
type Verdict struct {
	// Duplicate: the record was stored before; nothing is appended.
	Duplicate bool
	// Offset is the first copy's offset, when OffsetKnown.
	Offset      uint64
	OffsetKnown bool
}
