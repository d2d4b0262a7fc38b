package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/ironbus/ironbus/segment/vfs"
)

// A backup and a data directory are trees a stranger may have written: a
// backup copied from elsewhere, a data directory on a shared disk. Every
// file this package reads or writes below a root is reached through real
// directories only and is a regular file: a symbolic link anywhere on the
// way, or a FIFO, device or socket, is refused as an unsafe path, never
// followed or opened. So a crafted tree can neither feed a file from
// outside into a backup or a restore, nor steer a removal outside the
// root, nor hang a reader on a FIFO. The root itself may be a link (an
// operator's /backups/latest); only what lies below it is judged.

// confined checks that root/rel is reached through no special entry
// below root. A component that does not exist ends the check: the caller
// meets the missing file and reports it its own way.
func confined(fsys vfs.FS, root, rel string) error {
	checker, ok := fsys.(vfs.SpecialChecker)
	if !ok {
		return nil
	}
	if !safePath(rel) {
		return fmt.Errorf("%w: %q", ErrUnsafePath, rel)
	}
	at := root
	for _, part := range strings.Split(rel, "/") {
		at = path.Join(at, part)
		special, err := checker.IsSpecial(at)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if special {
			return fmt.Errorf("%w: %s is a symbolic link or a special file; backup, restore and scrub never follow or open one", ErrUnsafePath, at)
		}
	}
	return nil
}

// isSpecial reports whether name itself is a symbolic link or a special
// file.
func isSpecial(fsys vfs.FS, name string) (bool, error) {
	checker, ok := fsys.(vfs.SpecialChecker)
	if !ok {
		return false, nil
	}
	return checker.IsSpecial(name)
}

// SpecialEntries lists, relative to root, every symbolic link, FIFO,
// device or socket below root, without following or opening any. The
// broker makes none, so each one is damage an operator must look at
// (`ironbus verify` reports them).
func SpecialEntries(fsys vfs.FS, root string) ([]string, error) {
	if _, ok := fsys.(vfs.SpecialChecker); !ok {
		return nil, nil
	}
	var found []string
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := fsys.List(path.Join(root, rel))
		if err != nil {
			return err
		}
		for _, name := range names {
			child := path.Join(rel, name)
			special, err := isSpecial(fsys, path.Join(root, child))
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			if err != nil {
				return err
			}
			if special {
				found = append(found, child)
				continue
			}
			if info, err := fsys.Stat(path.Join(root, child)); err == nil && info.IsDir {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return found, walk("")
}
