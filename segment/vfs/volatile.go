package vfs

import "io/fs"

// VolatileFS is a MemFS that does not model durability: a file keeps only
// its live bytes (no synced copy, no log of unsynced writes) and a mapping
// is a view of them rather than a copy. It serves a broker that keeps its
// logs in RAM on purpose, where nothing is meant to survive the process and
// the stored bytes are counted once against the RAM budget. It has no
// CrashClone: there is no state a power cut could leave.
type VolatileFS struct {
	*MemFS
}

var _ FS = VolatileFS{}

// NewVolatileFS returns an empty volatile file system holding at most
// capacity bytes of file data (0: unlimited); writes past it fail with
// ErrNoSpace, as on a full disk.
func NewVolatileFS(capacity int64) VolatileFS {
	memory := NewMemFS()
	memory.SetCapacity(capacity)
	return VolatileFS{MemFS: memory}
}

// OpenFile implements FS.
func (v VolatileFS) OpenFile(name string, flag OpenFlag) (File, error) {
	file, err := v.MemFS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return volatileFile{file.(*memFile)}, nil
}

// volatileFile changes a memFile's bytes in place and records nothing
// for a crash to replay. Reads, Size and Close are the memFile's.
type volatileFile struct {
	*memFile
}

var (
	_ File   = volatileFile{}
	_ Mapper = volatileFile{}
)

func (f volatileFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, off, func() {})
}

// SyncData has nothing to persist; it still refuses a closed file.
func (f volatileFile) SyncData() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.checkLocked(false)
}

func (f volatileFile) Sync() error { return f.SyncData() }

func (f volatileFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(true); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if size > int64(len(f.node.data)) {
		return f.growLocked(size)
	}
	f.fs.used -= int64(len(f.node.data)) - size
	// The capacity is cut too, so later growth reallocates rather than
	// writing under a view handed out by Map.
	f.node.data = f.node.data[:size:size]
	return nil
}

func (f volatileFile) Allocate(offset, length int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(true); err != nil {
		return err
	}
	return f.growLocked(offset + length)
}

// Map returns a view of the live bytes, not a copy: the engine maps only
// sealed segments, which are never written again, so the view stays
// what a read-only mapping would show, and the bytes are held once.
func (f volatileFile) Map(length int64) (Mapping, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked(false); err != nil {
		return nil, err
	}
	length = min(length, int64(len(f.node.data)))
	return &heapMapping{data: f.node.data[:length:length]}, nil
}
