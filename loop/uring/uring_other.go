//go:build !linux

package uring

import (
	"fmt"
	"runtime"
)

// Ring is Linux-only; elsewhere New always fails, so code that picks a
// backend at run time compiles on every OS and falls back.
type Ring struct{}

// New fails with an error wrapping ErrUnsupported: io_uring is Linux-only.
func New(entries uint32, options Options) (*Ring, error) {
	return nil, fmt.Errorf("uring: io_uring needs Linux, this is %s: %w", runtime.GOOS, ErrUnsupported)
}

// Close does nothing.
func (r *Ring) Close() error { return nil }

// Probe fails: there is no ring to probe.
func Probe(r *Ring) (OpSet, error) {
	return OpSet{}, ErrUnsupported
}

// Detect reports io_uring unavailable.
func Detect() Capabilities {
	return Capabilities{Reason: "io_uring is Linux-only (GOOS=" + runtime.GOOS + ")"}
}

// DetectWith reports io_uring unavailable; setup is never called.
func DetectWith(setup SetupFunc) Capabilities {
	return Detect()
}
