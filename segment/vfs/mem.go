package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
)

// MemFS is an in-memory file system that tracks durability. Each file keeps
// the bytes made durable by its last sync and the list of writes issued
// since; each directory keeps the entries made durable by its last SyncDir
// and the entry changes since. [MemFS.CrashClone] uses both to build the
// state a power cut could leave behind.
//
// The durability model is deliberately the weakest a POSIX file system on
// Linux offers: SyncData does not persist a shrinking truncate (Sync does),
// unsynced directory changes may be lost independently of each other (a
// rename is kept or lost as a whole), and unsynced writes may survive in any
// subset and order, with one of them torn at sector granularity.
type MemFS struct {
	mu       sync.Mutex
	root     *memNode
	dirOps   []*dirOp // unsynced directory changes, oldest first
	nextID   uint64
	capacity int64 // 0 = unlimited
	used     int64
}

var _ FS = (*MemFS)(nil)

type memNode struct {
	id    uint64
	isDir bool

	// directories
	children        map[string]*memNode
	durableChildren map[string]*memNode

	// files
	data    []byte
	durable []byte
	pending []fileOp
	locks   int // >0 shared holders, -1 exclusive
}

type fileOpKind int

const (
	opWrite fileOpKind = iota
	opResize
)

type fileOp struct {
	kind  fileOpKind
	off   int64
	data  []byte   // opWrite
	skips [][2]int // opWrite: byte ranges of data that never landed (torn)
	size  int64    // opResize
}

type dirOp struct {
	dir   *memNode
	name  string
	node  *memNode // nil removes the entry
	group int      // ops of one rename share a group and survive together
}

// NewMemFS returns an empty in-memory file system with a root directory.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.root = m.newDir()
	return m
}

// SetCapacity limits the total bytes of file data; writes and allocations
// beyond it fail with ErrNoSpace. Zero removes the limit.
func (m *MemFS) SetCapacity(bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = bytes
}

func (m *MemFS) newDir() *memNode {
	m.nextID++
	return &memNode{id: m.nextID, isDir: true, children: map[string]*memNode{},
		durableChildren: map[string]*memNode{}}
}

func (m *MemFS) newFile() *memNode {
	m.nextID++
	return &memNode{id: m.nextID}
}

// lookupLocked walks to name. REQUIRES: m.mu held.
func (m *MemFS) lookupLocked(name string) (*memNode, error) {
	name = cleanPath(name)
	node := m.root
	if name == "/" {
		return node, nil
	}
	for _, part := range splitPath(name) {
		if !node.isDir {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		child, ok := node.children[part]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		node = child
	}
	return node, nil
}

// parentLocked returns the directory holding name and the base name.
// REQUIRES: m.mu held.
func (m *MemFS) parentLocked(name string) (*memNode, string, error) {
	name = cleanPath(name)
	dir, err := m.lookupLocked(path.Dir(name))
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return dir, path.Base(name), nil
}

func splitPath(clean string) []string {
	var parts []string
	for _, part := range strings.Split(clean, "/") {
		if part != "" {
			parts = append(parts, part)
		}
	}
	return parts
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag OpenFlag) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked(name)
	if err != nil {
		return nil, err
	}
	node, exists := dir.children[base]
	switch {
	case exists && flag&Create != 0 && flag&Exclusive != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case exists && node.isDir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	case !exists && flag&Create == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !exists:
		node = m.newFile()
		dir.children[base] = node
		m.dirOps = append(m.dirOps, &dirOp{dir: dir, name: base, node: node})
	}
	return &memFile{fs: m, node: node, name: cleanPath(name),
		writable: flag&ReadWrite != 0, direct: flag&Direct != 0}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked(name)
	if err != nil {
		return err
	}
	node, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if node.isDir && len(node.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrInvalid}
	}
	delete(dir.children, base)
	m.used -= int64(len(node.data))
	m.dirOps = append(m.dirOps, &dirOp{dir: dir, name: base})
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldDir, oldBase, err := m.parentLocked(oldname)
	if err != nil {
		return err
	}
	node, ok := oldDir.children[oldBase]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	newDir, newBase, err := m.parentLocked(newname)
	if err != nil {
		return err
	}
	if replaced, ok := newDir.children[newBase]; ok && replaced != node {
		m.used -= int64(len(replaced.data))
	}
	delete(oldDir.children, oldBase)
	newDir.children[newBase] = node
	group := len(m.dirOps) + 1
	m.dirOps = append(m.dirOps,
		&dirOp{dir: oldDir, name: oldBase, group: group},
		&dirOp{dir: newDir, name: newBase, node: node, group: group})
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node := m.root
	for _, part := range splitPath(cleanPath(dir)) {
		child, ok := node.children[part]
		if !ok {
			child = m.newDir()
			node.children[part] = child
			m.dirOps = append(m.dirOps, &dirOp{dir: node, name: part, node: child})
		} else if !child.isDir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
		}
		node = child
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, err := m.lookupLocked(dir)
	if err != nil {
		return nil, err
	}
	if !node.isDir {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrInvalid}
	}
	names := make([]string, 0, len(node.children))
	for name := range node.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, err := m.lookupLocked(name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Name: path.Base(cleanPath(name)), Size: int64(len(node.data)), IsDir: node.isDir}, nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, err := m.lookupLocked(dir)
	if err != nil {
		return err
	}
	if !node.isDir {
		return &fs.PathError{Op: "fsync", Path: dir, Err: fs.ErrInvalid}
	}
	node.durableChildren = make(map[string]*memNode, len(node.children))
	for name, child := range node.children {
		node.durableChildren[name] = child
	}
	m.dirOps = slices.DeleteFunc(m.dirOps, func(op *dirOp) bool { return op.dir == node })
	return nil
}

// Lock implements FS.
func (m *MemFS) Lock(name string, exclusive bool) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, err := m.lookupLocked(name)
	if err != nil {
		return nil, err
	}
	if node.locks < 0 || (exclusive && node.locks > 0) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, name)
	}
	if exclusive {
		node.locks = -1
	} else {
		node.locks++
	}
	return &memLock{fs: m, node: node}, nil
}

type memLock struct {
	fs   *MemFS
	node *memNode
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		defer l.fs.mu.Unlock()
		if l.node.locks < 0 {
			l.node.locks = 0
		} else if l.node.locks > 0 {
			l.node.locks--
		}
	})
	return nil
}

// CrashOptions shape the state [MemFS.CrashClone] leaves behind.
type CrashOptions struct {
	// Seed drives every random choice; the same seed and history give the
	// same clone.
	Seed uint64
	// KeepUnsynced is the probability (0..1) that each unsynced write or
	// directory change survives. Zero keeps only synced state.
	KeepUnsynced float64
	// Reorder applies the surviving unsynced writes of a file in random
	// order instead of issue order.
	Reorder bool
	// Tear keeps only some sectors of one surviving write per file.
	Tear bool
	// SectorSize is the tearing granularity; 512 when zero.
	SectorSize int
}

// CrashClone returns a new MemFS holding what a power cut at this instant
// could leave: all synced data and entries, plus the unsynced part chosen by
// opts. The receiver is unchanged and stays usable.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	keep := func() bool { return opts.KeepUnsynced > 0 && rng.Float64() < opts.KeepUnsynced }

	crashChildren := m.crashDirectoriesLocked(keep)
	clone := &MemFS{nextID: m.nextID, capacity: m.capacity}
	cloned := map[*memNode]*memNode{}
	var build func(orig *memNode) *memNode
	build = func(orig *memNode) *memNode {
		if c, ok := cloned[orig]; ok {
			return c
		}
		c := &memNode{id: orig.id, isDir: orig.isDir}
		cloned[orig] = c
		if !orig.isDir {
			c.data = crashFileContents(orig, rng, keep, opts)
			c.durable = slices.Clone(c.data)
			clone.used += int64(len(c.data))
			return c
		}
		c.children = map[string]*memNode{}
		entries := crashChildren[orig]
		if entries == nil {
			entries = orig.durableChildren
		}
		for name, child := range entries {
			c.children[name] = build(child)
		}
		c.durableChildren = maps(c.children)
		return c
	}
	clone.root = build(m.root)
	return clone
}

// crashDirectoriesLocked decides which unsynced directory changes survive
// and returns the resulting entry map of every directory they touch.
// REQUIRES: m.mu held.
func (m *MemFS) crashDirectoriesLocked(keep func() bool) map[*memNode]map[string]*memNode {
	result := map[*memNode]map[string]*memNode{}
	decided := map[int]bool{}
	for _, op := range m.dirOps {
		kept, ok := decided[op.group]
		if !ok || op.group == 0 {
			kept = keep()
			if op.group != 0 {
				decided[op.group] = kept
			}
		}
		if !kept {
			continue
		}
		entries, ok := result[op.dir]
		if !ok {
			entries = maps(op.dir.durableChildren)
			result[op.dir] = entries
		}
		if op.node == nil {
			delete(entries, op.name)
		} else {
			entries[op.name] = op.node
		}
	}
	return result
}

func maps(in map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// crashFileContents applies a surviving subset of the unsynced operations
// of one file to its durable contents.
func crashFileContents(node *memNode, rng *rand.Rand, keep func() bool, opts CrashOptions) []byte {
	data := slices.Clone(node.durable)
	var survivors []fileOp
	for _, op := range node.pending {
		if keep() {
			survivors = append(survivors, op)
		}
	}
	if opts.Reorder {
		rng.Shuffle(len(survivors), func(i, j int) { survivors[i], survivors[j] = survivors[j], survivors[i] })
	}
	tearAt := -1
	if opts.Tear && len(survivors) > 0 {
		tearAt = rng.IntN(len(survivors))
	}
	sector := opts.SectorSize
	if sector <= 0 {
		sector = 512
	}
	for i, op := range survivors {
		if i == tearAt && op.kind == opWrite {
			op = tearWrite(op, rng, sector)
		}
		data = applyFileOp(data, op)
	}
	return data
}

// tearWrite keeps a random subset of the sectors a write touched, so the
// write lands partly, in no particular order, as on a real disk. Skipped
// sectors keep whatever the file held before.
func tearWrite(op fileOp, rng *rand.Rand, sector int) fileOp {
	torn := op
	torn.skips = nil
	for start := 0; start < len(op.data); {
		end := start + sector - int((op.off+int64(start))%int64(sector))
		end = min(end, len(op.data))
		if rng.IntN(2) == 0 {
			torn.skips = append(torn.skips, [2]int{start, end})
		}
		start = end
	}
	return torn
}

func applyFileOp(data []byte, op fileOp) []byte {
	switch op.kind {
	case opResize:
		if op.size <= int64(len(data)) {
			return data[:op.size]
		}
		return append(data, make([]byte, op.size-int64(len(data)))...)
	default:
		end := op.off + int64(len(op.data))
		if end > int64(len(data)) {
			data = append(data, make([]byte, end-int64(len(data)))...)
		}
		copyWithSkips(data[op.off:end], op.data, op.skips)
		return data
	}
}

func copyWithSkips(dst, src []byte, skips [][2]int) {
	if len(skips) == 0 {
		copy(dst, src)
		return
	}
	cursor := 0
	for _, skip := range skips {
		copy(dst[cursor:skip[0]], src[cursor:skip[0]])
		cursor = skip[1]
	}
	copy(dst[cursor:], src[cursor:])
}

// ProcessCrashClone returns the file system as a killed process leaves it
// (kill -9, no power cut): every write survives in the page cache, and what
// was not synced is still not durable, so a later CrashClone of the result
// can still drop it. Locks are not inherited.
func (m *MemFS) ProcessCrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	clone := &MemFS{nextID: m.nextID, capacity: m.capacity, used: m.used}
	cloned := map[*memNode]*memNode{}
	var copyNode func(orig *memNode) *memNode
	copyNode = func(orig *memNode) *memNode {
		if c, ok := cloned[orig]; ok {
			return c
		}
		c := &memNode{id: orig.id, isDir: orig.isDir, data: slices.Clone(orig.data),
			durable: slices.Clone(orig.durable), pending: slices.Clone(orig.pending)}
		cloned[orig] = c
		if orig.isDir {
			c.children, c.durableChildren = map[string]*memNode{}, map[string]*memNode{}
			for name, child := range orig.children {
				c.children[name] = copyNode(child)
			}
			for name, child := range orig.durableChildren {
				c.durableChildren[name] = copyNode(child)
			}
		}
		return c
	}
	clone.root = copyNode(m.root)
	for _, op := range m.dirOps {
		copied := &dirOp{dir: copyNode(op.dir), name: op.name, group: op.group}
		if op.node != nil {
			copied.node = copyNode(op.node)
		}
		clone.dirOps = append(clone.dirOps, copied)
	}
	return clone
}
