//go:build !linux && !darwin

package vfs

import (
	"fmt"
	"os"
)

func fdatasync(file *os.File) error { return file.Sync() }

func fullSync(file *os.File) error { return file.Sync() }

func fallocate(*os.File, int64, int64) error { return ErrNotSupported }

func directOpenFlag() (int, error) {
	return 0, fmt.Errorf("%w: direct I/O on this platform", ErrNotSupported)
}

func afterDirectOpen(*os.File) error { return nil }
