//go:build unix

package vfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func lockFile(file *os.File, exclusive bool) error {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	if err := unix.Flock(int(file.Fd()), how); err != nil {
		if err == unix.EWOULDBLOCK {
			return fmt.Errorf("%w: %s", ErrLocked, file.Name())
		}
		return &os.PathError{Op: "flock", Path: file.Name(), Err: err}
	}
	return nil
}
