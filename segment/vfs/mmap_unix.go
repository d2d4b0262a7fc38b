//go:build unix

package vfs

import (
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
	if err != nil {
		// A file system without mmap (some FUSE mounts) still reads.
		return readWhole(file, length)
	}
	return &unixMapping{data: data}, nil
}
