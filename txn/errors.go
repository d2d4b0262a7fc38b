package txn

import "errors"

// Sentinel errors. Every error the package returns wraps one of them (or
// an error of package segment, for the log underneath) with %w.
var (
	// ErrUnknown: no open transaction has this id for this owner (never
	// begun, begun on another connection, or ended long enough ago to be
	// forgotten).
	ErrUnknown = errors.New("txn: no such open transaction")
	// ErrAborted: the transaction was aborted (by its owner, its timeout,
	// a refused record or a restart before its commit); none of it is
	// visible.
	ErrAborted = errors.New("txn: transaction aborted")
	// ErrTooManyOpen: MaxOpen transactions are open; retry once some end.
	ErrTooManyOpen = errors.New("txn: too many open transactions")
	// ErrTooLarge: the record would take the transaction past its record
	// or byte limit; the transaction is aborted.
	ErrTooLarge = errors.New("txn: transaction too large")
	// ErrCommitting: the transaction's commit is under way (a second
	// TxnEnd raced it); ask again for its outcome.
	ErrCommitting = errors.New("txn: commit in progress")
	// ErrMalformed: a coordinator record or a transaction reference that
	// does not decode.
	ErrMalformed = errors.New("txn: malformed record")
	// ErrTargetGone: a Sink's answer for a target partition that no longer
	// exists (its stream was removed): a commit skips it, as the stream's
	// records went with it.
	ErrTargetGone = errors.New("txn: target partition gone")
	// ErrClosed: the coordinator is closed.
	ErrClosed = errors.New("txn: coordinator closed")
)
