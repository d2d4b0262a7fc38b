package vfs

import (
	"fmt"
	"unsafe"
)

// checkAligned enforces the direct-I/O contract on offset, length and the
// buffer address, so a misaligned access fails the same way on every
// implementation instead of only on some kernels.
func checkAligned(p []byte, off int64) error {
	if off%DirectAlignment != 0 || len(p)%DirectAlignment != 0 {
		return fmt.Errorf("%w: offset %d length %d", ErrMisaligned, off, len(p))
	}
	if len(p) > 0 && uintptr(unsafe.Pointer(&p[0]))%DirectAlignment != 0 {
		return fmt.Errorf("%w: buffer address", ErrMisaligned)
	}
	return nil
}

// AlignedBuffer returns a zeroed buffer of size bytes (rounded up to
// DirectAlignment) whose first byte sits on a DirectAlignment boundary.
func AlignedBuffer(size int) []byte {
	size = (size + DirectAlignment - 1) / DirectAlignment * DirectAlignment
	raw := make([]byte, size+DirectAlignment)
	shift := 0
	if rem := uintptr(unsafe.Pointer(&raw[0])) % DirectAlignment; rem != 0 {
		shift = int(DirectAlignment - rem)
	}
	return raw[shift : shift+size : shift+size]
}
