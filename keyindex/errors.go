package keyindex

import "errors"

// Errors of the subject index. Each is wrapped with detail; test with
// errors.Is.
var (
	// ErrFull means the index cannot answer for a subject right now: it
	// had to leave updates out (its overlay was full while a flush was
	// pending, or its table reached Options.MaxCapacity). It is
	// retryable: a flush and a catch-up from the log clear the first
	// cause within about one flush interval; the second lasts until the
	// capacity is raised (the next open then rebuilds the table).
	ErrFull = errors.New("keyindex: subject index full")
	// ErrCorrupt means a page of the table failed its checks in both of
	// its copies. The index stops answering; Close removes the file so
	// the next open rebuilds it from the log.
	ErrCorrupt = errors.New("keyindex: subject index file is corrupt")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("keyindex: subject index closed")
)
