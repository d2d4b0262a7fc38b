//go:build linux && !arm && !386

package lazyfs

import (
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"path"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/ironbus/ironbus/segment/vfs"
)

// node is one file or directory of the mount. It holds no state of its
// own: every operation resolves its path in the disk's current image, so
// the image stays the single source of truth.
type node struct {
	fs.Inode
	disk *Disk
}

var (
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRmdirer   = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeReaddirer = (*node)(nil)
	_ fs.NodeFsyncer   = (*node)(nil)
)

// imagePath is the node's path inside the image.
func (n *node) imagePath() string { return "/" + n.Path(nil) }

func (n *node) childPath(name string) string { return path.Join(n.imagePath(), name) }

// alive fails with EIO when the disk is dead.
func (n *node) alive() syscall.Errno {
	if n.disk.Fault() == DeadDisk {
		return syscall.EIO
	}
	return 0
}

// child returns the inode for name, reusing the one the kernel already
// knows so its node id stays stable across lookups.
func (n *node) child(ctx context.Context, name string, isDir bool) *fs.Inode {
	mode := uint32(syscall.S_IFREG)
	if isDir {
		mode = syscall.S_IFDIR
	}
	if existing := n.GetChild(name); existing != nil && existing.StableAttr().Mode == mode {
		return existing
	}
	return n.NewInode(ctx, &node{disk: n.disk}, fs.StableAttr{Mode: mode})
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.alive(); errno != 0 {
		return nil, errno
	}
	info, err := n.disk.current().Stat(n.childPath(name))
	if err != nil {
		return nil, toErrno(err)
	}
	fillAttr(&out.Attr, info.IsDir, info.Size)
	return n.child(ctx, name, info.IsDir), 0
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if errno := n.alive(); errno != 0 {
		return errno
	}
	// An open handle answers even when its name is gone (unlinked, open).
	if h, ok := fh.(*handle); ok {
		size, err := h.file.Size()
		if err != nil {
			return toErrno(err)
		}
		fillAttr(&out.Attr, false, size)
		return 0
	}
	info, err := n.disk.current().Stat(n.imagePath())
	if err != nil {
		return toErrno(err)
	}
	fillAttr(&out.Attr, info.IsDir, info.Size)
	return 0
}

// Setattr honours size changes (truncate, ftruncate); owners, modes and
// times are not modelled and are accepted as no-ops.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := n.alive(); errno != 0 {
		return errno
	}
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(fh, int64(size)); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, fh, out)
}

func (n *node) truncate(fh fs.FileHandle, size int64) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		return toErrno(h.file.Truncate(size))
	}
	file, err := n.disk.current().OpenFile(n.imagePath(), vfs.ReadWrite)
	if err != nil {
		return toErrno(err)
	}
	defer file.Close()
	return toErrno(file.Truncate(size))
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.alive(); errno != 0 {
		return nil, 0, errno
	}
	file, err := n.disk.current().OpenFile(n.imagePath(), openFlag(flags))
	if err != nil {
		return nil, 0, toErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := file.Truncate(0); err != nil {
			_ = file.Close()
			return nil, 0, toErrno(err)
		}
	}
	return &handle{disk: n.disk, file: file}, 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.alive(); errno != 0 {
		return nil, nil, 0, errno
	}
	flag := openFlag(flags) | vfs.Create
	if flags&syscall.O_EXCL != 0 {
		flag |= vfs.Exclusive
	}
	file, err := n.disk.current().OpenFile(n.childPath(name), flag)
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := file.Truncate(0); err != nil {
			_ = file.Close()
			return nil, nil, 0, toErrno(err)
		}
	}
	size, _ := file.Size()
	fillAttr(&out.Attr, false, size)
	return n.child(ctx, name, false), &handle{disk: n.disk, file: file}, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.alive(); errno != 0 {
		return nil, errno
	}
	image, target := n.disk.current(), n.childPath(name)
	if _, err := image.Stat(target); err == nil {
		return nil, syscall.EEXIST
	}
	if err := image.MkdirAll(target); err != nil {
		return nil, toErrno(err)
	}
	fillAttr(&out.Attr, true, 0)
	return n.child(ctx, name, true), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if errno := n.alive(); errno != 0 {
		return errno
	}
	return toErrno(n.disk.current().Remove(n.childPath(name)))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if errno := n.alive(); errno != 0 {
		return errno
	}
	image, target := n.disk.current(), n.childPath(name)
	if names, err := image.List(target); err == nil && len(names) > 0 {
		return syscall.ENOTEMPTY
	}
	return toErrno(image.Remove(target))
}

// Rename supports plain renames (replacing the target), which is all
// rename(2) without flags asks for.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if errno := n.alive(); errno != 0 {
		return errno
	}
	if flags != 0 {
		return syscall.EINVAL
	}
	target := path.Join("/"+newParent.EmbeddedInode().Path(nil), newName)
	return toErrno(n.disk.current().Rename(n.childPath(name), target))
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if errno := n.alive(); errno != 0 {
		return nil, errno
	}
	image := n.disk.current()
	names, err := image.List(n.imagePath())
	if err != nil {
		return nil, toErrno(err)
	}
	entries := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		info, err := image.Stat(n.childPath(name))
		if err != nil {
			continue // removed since the listing
		}
		mode := uint32(syscall.S_IFREG)
		if info.IsDir {
			mode = syscall.S_IFDIR
		}
		entries = append(entries, fuse.DirEntry{Name: name, Mode: mode})
	}
	return fs.NewListDirStream(entries), 0
}

// Fsync serves fsync and fdatasync of files and fsync of directories: the
// only operations that make anything durable.
//
// The fault is checked after the latency: a sync in flight when a fault
// is set persists nothing, as a flush cut short by the power.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if latency := n.disk.syncLatency.Load(); latency > 0 {
		time.Sleep(time.Duration(latency))
	}
	if n.disk.Fault() != Healthy {
		return syscall.EIO
	}
	if n.IsDir() {
		return toErrno(n.disk.current().SyncDir(n.imagePath()))
	}
	file, closeAfter := vfs.File(nil), false
	if h, ok := fh.(*handle); ok {
		file = h.file
	} else {
		opened, err := n.disk.current().OpenFile(n.imagePath(), vfs.ReadOnly)
		if err != nil {
			return toErrno(err)
		}
		file, closeAfter = opened, true
	}
	var err error
	if flags&fuseFsyncDataOnly != 0 {
		err = file.SyncData()
	} else {
		err = file.Sync()
	}
	if closeAfter {
		_ = file.Close()
	}
	return toErrno(err)
}

// fuseFsyncDataOnly is FUSE_FSYNC_FDATASYNC: the kernel's way of saying
// fdatasync rather than fsync.
const fuseFsyncDataOnly = 1

// handle is an open file of the mount.
type handle struct {
	disk *Disk
	file vfs.File
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.disk.Fault() == DeadDisk {
		return nil, syscall.EIO
	}
	n, err := h.file.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.disk.Fault() == DeadDisk {
		return 0, syscall.EIO
	}
	n, err := h.file.WriteAt(data, off)
	return uint32(n), toErrno(err)
}

// Allocate serves fallocate mode 0 (reserve and extend), the only mode the
// broker uses; other modes are refused so callers fall back.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if h.disk.Fault() == DeadDisk {
		return syscall.EIO
	}
	if mode != 0 {
		return syscall.EOPNOTSUPP
	}
	return toErrno(h.file.Allocate(int64(off), int64(size)))
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	_ = h.file.Close()
	return 0
}

func openFlag(flags uint32) vfs.OpenFlag {
	// O_DIRECT is not passed on: the kernel hands FUSE whatever buffers
	// it has, and the model's alignment checks are for the engine.
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return vfs.ReadWrite
	}
	return vfs.ReadOnly
}

func fillAttr(out *fuse.Attr, isDir bool, size int64) {
	out.Blksize = 4096
	if isDir {
		out.Mode, out.Nlink = syscall.S_IFDIR|0o755, 2
		return
	}
	out.Mode, out.Nlink = syscall.S_IFREG|0o644, 1
	out.Size = uint64(size)
	out.Blocks = uint64(size+511) / 512
}

// toErrno maps the image's errors to what the kernel returns to callers.
func toErrno(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, iofs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, iofs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, iofs.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, iofs.ErrPermission):
		return syscall.EBADF
	case vfs.IsNoSpace(err):
		return syscall.ENOSPC
	}
	return syscall.EIO
}
