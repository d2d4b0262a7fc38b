package upgrade

import "errors"

var (
	// ErrNotBinary: the new binary is missing, not a regular file, or does
	// not run here (wrong architecture, truncated download).
	ErrNotBinary = errors.New("upgrade: not a runnable ironbus binary")
	// ErrSameFile: the new binary is the installed one; swapping it with
	// itself would leave no previous binary to roll back to.
	ErrSameFile = errors.New("upgrade: the new binary is the installed binary itself")
	// ErrNoPrevious: rollback found no kept previous binary.
	ErrNoPrevious = errors.New("upgrade: no previous binary to roll back to")
	// ErrRollbackPending: an interrupted rollback must finish first.
	ErrRollbackPending = errors.New("upgrade: an interrupted rollback is pending")
)
