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
