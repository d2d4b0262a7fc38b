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
// directories only: a symbolic link anywhere on the way (or as the file
// itself) is refused as an unsafe path, never followed, so a crafted tree
// can neither feed a file from outside into a backup or a restore nor
// steer a removal outside the root. The root itself may be a link (an
// operator's /backups/latest); only what lies below it is judged.

// confined checks that root/rel is reached through no symbolic link
// below root. A component that does not exist ends the check: the caller
// meets the missing file and reports it its own way.
func confined(fsys vfs.FS, root, rel string) error {
	checker, ok := fsys.(vfs.SymlinkChecker)
	if !ok {
		return nil
	}
	if !safePath(rel) {
		return fmt.Errorf("%w: %q", ErrUnsafePath, rel)
	}
	at := root
	for _, part := range strings.Split(rel, "/") {
		at = path.Join(at, part)
		link, err := checker.IsSymlink(at)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if link {
			return fmt.Errorf("%w: %s is a symbolic link; backup, restore and scrub never follow one", ErrUnsafePath, at)
		}
	}
	return nil
}

// isSymlink reports whether name itself is a symbolic link.
func isSymlink(fsys vfs.FS, name string) (bool, error) {
	checker, ok := fsys.(vfs.SymlinkChecker)
	if !ok {
		return false, nil
	}
	return checker.IsSymlink(name)
}
