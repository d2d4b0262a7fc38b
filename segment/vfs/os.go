package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// OS is the real file system. The zero value is ready to use.
type OS struct{}

var _ FS = OS{}

// OpenFile implements FS.
func (OS) OpenFile(name string, flag OpenFlag) (File, error) {
	osFlag := os.O_RDONLY
	if flag&ReadWrite != 0 {
		osFlag = os.O_RDWR
	}
	if flag&Create != 0 {
		osFlag |= os.O_CREATE
	}
	if flag&Exclusive != 0 {
		osFlag |= os.O_EXCL
	}
	if flag&Direct != 0 {
		direct, err := directOpenFlag()
		if err != nil {
			return nil, err
		}
		osFlag |= direct
	}
	file, err := os.OpenFile(name, osFlag, 0o600)
	if err != nil {
		return nil, err
	}
	if flag&Direct != 0 {
		if err := afterDirectOpen(file); err != nil {
			_ = file.Close()
			return nil, err
		}
	}
	return &osFile{file: file, direct: flag&Direct != 0}, nil
}

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll implements FS.
func (OS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

// List implements FS.
func (OS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, entry := range entries {
		names = append(names, entry.Name())
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (OS) Stat(name string) (FileInfo, error) {
	info, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Name: filepath.Base(name), Size: info.Size(), IsDir: info.IsDir()}, nil
}

// SyncDir implements FS.
func (OS) SyncDir(dir string) error {
	file, err := os.Open(dir)
	if err != nil {
		return err
	}
	syncErr := fullSync(file)
	closeErr := file.Close()
	if syncErr != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: syncErr}
	}
	return closeErr
}

// Lock implements FS with flock(2) where the platform has it.
func (OS) Lock(name string, exclusive bool) (io.Closer, error) {
	file, err := os.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	if err := lockFile(file, exclusive); err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

// osFile is a File backed by *os.File.
type osFile struct {
	file   *os.File
	direct bool

	mu     sync.Mutex // guards closed
	closed bool
}

var (
	_ File   = (*osFile)(nil)
	_ Mapper = (*osFile)(nil)
)

func (f *osFile) Name() string { return f.file.Name() }

func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	if f.direct {
		if err := checkAligned(p, off); err != nil {
			return 0, err
		}
	}
	return f.file.ReadAt(p, off)
}

func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	if f.direct {
		if err := checkAligned(p, off); err != nil {
			return 0, err
		}
	}
	return f.file.WriteAt(p, off)
}

func (f *osFile) Size() (int64, error) {
	info, err := f.file.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

func (f *osFile) SyncData() error {
	if err := fdatasync(f.file); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.file.Name(), Err: err}
	}
	return nil
}

func (f *osFile) Sync() error {
	if err := fullSync(f.file); err != nil {
		return &os.PathError{Op: "fsync", Path: f.file.Name(), Err: err}
	}
	return nil
}

func (f *osFile) Truncate(size int64) error { return f.file.Truncate(size) }

func (f *osFile) Allocate(offset, length int64) error {
	if err := fallocate(f.file, offset, length); err != nil {
		if errors.Is(err, ErrNotSupported) {
			return err
		}
		return &os.PathError{Op: "fallocate", Path: f.file.Name(), Err: err}
	}
	return nil
}

func (f *osFile) Map(length int64) (Mapping, error) { return mapFile(f.file, length) }

// MapLive implements LiveMapper.
func (f *osFile) MapLive(length int64) (Mapping, error) { return mapFileLive(f.file, length) }

func (f *osFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	return f.file.Close()
}

// heapMapping is the portable Mapping: the bytes were read into memory.
type heapMapping struct{ data []byte }

func (m *heapMapping) Bytes() []byte { return m.data }
func (m *heapMapping) Close() error  { m.data = nil; return nil }

func readWhole(file *os.File, length int64) (Mapping, error) {
	data := make([]byte, length)
	if _, err := file.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return &heapMapping{data: data}, nil
}
