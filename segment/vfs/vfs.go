package vfs

import (
	"errors"
	"io"
	"path"
	"strings"
	"syscall"
)

// Sentinel errors. Implementations wrap the underlying cause with %w so
// callers can test both the class (errors.Is(err, ErrNoSpace)) and the errno.
var (
	// ErrNotSupported marks an optional capability (fallocate, O_DIRECT, mmap,
	// locking) that this platform or file system does not offer.
	ErrNotSupported = errors.New("vfs: not supported")
	// ErrNoSpace marks a write or allocation refused because the device is
	// full. It is the only write failure that is safe to retry later.
	ErrNoSpace = errors.New("vfs: no space left on device")
	// ErrLocked reports that another holder owns a lock the caller asked for.
	ErrLocked = errors.New("vfs: locked by another process")
	// ErrClosed is returned by operations on a closed File.
	ErrClosed = errors.New("vfs: file already closed")
	// ErrInjected marks an error produced by an [Injector] (tests only).
	ErrInjected = errors.New("vfs: injected fault")
	// ErrMisaligned reports a direct-I/O access whose offset, length or
	// buffer is not aligned to [DirectAlignment].
	ErrMisaligned = errors.New("vfs: direct I/O access not aligned")
)

// DirectAlignment is the alignment the segment writer uses for direct I/O:
// offsets, lengths and buffer addresses are multiples of it. 4 KiB covers
// every logical block size seen in practice (512 B and 4 KiB).
const DirectAlignment = 4096

// OpenFlag selects how [FS.OpenFile] opens a file.
type OpenFlag int

const (
	// ReadOnly opens an existing file for reading.
	ReadOnly OpenFlag = 0
	// ReadWrite opens a file for reading and writing.
	ReadWrite OpenFlag = 1 << iota
	// Create creates the file if it does not exist.
	Create
	// Exclusive, with Create, fails if the file already exists.
	Exclusive
	// Direct bypasses the page cache (O_DIRECT): every access must be
	// aligned to [DirectAlignment]. Fails with ErrNotSupported where the
	// platform or file system cannot do it.
	Direct
)

// FS is the file-system interface the storage engine is written against.
// Paths are slash-separated; implementations may require them to be clean.
// Every method is safe for concurrent use.
type FS interface {
	// OpenFile opens or creates name according to flag. New files get
	// permission 0600.
	OpenFile(name string, flag OpenFlag) (File, error)
	// Remove unlinks a file or an empty directory. The removal is durable
	// only after SyncDir of the parent directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname. Durable only after
	// SyncDir of the directories involved.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents with permission 0700. New
	// entries are durable only after SyncDir of each parent; see
	// [MkdirAllDurable].
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes name. A missing file yields an error wrapping
	// fs.ErrNotExist.
	Stat(name string) (FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
	// Lock takes an advisory lock on the existing file name, exclusive or
	// shared, without blocking: a conflicting holder yields ErrLocked.
	Lock(name string, exclusive bool) (io.Closer, error)
}

// FileInfo is the part of a stat result the engine uses.
type FileInfo struct {
	Name  string
	Size  int64
	IsDir bool
}

// File is an open file. ReadAt and WriteAt may be called concurrently with
// each other and with SyncData; Truncate, Allocate and Close must not race
// with writes to the same region.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name returns the path the file was opened with.
	Name() string
	// Size returns the current size of the file.
	Size() (int64, error)
	// SyncData makes every write issued before the call durable, plus the
	// file size when the file grew (fdatasync). A failure is final: the
	// caller must not assume any unsynced byte survived, and must not retry.
	SyncData() error
	// Sync is SyncData plus all metadata, including a shrunken size (fsync).
	Sync() error
	// Truncate changes the size of the file; durable after Sync.
	Truncate(size int64) error
	// Allocate reserves [offset, offset+length) on the device and extends
	// the file size to cover it (fallocate mode 0). Returns ErrNotSupported
	// where the platform cannot; callers then fall back to writing zeros.
	Allocate(offset, length int64) error
}

// Mapper is an optional File capability: a read-only view of the first
// length bytes of the file. The view must not be used after Mapping.Close.
type Mapper interface {
	Map(length int64) (Mapping, error)
}

// LiveMapper is an optional File capability: a read-only shared mapping
// of the first length bytes that stays coherent with buffered writes to
// the file (the page cache backs both), so bytes written later show in
// it. Unlike Mapper it never falls back to a copy, which would go stale:
// where the file system cannot map, it fails.
type LiveMapper interface {
	MapLive(length int64) (Mapping, error)
}

// Mapping is a read-only memory view of a file.
type Mapping interface {
	// Bytes returns the mapped bytes; valid until Close.
	Bytes() []byte
	// Close releases the view.
	Close() error
}

// IsNoSpace reports whether err means the device is full.
func IsNoSpace(err error) bool {
	return errors.Is(err, ErrNoSpace) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EDQUOT)
}

// MkdirAllDurable creates dir and its missing parents and makes each new
// entry durable by syncing its parent directory.
func MkdirAllDurable(fsys FS, dir string) error {
	dir = path.Clean(dir)
	var missing []string
	for current := dir; ; current = path.Dir(current) {
		info, err := fsys.Stat(current)
		if err == nil {
			if !info.IsDir {
				return &pathError{op: "mkdir", path: current, err: syscall.ENOTDIR}
			}
			break
		}
		missing = append(missing, current)
		if parent := path.Dir(current); parent == current {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(path.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileAtomic replaces name with data crash-safely: write a temporary
// file beside it, sync it, rename it over name, sync the directory. After a
// crash the reader sees either the old contents or the new, never a mix.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	return WriteFileAtomicVia(fsys, name, name+".tmp", data)
}

// WriteFileAtomicVia is WriteFileAtomic through the temporary file tmp,
// for a directory whose scans know their temporary names (tmp must be in
// name's directory).
func WriteFileAtomicVia(fsys FS, name, tmp string, data []byte) error {
	file, err := fsys.OpenFile(tmp, ReadWrite|Create)
	if err != nil {
		return err
	}
	if err := writeAndSync(file, data); err != nil {
		_ = file.Close()
		_ = fsys.Remove(tmp)
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	return fsys.SyncDir(path.Dir(name))
}

func writeAndSync(file File, data []byte) error {
	if err := file.Truncate(0); err != nil {
		return err
	}
	if _, err := file.WriteAt(data, 0); err != nil {
		return err
	}
	return file.Sync()
}

// ReadFile returns the whole contents of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	file, err := fsys.OpenFile(name, ReadOnly)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n, err := file.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return data[:n], nil
}

// pathError mirrors fs.PathError without importing os.
type pathError struct {
	op   string
	path string
	err  error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// cleanPath normalizes a path for the in-memory implementations.
func cleanPath(name string) string {
	name = path.Clean("/" + strings.TrimPrefix(name, "/"))
	return name
}
