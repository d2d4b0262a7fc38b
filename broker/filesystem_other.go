//go:build !linux

package broker

// filesystemSpace is unknown off Linux: /admin reports zeros and
// `server check` skips its disk thresholds.
func filesystemSpace(string) (size, free uint64, ok bool) { return 0, 0, false }
