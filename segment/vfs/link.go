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

// SymlinkChecker is an optional FS capability: whether a name is a
// symbolic link, judged without following it. Tools that walk a tree
// someone else may have written (backup, restore, scrub) refuse links
// rather than follow them out of the tree; a file system that cannot
// hold symbolic links need not implement it.
type SymlinkChecker interface {
	IsSymlink(name string) (bool, error)
}

var _ SymlinkChecker = OS{}

// IsSymlink implements SymlinkChecker with lstat(2).
func (OS) IsSymlink(name string) (bool, error) {
	info, err := os.Lstat(name)
	if err != nil {
		return false, err
	}
	return info.Mode()&os.ModeSymlink != 0, nil
}
