package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/wire"
)

// The catalog and the log directories must agree; these helpers keep
// them so for the broker and the offline tools alike.

// streamsDirName is where a data directory keeps its logs (docs/FORMAT.md);
// removedPrefix marks a stream directory being deleted: the name is not a
// valid stream name, so no scan adopts it, and the next open finishes the
// delete.
const (
	streamsDirName = "streams"
	removedPrefix  = ".removed-"
)

// Adoptable returns the streams found on disk (ids, from segment.Dir.Logs)
// that the catalog lacks, or whose entry has fewer partitions than the
// disk holds: a data directory from before named streams. Each gets the
// highest partition found + 1, default retention and no creation time.
func Adoptable(c Catalog, ids []segment.LogID) []Stream {
	highest := map[string]uint32{}
	for _, id := range ids {
		if id.Partition >= wire.MaxPartitions {
			continue
		}
		if p, ok := highest[id.Stream]; !ok || id.Partition > p {
			highest[id.Stream] = id.Partition
		}
	}
	var out []Stream
	for name, p := range highest {
		s, ok := c.Stream(name)
		if ok && s.Partitions > p {
			continue
		}
		if !ok {
			s = Stream{Name: name}
		}
		s.Partitions = p + 1
		out = append(out, s)
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RemoveStreamFiles deletes <root>/streams/<name> (root is a data
// directory, or the dead-letter directory inside one): MoveStreamAside,
// then DeleteMoved. A missing directory is not an error.
func RemoveStreamFiles(fsys vfs.FS, root, name string) error {
	aside, err := MoveStreamAside(fsys, root, name)
	if err != nil {
		return err
	}
	return DeleteMoved(fsys, aside)
}

// MoveStreamAside renames <root>/streams/<name> out of the scan, durably,
// and returns where it went ("" when there was no such directory). From
// then on the name is free: a new stream of that name starts empty, and a
// crash before DeleteMoved leaves a directory the next FinishRemovals
// deletes, never a stream that comes back.
func MoveStreamAside(fsys vfs.FS, root, name string) (string, error) {
	if err := segment.ValidateStreamName(name); err != nil {
		return "", err
	}
	streams := path.Join(root, streamsDirName)
	from := path.Join(streams, name)
	if _, err := fsys.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	aside := path.Join(streams, fmt.Sprintf("%s%s-%d", removedPrefix, name, time.Now().UnixNano()))
	if err := fsys.Rename(from, aside); err != nil {
		return "", err
	}
	if err := fsys.SyncDir(streams); err != nil {
		return "", err
	}
	return aside, nil
}

// DeleteMoved deletes what MoveStreamAside moved ("" is nothing).
func DeleteMoved(fsys vfs.FS, aside string) error {
	if aside == "" {
		return nil
	}
	return removeTree(fsys, aside)
}

// FinishRemovals deletes what a crash left of removed streams under
// <root>/streams.
func FinishRemovals(fsys vfs.FS, root string) error {
	streams := path.Join(root, streamsDirName)
	names, err := fsys.List(streams)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasPrefix(name, removedPrefix) {
			if err := removeTree(fsys, path.Join(streams, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeTree deletes a directory and everything under it.
func removeTree(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		full := path.Join(dir, name)
		info, err := fsys.Stat(full)
		if err != nil {
			return err
		}
		if info.IsDir {
			err = removeTree(fsys, full)
		} else {
			err = fsys.Remove(full)
		}
		if err != nil {
			return err
		}
	}
	if err := fsys.Remove(dir); err != nil {
		return err
	}
	return fsys.SyncDir(path.Dir(dir))
}
