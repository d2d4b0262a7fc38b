package vfs

import "os"

// Linker is an optional FS capability: a second name for an existing
// file (a hard link). Backups use it for sealed segments, which never
// change, so a backup on the same file system costs no data copy. Link
// fails (EXDEV, EPERM, ErrNotSupported) where the two names cannot share
// the file; callers then copy.
type Linker interface {
	Link(oldname, newname string) error
}

var _ Linker = OS{}

// Link implements Linker with link(2); durable after SyncDir of the new
// name's directory.
func (OS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// SpecialChecker is an optional FS capability: whether a name is
// anything but a regular file or a directory (a symbolic link, a FIFO, a
// device, a socket), judged without following it. Tools that walk a tree
// someone else may have written (backup, restore, scrub) refuse such
// entries: a link leads out of the tree, a FIFO blocks the reader
// forever, a device reads without end. A file system that can hold only
// files and directories need not implement it.
type SpecialChecker interface {
	IsSpecial(name string) (bool, error)
}

var _ SpecialChecker = OS{}

// IsSpecial implements SpecialChecker with lstat(2).
func (OS) IsSpecial(name string) (bool, error) {
	info, err := os.Lstat(name)
	if err != nil {
		return false, err
	}
	return !info.Mode().IsRegular() && !info.IsDir(), nil
}
