package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"slices"
)

// memFile is an open handle on a MemFS file.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	writable bool
	direct   bool
	closed   bool // guarded by fs.mu
}

var (
	_ File   = (*memFile)(nil)
	_ Mapper = (*memFile)(nil)
)

func (f *memFile) Name() string { return f.name }

func (f *memFile) checkLocked(write bool) error {
	if f.closed {
		return ErrClosed
	}
	if write && !f.writable {
		return &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.direct {
		if err := checkAligned(p, off); err != nil {
			return 0, err
		}
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, off, func() {
		f.node.pending = append(f.node.pending, fileOp{kind: opWrite, off: off, data: slices.Clone(p)})
	})
}

// write changes the live bytes at off to p, checking what a real file
// would, then calls record under the lock (the crash model's log of the
// write; nothing for a volatile file).
func (f *memFile) write(p []byte, off int64, record func()) (int, error) {
	if f.direct {
		if err := checkAligned(p, off); err != nil {
			return 0, err
		}
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	end := off + int64(len(p))
	if err := f.growLocked(end); err != nil {
		return 0, err
	}
	copy(f.node.data[off:end], p)
	record()
	return len(p), nil
}

// growLocked extends the live data to size, charging the capacity.
// REQUIRES: f.fs.mu held.
func (f *memFile) growLocked(size int64) error {
	growth := size - int64(len(f.node.data))
	if growth <= 0 {
		return nil
	}
	if f.fs.capacity > 0 && f.fs.used+growth > f.fs.capacity {
		return &fs.PathError{Op: "write", Path: f.name, Err: fmt.Errorf("%w (capacity %d bytes)", ErrNoSpace, f.fs.capacity)}
	}
	f.fs.used += growth
	f.node.data = append(f.node.data, make([]byte, growth)...)
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(false); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

// SyncData persists pending writes and growth, stopping before the first
// shrinking resize, which only Sync persists (fdatasync semantics).
func (f *memFile) SyncData() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(false); err != nil {
		return err
	}
	f.persistLocked(false)
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(false); err != nil {
		return err
	}
	f.persistLocked(true)
	return nil
}

// persistLocked moves pending operations into the durable contents.
// REQUIRES: f.fs.mu held.
func (f *memFile) persistLocked(includeShrink bool) {
	node := f.node
	applied := 0
	for _, op := range node.pending {
		if op.kind == opResize && op.size < int64(len(node.durable)) && !includeShrink {
			break
		}
		node.durable = applyFileOp(node.durable, op)
		applied++
	}
	node.pending = slices.Delete(node.pending, 0, applied)
	if len(node.pending) == 0 {
		node.pending = nil
	}
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(true); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if size > int64(len(f.node.data)) {
		if err := f.growLocked(size); err != nil {
			return err
		}
	} else {
		f.fs.used -= int64(len(f.node.data)) - size
		f.node.data = f.node.data[:size:size]
	}
	f.node.pending = append(f.node.pending, fileOp{kind: opResize, size: size})
	return nil
}

func (f *memFile) Allocate(offset, length int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(true); err != nil {
		return err
	}
	end := offset + length
	if end <= int64(len(f.node.data)) {
		return nil
	}
	if err := f.growLocked(end); err != nil {
		return err
	}
	f.node.pending = append(f.node.pending, fileOp{kind: opResize, size: end})
	return nil
}

// Map returns a copy of the first length bytes: MemFS files are only mapped
// once sealed, so a copy behaves like a read-only mapping.
func (f *memFile) Map(length int64) (Mapping, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(false); err != nil {
		return nil, err
	}
	length = min(length, int64(len(f.node.data)))
	return &heapMapping{data: slices.Clone(f.node.data[:length])}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	return nil
}
