package consumer

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is; every error returned
// wraps one of them with the details (group, offsets, types).
var (
	ErrInvalidName = errors.New("consumer: invalid group name")
	ErrClosed      = errors.New("consumer: group closed")
	// ErrTypeMismatch: an existing group was opened as another type. A
	// group's type is fixed when it is created.
	ErrTypeMismatch = errors.New("consumer: group type mismatch")
	// ErrFilterMismatch: an existing group was opened with another
	// subject filter. A group's filter is fixed when it is created.
	ErrFilterMismatch = errors.New("consumer: group subject filter mismatch")
	// ErrInvalidFilter: a subject filter is not a valid pattern.
	ErrInvalidFilter = errors.New("consumer: invalid subject filter")
	// ErrWrongType: the operation does not exist for the group's type
	// (Commit on a work group, Fetch on a streaming group, ...).
	ErrWrongType = errors.New("consumer: operation not allowed for this group type")
	// ErrBroadcastBusy: a broadcast group already has its one reader.
	ErrBroadcastBusy = errors.New("consumer: broadcast group already has a reader")
	// ErrOutOfRange: a cumulative ack or commit names an offset the group
	// cannot have seen.
	ErrOutOfRange = errors.New("consumer: offset out of range")
	// ErrCorruptCheckpoint: a group checkpoint fails to decode.
	ErrCorruptCheckpoint = errors.New("consumer: group checkpoint is corrupt")
	// ErrCheckpointTooNew: a group checkpoint was written by a newer
	// IronBus; this binary refuses to guess at it.
	ErrCheckpointTooNew = errors.New("consumer: group checkpoint is newer than this binary; upgrade it")
	// ErrInvalidOptions: Options failed validation.
	ErrInvalidOptions = errors.New("consumer: invalid options")
	// ErrNoDeadLetters: a record was rejected but the group has no
	// dead-letter queue to move it to.
	ErrNoDeadLetters = errors.New("consumer: group has no dead-letter queue")
	// ErrNoGroup: the log has no checkpoint for the group asked about.
	ErrNoGroup = errors.New("consumer: no such group")
	// ErrGroupActive: a reset or delete found the group with live members
	// (or a dead-letter move running); its consumers must stop first.
	ErrGroupActive = errors.New("consumer: group has live members")
	// ErrNotDeadLetter: a record in a dead-letter log lacks the headers
	// that say where it came from.
	ErrNotDeadLetter = errors.New("consumer: record is not a dead letter")
)

// Status is the outcome of an operation on one leased record.
type Status uint8

// Statuses. The first three keep the values the wire protocol's AckResult
// uses.
const (
	StatusOK      Status = iota // applied
	StatusStale                 // the lease token is not the current one: fenced, nothing changed
	StatusUnknown               // the record is not outstanding (already done, or never delivered)
	StatusExpired               // the token's lease lapsed (timeout or holder released); the record will be redelivered
	StatusCapped                // Extend: extended, but only up to the hard cap of the attempt
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusStale:
		return "stale"
	case StatusUnknown:
		return "unknown"
	case StatusExpired:
		return "expired"
	case StatusCapped:
		return "capped"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}
