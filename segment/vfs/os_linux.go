package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

func fdatasync(file *os.File) error {
	return ignoringEINTR(func() error { return unix.Fdatasync(int(file.Fd())) })
}

func fullSync(file *os.File) error {
	return ignoringEINTR(func() error { return unix.Fsync(int(file.Fd())) })
}

func fallocate(file *os.File, offset, length int64) error {
	err := ignoringEINTR(func() error { return unix.Fallocate(int(file.Fd()), 0, offset, length) })
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return ErrNotSupported
	}
	return err
}

func directOpenFlag() (int, error) { return unix.O_DIRECT, nil }

func afterDirectOpen(*os.File) error { return nil }

// ignoringEINTR retries a call interrupted by a signal before it did
// anything; EINTR from fsync does not mean the sync failed.
func ignoringEINTR(call func() error) error {
	for {
		err := call()
		if err != unix.EINTR {
			return err
		}
	}
}
