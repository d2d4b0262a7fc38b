package producer

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/segment/vfs"
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

// Registry maps producer names to ids and epochs, durably.
type Registry struct{}

// OpenRegistry opens (creating it if needed) the registry file in dir.
func OpenRegistry(fsys vfs.FS, dir string) (*Registry, error) { return &Registry{}, nil }

// Init returns the id of name and a new epoch, on disk before it returns.
func (r *Registry) Init(name string) (Identity, error) { return Identity{}, nil }

// Epoch returns the current epoch of id; false when id was never issued.
func (r *Registry) Epoch(id uint64) (uint32, bool) { return 0, false }

// Close closes the registry file.
func (r *Registry) Close() error { return nil }

// Verdict is the outcome of a Check that is not an error.
type Verdict struct {
	// Duplicate: the record was stored before; nothing is appended.
	Duplicate bool
	// Offset is the first copy's offset, when OffsetKnown.
	Offset      uint64
	OffsetKnown bool
}

// Table is one partition log's producer state. Its methods are called
// with the partition's append lock held, in offset order.
type Table struct{}

// Check classifies sequence seq of producer id: new (the zero Verdict),
// a duplicate, or an error (a *GapError, ErrExpired).
func (t *Table) Check(id, seq uint64) (Verdict, error) { return Verdict{}, nil }

// Record notes that sequence seq of producer id was assigned offset.
func (t *Table) Record(id, seq, offset uint64) {}

// Next returns the next sequence expected from id; false when the table
// holds no state for it.
func (t *Table) Next(id uint64) (uint64, bool) { return 0, false }
