package broker

import "golang.org/x/sys/unix"

// filesystemSpace returns the size and the free bytes (for unprivileged
// writers) of the file system holding dir.
func filesystemSpace(dir string) (size, free uint64, ok bool) {
	var stat unix.Statfs_t
	if err := unix.Statfs(dir, &stat); err != nil {
		return 0, 0, false
	}
	return stat.Blocks * uint64(stat.Bsize), stat.Bavail * uint64(stat.Bsize), true
}
