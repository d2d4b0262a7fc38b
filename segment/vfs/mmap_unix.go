//go:build unix

package vfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

type unixMapping struct{ data []byte }

func (m *unixMapping) Bytes() []byte { return m.data }

func (m *unixMapping) Close() error {
	if m.data == nil {
		return nil
	}
	data := m.data
	m.data = nil
	return unix.Munmap(data)
}

func mapFile(file *os.File, length int64) (Mapping, error) {
	if length == 0 {
		return &heapMapping{}, nil
	}
	data, err := unix.Mmap(int(file.Fd()), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if errors.Is(err, unix.ENOMEM) {
		// Out of address space (a 32-bit armv7 process has about 3 GiB):
		// reading the whole segment onto the heap instead would need as
		// much memory again and end in a fatal out-of-memory, so say so.
		return nil, fmt.Errorf("vfs: mapping %d bytes: %w", length, err)
	}
	if err != nil {
		// A file system without mmap (some FUSE mounts) still reads.
		return readWhole(file, length)
	}
	return &unixMapping{data: data}, nil
}

// mapFileLive is mapFile without the copy fallback: a shared mapping or
// an error.
func mapFileLive(file *os.File, length int64) (Mapping, error) {
	if length <= 0 {
		return nil, fmt.Errorf("%w: live mapping of %d bytes", ErrNotSupported, length)
	}
	data, err := unix.Mmap(int(file.Fd()), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("vfs: live mapping of %d bytes: %w", length, err)
	}
	return &unixMapping{data: data}, nil
}
