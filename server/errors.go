package server

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error New, Validate and Budget return wraps one
// of them, so a caller (the CLI picks its exit code this way) branches
// with errors.Is.
var (
	// ErrOutOfBounds: a numeric setting outside its bounds (a *BoundsError).
	ErrOutOfBounds = errors.New("server: setting out of bounds")
	// ErrInvalidSetting: a setting that is not one of its choices, or
	// settings that do not go together.
	ErrInvalidSetting = errors.New("server: invalid setting")
	// ErrUnprotectedAddress: a non-loopback address without the TLS and
	// authentication (or the plaintext consent) the bind rule requires.
	ErrUnprotectedAddress = errors.New("server: unprotected non-loopback address")
	// ErrExposedSecret: a TLS key or auth file readable by group or others.
	ErrExposedSecret = errors.New("server: secret file readable by others")
	// ErrSecurityFile: a TLS, auth or audit file that does not load.
	ErrSecurityFile = errors.New("server: security file does not load")
	// ErrEncryptionKey: the key ring does not load, or it is not the one
	// the data directory was encrypted with, or none was given for an
	// encrypted directory. Nothing on disk was changed.
	ErrEncryptionKey = errors.New("server: encryption key ring")
	// ErrOverBudget: the RAM budget does not fit RAMCeiling, or its pools
	// cannot be reserved.
	ErrOverBudget = errors.New("server: RAM budget over the ceiling")
	// ErrNotADirectory: DataDir names something that is not a directory.
	ErrNotADirectory = errors.New("server: data directory is not a directory")
	// ErrLocked: another process holds the data directory.
	ErrLocked = errors.New("server: data directory in use")
	// ErrUnreadable: the data directory is of a newer format or
	// inconsistent.
	ErrUnreadable = errors.New("server: data directory unreadable")
	// ErrListen: an address cannot be listened on, or the named network
	// backend cannot run here.
	ErrListen = errors.New("server: cannot listen")
	// ErrState: Start or Stop called out of order.
	ErrState = errors.New("server: wrong state")
)

// BoundsError names a numeric setting outside its bounds: its key, the
// value given and the range allowed, each written as the setting takes it
// (sizes with a unit, durations with theirs).
type BoundsError struct {
	Key   string // the TOML key: "segment_bytes"
	Value string
	Min   string
	Max   string
}

func (e *BoundsError) Error() string {
	return fmt.Sprintf("%s %s (%s): out of bounds, want %s to %s", flagOf(e.Key), e.Value, e.Key, e.Min, e.Max)
}

func (e *BoundsError) Unwrap() error { return ErrOutOfBounds }
