package backup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The layout a data directory has on disk (docs/FORMAT.md), as far as a
// backup needs it: FORMAT, streams/<stream>/<partition>/ with segment
// files and checkpoints/, and nested data directories (a subdirectory
// with its own FORMAT, like deadletters/).
const (
	formatFileName = "FORMAT"
	streamsDirName = "streams"
	previousSuffix = ".prev"
	copyChunk      = 1 << 20
)

// metadataFiles are the broker's small top-level files a restore needs
// besides the logs: the stream catalog (partitions, retention bounds,
// subject bindings) with its previous copy, the wall-clock high-water,
// the broker clock's floor and the producer registry (names, ids,
// epochs). Without the catalog a restored broker would adopt its streams
// with default settings and no bindings. The names are the broker's
// (broker/catalog, broker/wallclock.go, brokertime, producer); the
// backup does not import the broker, so a test pins them.
var metadataFiles = []string{"streams.json", "streams.json.prev", "wallclock", "clock", "producers.log"}

// logLocation names one log of a data directory tree.
type logLocation struct {
	dir       string // nested data directory, "" for the top one
	stream    string
	partition uint32
}

// rel is the log's directory relative to the top data directory.
func (l logLocation) rel() string {
	return path.Join(l.dir, streamsDirName, l.stream, strconv.FormatUint(uint64(l.partition), 10))
}

func (l logLocation) id() segment.LogID {
	return segment.LogID{Stream: l.stream, Partition: l.partition}
}

func (l logLocation) String() string {
	id := l.id().String()
	if l.dir != "" {
		return l.dir + ":" + id
	}
	return id
}

// dataDirs returns "" and every immediate subdirectory of root that is a
// data directory of its own.
func dataDirs(fsys vfs.FS, root string) ([]string, error) {
	if _, err := fsys.Stat(path.Join(root, formatFileName)); err != nil {
		return nil, fmt.Errorf("%w: %s has no %s file", ErrNotDataDir, root, formatFileName)
	}
	names, err := fsys.List(root)
	if err != nil {
		return nil, err
	}
	dirs := []string{""}
	for _, name := range names {
		if name == streamsDirName || strings.HasPrefix(name, ".") {
			continue
		}
		if info, err := fsys.Stat(path.Join(root, name, formatFileName)); err == nil && !info.IsDir {
			dirs = append(dirs, name)
		}
	}
	return dirs, nil
}

// logsOf lists the logs of one data directory, in name order.
func logsOf(fsys vfs.FS, root, dir string) ([]logLocation, error) {
	streamsPath := path.Join(root, dir, streamsDirName)
	streams, err := fsys.List(streamsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var logs []logLocation
	for _, stream := range streams {
		if segment.ValidateStreamName(stream) != nil {
			continue
		}
		partitions, err := fsys.List(path.Join(streamsPath, stream))
		if err != nil {
			return nil, err
		}
		for _, p := range partitions {
			if n, err := strconv.ParseUint(p, 10, 32); err == nil {
				logs = append(logs, logLocation{dir: dir, stream: stream, partition: uint32(n)})
			}
		}
	}
	return logs, nil
}

// logFiles lists a log's segment files (offset order) and checkpoint
// files (current and previous copies), by name.
func logFiles(fsys vfs.FS, logPath string) (segments, checkpoints []string, err error) {
	names, err := fsys.List(logPath)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		if _, ok := segment.ParseSegmentFileName(name); ok {
			segments = append(segments, name)
		}
	}
	names, err = fsys.List(path.Join(logPath, segment.CheckpointDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return segments, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		if strings.HasSuffix(name, segment.CheckpointSuffix) || strings.HasSuffix(name, segment.CheckpointSuffix+previousSuffix) {
			checkpoints = append(checkpoints, name)
		}
	}
	return segments, checkpoints, nil
}

// image is the bytes of a file, mapped where the file system can.
type image struct {
	data    []byte
	mapping vfs.Mapping
	file    vfs.File
}

func readImage(fsys vfs.FS, name string) (*image, error) {
	file, err := fsys.OpenFile(name, vfs.ReadOnly)
	if err != nil {
		return nil, err
	}
	size, err := file.Size()
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	img := &image{file: file}
	if mapper, ok := file.(vfs.Mapper); ok && size > 0 {
		if img.mapping, err = mapper.Map(size); err == nil {
			img.data = img.mapping.Bytes()
			return img, nil
		}
	}
	img.data = make([]byte, size)
	if n, err := file.ReadAt(img.data, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		_ = file.Close()
		return nil, err
	}
	return img, nil
}

func (img *image) close() {
	if img.mapping != nil {
		_ = img.mapping.Close()
	}
	_ = img.file.Close()
}

// copyFile copies the first limit bytes of from (all of it when limit is
// negative, or as much as there is) into a new file to, syncs it, and
// returns the bytes copied. progress is told each chunk.
func copyFile(fsys vfs.FS, from, to string, limit int64, progress func(int64)) (int64, error) {
	src, err := fsys.OpenFile(from, vfs.ReadOnly)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	dst, err := fsys.OpenFile(to, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, copyChunk)
	var copied int64
	for limit < 0 || copied < limit {
		chunk := buf
		if limit >= 0 {
			chunk = buf[:min(int64(len(buf)), limit-copied)]
		}
		n, readErr := src.ReadAt(chunk, copied)
		if n > 0 {
			if _, err := dst.WriteAt(chunk[:n], copied); err != nil {
				_ = dst.Close()
				return copied, err
			}
			copied += int64(n)
			progress(int64(n))
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			_ = dst.Close()
			return copied, readErr
		}
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		return copied, err
	}
	return copied, dst.Close()
}

// checksum returns the CRC32C of a whole file.
func checksum(fsys vfs.FS, name string) (int64, uint32, error) {
	img, err := readImage(fsys, name)
	if err != nil {
		return 0, 0, err
	}
	defer img.close()
	return int64(len(img.data)), format.CRC(img.data), nil
}

// removeTree removes dir and everything under it (a crashed restore's
// staging directory). A symbolic link (or any special file) is removed
// itself, never followed: nothing outside dir is touched.
func removeTree(fsys vfs.FS, dir string) error {
	link, err := isSpecial(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if link {
		return fsys.Remove(dir)
	}
	info, err := fsys.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.IsDir {
		names, err := fsys.List(dir)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := removeTree(fsys, path.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return fsys.Remove(dir)
}
