//go:build !linux

package arena

// ReadRSS needs /proc/self/status, which only Linux has; the edge nodes
// IronBus measures on run Linux.
func ReadRSS() (int64, error) {
	return 0, ErrUnsupported
}

// ReadAnonymous needs /proc/self/status, which only Linux has.
func ReadAnonymous() (int64, error) {
	return 0, ErrUnsupported
}

// ReadAnonymousOf needs /proc, which only Linux has.
func ReadAnonymousOf(pid int) (int64, error) {
	return 0, ErrUnsupported
}
