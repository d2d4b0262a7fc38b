package broker

import (
	"errors"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
)

// The kinds of engine error. Every error the engine's API returns wraps
// exactly one of them (test with errors.Is); an adapter maps the kind to
// its protocol's code and shows the error's text, which names what failed.
var (
	ErrNoSuchStream    = errors.New("broker: no such stream")
	ErrNoSuchPartition = errors.New("broker: no such partition")
	ErrNoSuchGroup     = errors.New("broker: no such group")
	ErrNoSuchBinding   = errors.New("broker: no such binding")
	// ErrInvalidName: a stream, group or subject name that is not valid.
	ErrInvalidName = errors.New("broker: invalid name")
	// ErrInvalidArgument: a request the engine cannot serve as asked.
	ErrInvalidArgument = errors.New("broker: invalid argument")
	// ErrInvalidRecord: a record body that does not decode, or that no
	// consumer could read.
	ErrInvalidRecord  = errors.New("broker: invalid record")
	ErrChecksum       = errors.New("broker: record checksum mismatch")
	ErrRecordTooLarge = errors.New("broker: record too large")
	// ErrBatchTooLarge: an atomic batch over Config.MaxBatchRecords or
	// Config.MaxBatchBytes; nothing of it is stored.
	ErrBatchTooLarge = errors.New("broker: atomic batch too large")
	// ErrReadOnly: a produce to an internal stream (a dead-letter queue).
	ErrReadOnly = errors.New("broker: stream is read-only")
	// ErrConflict: the thing exists with other settings, or overlaps.
	ErrConflict    = errors.New("broker: conflict")
	ErrGroupActive = errors.New("broker: group has live members")
	// ErrGroupMismatch: a group asked for with another type or filter
	// than it was created with, or an operation its type does not have.
	ErrGroupMismatch = errors.New("broker: group type mismatch")
	ErrFrozen        = errors.New("broker: log is frozen read-only")
	// ErrNoSpace: the disk or the disk budget is full (a RetryableError).
	ErrNoSpace = errors.New("broker: no space")
	// ErrFull: a partition's staging buffer is full; wait on
	// Partition.RoomFor and try again. Returned unwrapped (it is the
	// backpressure path and must not allocate).
	ErrFull = errors.New("broker: staging buffer full")
	// ErrBusy: a limit of the engine is reached (streams, groups), or a
	// broadcast group is being read by another member (a RetryableError).
	ErrBusy               = errors.New("broker: busy")
	ErrTooManyConnections = errors.New("broker: too many connections")
	ErrShuttingDown       = errors.New("broker: shutting down")
	// ErrNoRoute: no binding matches a record's subject; nothing is stored.
	ErrNoRoute = errors.New("broker: no route")
	// ErrStorage: any other failure of the storage underneath.
	ErrStorage = errors.New("broker: storage failure")
)

// kinds lists every kind, for hasKind.
var kinds = []error{ErrNoSuchStream, ErrNoSuchPartition, ErrNoSuchGroup, ErrNoSuchBinding, ErrInvalidName,
	ErrInvalidArgument, ErrInvalidRecord, ErrChecksum, ErrRecordTooLarge, ErrBatchTooLarge, ErrReadOnly, ErrConflict, ErrGroupActive,
	ErrGroupMismatch, ErrFrozen, ErrNoSpace, ErrFull, ErrBusy, ErrTooManyConnections, ErrShuttingDown, ErrNoRoute, ErrStorage,
	ErrProducerFenced, ErrSequenceGap, ErrProducerExpired, ErrUnknownProducer, ErrExpectationFailed, ErrBatchRefused,
	ErrNotLeader, ErrNoLeader}

// hasKind reports whether err already carries an engine kind.
func hasKind(err error) bool {
	for _, kind := range kinds {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// RetryableError is an error the caller may retry after RetryAfter.
type RetryableError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// kindError gives an error from a package underneath (segment, consumer)
// its engine kind while keeping its text: that text already names what
// failed, and a prefix would only repeat the kind.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

func withKind(kind, err error) error { return &kindError{kind: kind, err: err} }

// noSpaceRetry is the hint sent with a full disk budget: a retention pass
// runs at once and usually frees room within it.
const noSpaceRetry = time.Second

// storageError gives a storage error its engine kind.
func storageError(err error) error {
	if err == nil {
		return nil
	}
	if err == segment.ErrFull { // the backpressure path: no allocation, no walk
		return ErrFull
	}
	switch {
	case hasKind(err):
		return err
	case errors.Is(err, segment.ErrFull):
		return ErrFull
	case errors.Is(err, segment.ErrFrozen):
		return withKind(ErrFrozen, err)
	case errors.Is(err, segment.ErrNoSpace):
		return &RetryableError{Err: withKind(ErrNoSpace, err), RetryAfter: noSpaceRetry}
	case errors.Is(err, segment.ErrRecordTooLarge):
		return withKind(ErrRecordTooLarge, err)
	case errors.Is(err, segment.ErrBatchTooLarge):
		return withKind(ErrBatchTooLarge, err)
	case errors.Is(err, segment.ErrClosed):
		return withKind(ErrShuttingDown, err)
	case errors.Is(err, segment.ErrInvalidName):
		return withKind(ErrInvalidName, err)
	}
	return withKind(ErrStorage, err)
}

// broadcastRetry is the hint sent with a busy broadcast group.
const broadcastRetry = time.Second

// consumerError gives a group error its engine kind.
func consumerError(err error) error {
	switch {
	case err == nil:
		return nil
	case hasKind(err):
		return err
	case errors.Is(err, consumer.ErrBroadcastBusy):
		return &RetryableError{Err: withKind(ErrBusy, err), RetryAfter: broadcastRetry}
	case errors.Is(err, consumer.ErrWrongType), errors.Is(err, consumer.ErrTypeMismatch), errors.Is(err, consumer.ErrFilterMismatch):
		return withKind(ErrGroupMismatch, err)
	case errors.Is(err, consumer.ErrClosed):
		return withKind(ErrShuttingDown, err)
	case errors.Is(err, consumer.ErrNoDeadLetters), errors.Is(err, consumer.ErrInvalidFilter):
		return withKind(ErrInvalidArgument, err)
	case errors.Is(err, consumer.ErrInvalidName):
		return withKind(ErrInvalidName, err)
	case errors.Is(err, consumer.ErrGroupActive):
		return withKind(ErrGroupActive, err)
	case errors.Is(err, consumer.ErrNoGroup):
		return withKind(ErrNoSuchGroup, err)
	}
	return storageError(err)
}

// Classify gives an error from an engine-held value an engine kind: the
// consumer.Group of Group.Consumer and the segment.Log of Partition.Log
// and Group.Log return their own packages' errors, which an adapter maps
// through this. An error that has a kind already is returned as it is.
func Classify(err error) error { return consumerError(err) }
