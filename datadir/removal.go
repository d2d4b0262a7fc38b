package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The layout this package relies on (docs/FORMAT.md): a data directory
// keeps its logs under streams/<stream>/<partition>, and the dead-letter
// queues in deadletters/, a data directory of its own laid out the same
// way. removedPrefix marks a directory being deleted: the name is not a
// valid stream name, so no scan reads or adopts it.
const (
	streamsDirName = "streams"
	// DeadLetterDirName is the data directory of the dead-letter queues
	// inside a data directory.
	DeadLetterDirName = "deadletters"
	removedPrefix     = ".removed-"
	tempSuffix        = ".tmp"
)

// moveAside renames <root>/streams/<name> out of the scan, durably, and
// returns where it went ("" when there was no such directory).
func moveAside(fsys vfs.FS, root, name string) (string, error) {
	if err := segment.ValidateStreamName(name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	streams := path.Join(root, streamsDirName)
	from := path.Join(streams, name)
	if _, err := fsys.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	aside := ""
	for n := uint64(time.Now().UnixNano()); ; n++ {
		aside = path.Join(streams, fmt.Sprintf("%s%s-%d", removedPrefix, name, n))
		if _, err := fsys.Stat(aside); err != nil {
			break // free, or the rename below reports why not
		}
	}
	if err := fsys.Rename(from, aside); err != nil {
		return "", fmt.Errorf("datadir: moving %s out of the scan: %w", from, err)
	}
	if err := fsys.SyncDir(streams); err != nil {
		return aside, fmt.Errorf("datadir: moving %s out of the scan: %w", from, err)
	}
	return aside, nil
}

// removeLog deletes <root>/streams/<name>: moved aside first, so a crash
// midway leaves a directory the next open deletes. A missing directory
// is not an error.
func removeLog(fsys vfs.FS, root, name string) error {
	aside, err := moveAside(fsys, root, name)
	if err != nil || aside == "" {
		return err
	}
	return removeTree(fsys, aside)
}

// removedName returns the stream a removedPrefix entry was, or false.
func removedName(entry string) (string, bool) {
	rest, ok := strings.CutPrefix(entry, removedPrefix)
	if !ok {
		return "", false
	}
	cut := strings.LastIndexByte(rest, '-')
	if cut < 0 {
		return "", false
	}
	if _, err := strconv.ParseUint(rest[cut+1:], 10, 64); err != nil {
		return "", false
	}
	name := rest[:cut]
	return name, segment.ValidateStreamName(name) == nil
}

// pendingRemovals lists the entries of <root>/streams left by removals
// that did not finish, with the stream each was.
func pendingRemovals(fsys vfs.FS, root string) (entries, names []string, err error) {
	listed, err := fsys.List(path.Join(root, streamsDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("datadir: listing %s: %w", path.Join(root, streamsDirName), err)
	}
	for _, entry := range listed {
		if strings.HasPrefix(entry, removedPrefix) {
			name, _ := removedName(entry)
			entries, names = append(entries, entry), append(names, name)
		}
	}
	return entries, names, nil
}

// rollForward applies to c what the removals found on disk committed:
// a stream whose directory went aside and did not come back (a new
// stream of the name has a directory of its own) is gone. It returns
// the streams it forgot.
func rollForward(fsys vfs.FS, root string, c *catalog.Catalog, names []string) ([]string, error) {
	var forgotten []string
	for _, name := range names {
		if name == "" {
			continue
		}
		if _, ok := c.Stream(name); !ok {
			continue
		}
		_, err := fsys.Stat(path.Join(root, streamsDirName, name))
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("datadir: %w", err)
		}
		c.Remove(name)
		forgotten = append(forgotten, name)
	}
	return forgotten, nil
}

// deleteLeftovers deletes what unfinished removals left once the catalog
// is settled: the dead-letter queue of each removed stream the catalog no
// longer names, then the renamed directories, then a stale temporary
// catalog file.
func deleteLeftovers(fsys vfs.FS, root string, c catalog.Catalog, entries, names []string) error {
	var errs []error
	for i, entry := range entries {
		if _, ok := c.Stream(names[i]); names[i] != "" && !ok {
			errs = append(errs, removeLog(fsys, path.Join(root, DeadLetterDirName), names[i]))
		}
		errs = append(errs, removeTree(fsys, path.Join(root, streamsDirName, entry)))
	}
	queues, _, err := pendingRemovals(fsys, path.Join(root, DeadLetterDirName))
	errs = append(errs, err)
	for _, entry := range queues {
		errs = append(errs, removeTree(fsys, path.Join(root, DeadLetterDirName, streamsDirName, entry)))
	}
	temp := path.Join(root, catalog.FileName+tempSuffix)
	if err := fsys.Remove(temp); err == nil {
		errs = append(errs, fsys.SyncDir(root))
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeTree deletes a directory and everything under it, children
// before parents, syncing each directory it empties.
func removeTree(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("datadir: deleting %s: %w", dir, err)
	}
	for _, name := range names {
		full := path.Join(dir, name)
		info, err := fsys.Stat(full)
		if err != nil {
			return fmt.Errorf("datadir: deleting %s: %w", full, err)
		}
		if info.IsDir {
			if err := removeTree(fsys, full); err != nil {
				return err
			}
		} else if err := fsys.Remove(full); err != nil {
			return fmt.Errorf("datadir: deleting %s: %w", full, err)
		}
	}
	if err := fsys.Remove(dir); err != nil {
		return fmt.Errorf("datadir: deleting %s: %w", dir, err)
	}
	if err := fsys.SyncDir(path.Dir(dir)); err != nil {
		return fmt.Errorf("datadir: deleting %s: %w", dir, err)
	}
	return nil
}
