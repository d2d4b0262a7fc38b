package segment

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of these (or a
// vfs/format sentinel) with %w, so callers branch with errors.Is.
var (
	// ErrFrozen: the log is read-only. A failed fdatasync or write, a loss
	// above the recovery caps or a structural inconsistency froze it; its
	// durable records stay readable. Frozen is sticky until a restart (after
	// the disk is fixed) or `ironbus repair`.
	ErrFrozen = errors.New("segment: log is frozen read-only")
	// ErrNoSpace: the device is full. Nothing acknowledged is lost and the
	// append may be retried when space returns.
	ErrNoSpace = errors.New("segment: no space left for the append")
	// ErrFull: TryAppend found the staging buffer full (backpressure).
	ErrFull = errors.New("segment: append queue full")
	// ErrClosed: the log or directory was closed.
	ErrClosed = errors.New("segment: closed")
	// ErrRecordTooLarge: a record body exceeds the configured maximum.
	ErrRecordTooLarge = errors.New("segment: record too large")
	// ErrBatchTooLarge: an atomic batch's record frames exceed what one
	// commit frame may cover (MaxAtomicBytes).
	ErrBatchTooLarge = errors.New("segment: atomic batch too large")
	// ErrLossCapExceeded: recovery found more damage than the caps allow;
	// the log opened frozen read-only and nothing was changed on disk.
	ErrLossCapExceeded = errors.New("segment: recovery loss exceeds the caps; run `ironbus repair` to accept it")
	// ErrInconsistent: segment files do not form one log (foreign,
	// overlapping or misnamed files); the log opened frozen read-only.
	ErrInconsistent = errors.New("segment: segment files are inconsistent")
	// ErrTooNew: data written by a newer IronBus format than this binary
	// understands.
	ErrTooNew = errors.New("segment: data written by a newer IronBus; upgrade the binary")
	// ErrNotFound: the data directory or log does not exist.
	ErrNotFound = errors.New("segment: not found")
	// ErrLocked: another process holds the data directory.
	ErrLocked = errors.New("segment: data directory is locked by another process (is a broker running?)")
	// ErrInvalidName: a stream name fails validation.
	ErrInvalidName = errors.New("segment: invalid stream name")
	// ErrReadOnly: a write was attempted on a directory opened read-only.
	ErrReadOnly = errors.New("segment: opened read-only")
	// ErrOffsetOutOfRange: a read asked for an offset beyond the log end.
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrInvalidOptions: Options failed validation.
	ErrInvalidOptions = errors.New("segment: invalid options")
	// ErrReplicated: the log is a replica's Raft log (RaftLog): only the
	// replica writes it, so producers' appends are refused.
	ErrReplicated = errors.New("segment: the log is written by its replica")
	// ErrEntryMismatch: a Raft entry does not continue the log: its index
	// is not the next one, or its records do not start at the log's next
	// offset (a gap or an overlap), or they are not consecutive.
	ErrEntryMismatch = errors.New("segment: entry does not continue the log")
	// ErrDamagedEntry: a stored Raft entry fails its checks (checksum,
	// framing), or a damaged region removed it.
	ErrDamagedEntry = errors.New("segment: damaged entry")
	// ErrNoEntry: the Raft log holds no entry at that index.
	ErrNoEntry = errors.New("segment: no entry at that index")
)

// frozenError carries why a log froze; it matches ErrFrozen and its cause.
type frozenError struct {
	cause error
}

func (e *frozenError) Error() string { return fmt.Sprintf("%v: %v", ErrFrozen, e.cause) }

func (e *frozenError) Is(target error) bool { return target == ErrFrozen }

func (e *frozenError) Unwrap() error { return e.cause }

func freezeError(cause error) error {
	var already *frozenError
	if errors.As(cause, &already) {
		return already
	}
	return &frozenError{cause: cause}
}
