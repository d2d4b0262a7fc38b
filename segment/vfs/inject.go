package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// OpKind names a file-system operation seen by an [Injector].
type OpKind int

// The operations an Injector can fail.
const (
	OpOpen OpKind = iota
	OpCreate
	OpRead
	OpWrite
	OpSyncData
	OpSync
	OpSyncDir
	OpTruncate
	OpAllocate
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpLock
	OpMap
)

var opNames = [...]string{"open", "create", "read", "write", "syncdata", "sync", "syncdir",
	"truncate", "allocate", "remove", "rename", "mkdir", "list", "stat", "lock", "map"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// IsMutation reports whether the operation can change durable state: these
// are the points where a crash test cuts power.
func (k OpKind) IsMutation() bool {
	switch k {
	case OpCreate, OpWrite, OpSyncData, OpSync, OpSyncDir, OpTruncate, OpAllocate,
		OpRemove, OpRename, OpMkdir:
		return true
	}
	return false
}

// Op describes one operation about to run.
type Op struct {
	Kind   OpKind
	Path   string
	Offset int64
	Length int
}

// Injector decides whether an operation fails. A nil error lets it run.
// MaybeFail is called before the operation, possibly concurrently.
type Injector interface {
	MaybeFail(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeFail implements Injector.
func (f InjectorFunc) MaybeFail(op Op) error { return f(op) }

// Errors an injector commonly returns. Each wraps ErrInjected and the errno a
// real device would give, so both errors.Is(err, ErrInjected) and
// errors.Is(err, syscall.EIO) hold.
var (
	InjectedEIO     = injected(syscall.EIO)
	InjectedNoSpace = fmt.Errorf("%w: %w", ErrNoSpace, injected(syscall.ENOSPC))
)

func injected(errno syscall.Errno) error { return fmt.Errorf("%w: %w", ErrInjected, errno) }

// ShortWrite, returned by an injector for an OpWrite, makes the write land
// only its first half and then fail with the wrapped error.
type ShortWrite struct{ Err error }

func (s *ShortWrite) Error() string { return "short write: " + s.Err.Error() }
func (s *ShortWrite) Unwrap() error { return s.Err }

// Toggle is an injector that fails matching operations while it is on.
type Toggle struct {
	on    atomic.Bool
	Match func(Op) bool
	Err   error
}

// Set switches the fault on or off.
func (t *Toggle) Set(on bool) { t.on.Store(on) }

// MaybeFail implements Injector.
func (t *Toggle) MaybeFail(op Op) error {
	if t.on.Load() && (t.Match == nil || t.Match(op)) {
		return t.Err
	}
	return nil
}

// Randomly fails each matching operation with probability p, seeded so a
// failing run can be replayed.
func Randomly(p float64, seed uint64, match func(Op) bool, err error) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed+1))
	return InjectorFunc(func(op Op) error {
		if match != nil && !match(op) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < p {
			return err
		}
		return nil
	})
}

// KindIs matches operations of the given kinds.
func KindIs(kinds ...OpKind) func(Op) bool {
	return func(op Op) bool {
		for _, kind := range kinds {
			if op.Kind == kind {
				return true
			}
		}
		return false
	}
}

// PathContains matches operations whose path contains fragment.
func PathContains(fragment string) func(Op) bool {
	return func(op Op) bool { return strings.Contains(op.Path, fragment) }
}

// Inject wraps fsys so inj is consulted before every operation.
func Inject(fsys FS, inj Injector) FS { return &injectFS{inner: fsys, inj: inj} }

type injectFS struct {
	inner FS
	inj   Injector
}

var _ FS = (*injectFS)(nil)

func (i *injectFS) check(kind OpKind, path string, offset int64, length int) error {
	if err := i.inj.MaybeFail(Op{Kind: kind, Path: path, Offset: offset, Length: length}); err != nil {
		return &pathError{op: kind.String(), path: path, err: err}
	}
	return nil
}

func (i *injectFS) OpenFile(name string, flag OpenFlag) (File, error) {
	kind := OpOpen
	if flag&Create != 0 {
		kind = OpCreate
	}
	if err := i.check(kind, name, 0, 0); err != nil {
		return nil, err
	}
	file, err := i.inner.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return &injectFile{inner: file, fs: i}, nil
}

func (i *injectFS) Remove(name string) error {
	if err := i.check(OpRemove, name, 0, 0); err != nil {
		return err
	}
	return i.inner.Remove(name)
}

func (i *injectFS) Rename(oldname, newname string) error {
	if err := i.check(OpRename, oldname, 0, 0); err != nil {
		return err
	}
	return i.inner.Rename(oldname, newname)
}

func (i *injectFS) MkdirAll(dir string) error {
	if err := i.check(OpMkdir, dir, 0, 0); err != nil {
		return err
	}
	return i.inner.MkdirAll(dir)
}

func (i *injectFS) List(dir string) ([]string, error) {
	if err := i.check(OpList, dir, 0, 0); err != nil {
		return nil, err
	}
	return i.inner.List(dir)
}

func (i *injectFS) Stat(name string) (FileInfo, error) {
	if err := i.check(OpStat, name, 0, 0); err != nil {
		return FileInfo{}, err
	}
	return i.inner.Stat(name)
}

func (i *injectFS) SyncDir(dir string) error {
	if err := i.check(OpSyncDir, dir, 0, 0); err != nil {
		return err
	}
	return i.inner.SyncDir(dir)
}

func (i *injectFS) Lock(name string, exclusive bool) (io.Closer, error) {
	if err := i.check(OpLock, name, 0, 0); err != nil {
		return nil, err
	}
	return i.inner.Lock(name, exclusive)
}

type injectFile struct {
	inner File
	fs    *injectFS
}

var (
	_ File       = (*injectFile)(nil)
	_ Mapper     = (*injectFile)(nil)
	_ LiveMapper = (*injectFile)(nil)
)

func (f *injectFile) Name() string         { return f.inner.Name() }
func (f *injectFile) Size() (int64, error) { return f.inner.Size() }
func (f *injectFile) Close() error         { return f.inner.Close() }

func (f *injectFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.inner.Name(), off, len(p)); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *injectFile) WriteAt(p []byte, off int64) (int, error) {
	err := f.fs.inj.MaybeFail(Op{Kind: OpWrite, Path: f.inner.Name(), Offset: off, Length: len(p)})
	if err == nil {
		return f.inner.WriteAt(p, off)
	}
	var short *ShortWrite
	if errors.As(err, &short) {
		n, writeErr := f.inner.WriteAt(p[:len(p)/2], off)
		if writeErr != nil {
			return n, writeErr
		}
		return n, &pathError{op: "write", path: f.inner.Name(), err: short.Err}
	}
	return 0, &pathError{op: "write", path: f.inner.Name(), err: err}
}

func (f *injectFile) SyncData() error {
	if err := f.fs.check(OpSyncData, f.inner.Name(), 0, 0); err != nil {
		return err
	}
	return f.inner.SyncData()
}

func (f *injectFile) Sync() error {
	if err := f.fs.check(OpSync, f.inner.Name(), 0, 0); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *injectFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.inner.Name(), size, 0); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *injectFile) Allocate(offset, length int64) error {
	if err := f.fs.check(OpAllocate, f.inner.Name(), offset, int(length)); err != nil {
		return err
	}
	return f.inner.Allocate(offset, length)
}

func (f *injectFile) MapLive(length int64) (Mapping, error) {
	if err := f.fs.check(OpMap, f.inner.Name(), 0, int(length)); err != nil {
		return nil, err
	}
	if mapper, ok := f.inner.(LiveMapper); ok {
		return mapper.MapLive(length)
	}
	return nil, fmt.Errorf("%w: live map", ErrNotSupported)
}

func (f *injectFile) Map(length int64) (Mapping, error) {
	if err := f.fs.check(OpMap, f.inner.Name(), 0, int(length)); err != nil {
		return nil, err
	}
	if mapper, ok := f.inner.(Mapper); ok {
		return mapper.Map(length)
	}
	return nil, fmt.Errorf("%w: map", ErrNotSupported)
}
