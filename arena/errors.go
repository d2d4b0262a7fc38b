package arena

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of these (or a
// context or operating-system error) with %w, so callers test with
// errors.Is and still read a message that explains itself.
var (
	// ErrOverCeiling: the registered pools need more RAM than --ram-ceiling
	// allows. The broker refuses to boot on it (invariant I8).
	ErrOverCeiling = errors.New("arena: RAM budget exceeds the ceiling")
	// ErrTooLarge: a SharedPool request is larger than the pool's whole
	// capacity, so waiting could never satisfy it.
	ErrTooLarge = errors.New("arena: request larger than the pool capacity")
	// ErrInvalidArgument: a size, count or budget that cannot describe a
	// pool (zero or negative sizes, overflow, a nil budget).
	ErrInvalidArgument = errors.New("arena: invalid argument")
	// ErrInUse: Close was called while buffers were still held. Unmapping
	// then would pull memory from under a holder (or the kernel).
	ErrInUse = errors.New("arena: buffers still in use")
	// ErrStaleRelease: a Buffer or Lease was released twice, or a copy of
	// it was released after the original. The release is ignored, so the
	// pool never hands one buffer to two holders.
	ErrStaleRelease = errors.New("arena: release of a buffer that is not held")
	// ErrUnsupported: the measurement is not available on this platform.
	// It also matches errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("arena: %w", errors.ErrUnsupported)
)
