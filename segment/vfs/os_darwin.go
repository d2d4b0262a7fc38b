package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync uses F_FULLFSYNC: on macOS a plain fsync returns before the
// drive has flushed its cache, which is not durability.
func fdatasync(file *os.File) error { return fullSync(file) }

func fullSync(file *os.File) error {
	_, err := unix.FcntlInt(file.Fd(), unix.F_FULLFSYNC, 0)
	if err != nil {
		// Some file systems (network, FUSE) refuse F_FULLFSYNC; fsync is
		// the best they offer.
		return file.Sync()
	}
	return nil
}

func fallocate(*os.File, int64, int64) error { return ErrNotSupported }

func directOpenFlag() (int, error) { return 0, nil }

// afterDirectOpen turns the page cache off for this descriptor (F_NOCACHE),
// the closest macOS has to O_DIRECT.
func afterDirectOpen(file *os.File) error {
	_, err := unix.FcntlInt(file.Fd(), unix.F_NOCACHE, 1)
	return err
}
