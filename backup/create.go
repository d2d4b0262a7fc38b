package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// activeAttempts bounds the copies of an active segment whose copy shows
// damage: a batch being written while the copy passed it looks damaged
// in the copy and is gone from the next one, real damage stays.
const activeAttempts = 3

// Options configure Create.
type Options struct {
	FS vfs.FS
	// NoLink copies sealed segments even where a hard link would do (a
	// link shares the disk blocks, so it is no protection against their
	// loss).
	NoLink bool
	// Now stamps the manifest; time.Now when nil.
	Now func() time.Time
	// Progress, when set, is told the bytes done and the total so far.
	Progress func(done, total int64)
}

// Result is what Create made.
type Result struct {
	Manifest Manifest
	// Damage lists damage found in the source while copying it: the
	// backup holds the files as they are, and a restore recovers them the
	// way the broker would.
	Damage []segment.LossEvent
	// Warnings are the events worth a line that are not damage (a log
	// whose oldest segment retention deleted mid-copy, and the like).
	Warnings []string
}

type creator struct {
	opts   Options
	src    string
	out    string
	result Result
	done   int64
	total  int64
}

// Create backs up the data directory src into out, which must not exist
// or be empty. It needs no lock and never writes into src.
func Create(src, out string, opts Options) (Result, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = func(int64, int64) {}
	}
	c := &creator{opts: opts, src: path.Clean(src), out: path.Clean(out)}
	dirs, err := dataDirs(opts.FS, c.src)
	if err != nil {
		return Result{}, err
	}
	if err := c.prepareOut(); err != nil {
		return Result{}, err
	}
	// The manifest names the source's own layout version: an encrypted
	// directory's is newer than a plain one's.
	dataFormat, err := segment.ReadDataFormatVersion(opts.FS, c.src)
	if err != nil {
		dataFormat = segment.DataFormatVersion
	}
	c.result.Manifest = Manifest{Schema: ManifestSchema, Created: opts.Now().UTC(), Source: c.src,
		DataFormatVersion: dataFormat, SegmentFormatVersion: format.SegmentFormatVersion,
		Files: []File{}, Logs: []Range{}}
	c.total = c.estimate(dirs)
	for _, dir := range dirs {
		if err := c.copyDataDir(dir); err != nil {
			return c.result, err
		}
	}
	image, err := EncodeManifest(c.result.Manifest)
	if err != nil {
		return c.result, err
	}
	if err := vfs.WriteFileAtomic(opts.FS, path.Join(c.out, ManifestName), image); err != nil {
		return c.result, fmt.Errorf("backup: writing the manifest: %w", err)
	}
	return c.result, nil
}

func (c *creator) prepareOut() error {
	names, err := c.opts.FS.List(c.out)
	if err == nil && len(names) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, c.out)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return vfs.MkdirAllDurable(c.opts.FS, path.Join(c.out, DataDirName))
}

// estimate sums the sizes of the files a backup will read, for progress.
func (c *creator) estimate(dirs []string) int64 {
	var total int64
	for _, dir := range dirs {
		logs, _ := logsOf(c.opts.FS, c.src, dir)
		for _, log := range logs {
			logPath := path.Join(c.src, log.rel())
			segments, checkpoints, _ := logFiles(c.opts.FS, logPath)
			for _, name := range segments {
				if info, err := c.opts.FS.Stat(path.Join(logPath, name)); err == nil {
					total += info.Size
				}
			}
			total += int64(len(checkpoints))
		}
	}
	return total
}

func (c *creator) advance(n int64) {
	c.done += n
	c.opts.Progress(c.done, max(c.total, c.done))
}

func (c *creator) copyDataDir(dir string) error {
	rel := path.Join(dir, formatFileName)
	if err := c.copyWhole(rel, KindFormat); err != nil {
		return err
	}
	if err := c.copyMetadata(dir); err != nil {
		return err
	}
	logs, err := logsOf(c.opts.FS, c.src, dir)
	if err != nil {
		return fmt.Errorf("backup: listing the logs of %s: %w", path.Join(c.src, dir), err)
	}
	for _, log := range logs {
		if err := c.copyLog(log); err != nil {
			return fmt.Errorf("backup: log %s: %w", log, err)
		}
	}
	return nil
}

// copyMetadata copies the metadata files a data directory has; a missing
// one is fine (an older broker, or a file not written yet). Each is
// written by rename, so the copy is one whole version of it.
func (c *creator) copyMetadata(dir string) error {
	for _, name := range metadataFiles {
		rel := path.Join(dir, name)
		if _, err := c.opts.FS.Stat(path.Join(c.src, rel)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := c.copyWhole(rel, KindMetadata); errors.Is(err, fs.ErrNotExist) {
			_ = c.opts.FS.Remove(path.Join(c.out, DataDirName, rel))
			continue // renamed away between the Stat and the copy
		} else if err != nil {
			return fmt.Errorf("backup: copying %s: %w", rel, err)
		}
	}
	return nil
}

// copyWhole copies a small file whole and lists it.
func (c *creator) copyWhole(rel, kind string) error {
	if err := confined(c.opts.FS, c.src, rel); err != nil {
		return err
	}
	to := path.Join(c.out, DataDirName, rel)
	if err := vfs.MkdirAllDurable(c.opts.FS, path.Dir(to)); err != nil {
		return err
	}
	if _, err := copyFile(c.opts.FS, path.Join(c.src, rel), to, -1, func(int64) {}); err != nil {
		return err
	}
	return c.list(rel, kind, false)
}

// list checksums a copied file and adds it to the manifest.
func (c *creator) list(rel, kind string, linked bool) error {
	size, crc, err := checksum(c.opts.FS, path.Join(c.out, DataDirName, rel))
	if err != nil {
		return err
	}
	m := &c.result.Manifest
	m.Files = append(m.Files, File{Path: rel, Kind: kind, Size: size, CRC32C: crc, Linked: linked})
	m.Bytes += size
	return nil
}

func (c *creator) copyLog(log logLocation) error {
	logPath := path.Join(c.src, log.rel())
	segments, checkpoints, err := logFiles(c.opts.FS, logPath)
	if err != nil {
		return err
	}
	outLog := path.Join(c.out, DataDirName, log.rel())
	if err := vfs.MkdirAllDurable(c.opts.FS, outLog); err != nil {
		return err
	}
	rng := Range{Dir: log.dir, Stream: log.stream, Partition: log.partition}
	// Checkpoints before segments: a cursor copied now is at or below
	// what the segments copied afterwards hold.
	for _, name := range checkpoints {
		copied, err := c.copyCheckpoint(log, name)
		if err != nil {
			return err
		}
		if copied {
			rng.Checkpoints++
		}
	}
	for i, name := range segments {
		check, copied, err := c.copySegment(log, name, i == len(segments)-1, rng.Segments == 0)
		if err != nil {
			return err
		}
		if !copied {
			continue
		}
		if rng.Segments == 0 {
			rng.FirstOffset = check.Base
		}
		rng.Segments++
		rng.NextOffset = check.NextOffset
		rng.Records += check.Records
	}
	if err := c.opts.FS.SyncDir(outLog); err != nil {
		return err
	}
	c.result.Manifest.Logs = append(c.result.Manifest.Logs, rng)
	return nil
}

// copyCheckpoint copies one checkpoint file; false when it vanished (its
// group was deleted) before the copy.
func (c *creator) copyCheckpoint(log logLocation, name string) (bool, error) {
	rel := path.Join(log.rel(), segment.CheckpointDirName, name)
	if err := confined(c.opts.FS, c.src, rel); err != nil {
		return false, err
	}
	to := path.Join(c.out, DataDirName, rel)
	if err := vfs.MkdirAllDurable(c.opts.FS, path.Dir(to)); err != nil {
		return false, err
	}
	if _, err := copyFile(c.opts.FS, path.Join(c.src, rel), to, -1, func(int64) {}); errors.Is(err, fs.ErrNotExist) {
		_ = c.opts.FS.Remove(to)
		return false, nil
	} else if err != nil {
		return false, err
	}
	c.advance(1)
	img, err := readImage(c.opts.FS, to)
	if err != nil {
		return false, err
	}
	_, checkErr := segment.InspectCheckpoint(rel, img.data)
	img.close()
	if checkErr != nil {
		c.result.Damage = append(c.result.Damage, segment.LossEvent{Reason: segment.ReasonCorruptCheckpoint,
			ReasonCode: uint32(segment.ReasonCorruptCheckpoint), Segment: rel, Detail: checkErr.Error()})
	}
	return true, c.list(rel, KindCheckpoint, false)
}

// copySegment copies one segment: sealed ones whole (linked when it
// can), the active one up to its last intact commit frame. A segment that
// vanished is retention at work: fine while nothing of the log was copied
// yet (the log's start moved on), a change of the log otherwise.
func (c *creator) copySegment(log logLocation, name string, last, first bool) (segment.SegmentCheck, bool, error) {
	rel := path.Join(log.rel(), name)
	if err := confined(c.opts.FS, c.src, rel); err != nil {
		return segment.SegmentCheck{}, false, err
	}
	from, to := path.Join(c.src, rel), path.Join(c.out, DataDirName, rel)
	var check segment.SegmentCheck
	var linked bool
	var err error
	if last {
		check, err = c.copyActive(log.id(), from, to, name)
	} else {
		check, linked, err = c.copySealed(log.id(), from, to, name)
	}
	if errors.Is(err, fs.ErrNotExist) {
		_ = c.opts.FS.Remove(to)
		if first {
			c.result.Warnings = append(c.result.Warnings, fmt.Sprintf("%s: %s was deleted by retention during the copy", log, name))
			return check, false, nil
		}
		return check, false, fmt.Errorf("%w: %s vanished from the middle of the log", ErrChanged, name)
	}
	if err != nil {
		return check, false, err
	}
	for _, event := range check.Events {
		event.Segment = rel
		if event.DataLoss || event.Reason == segment.ReasonCorruptFooter {
			c.result.Damage = append(c.result.Damage, event)
		}
	}
	return check, true, c.list(rel, KindSegment, linked)
}

func (c *creator) copySealed(id segment.LogID, from, to, name string) (segment.SegmentCheck, bool, error) {
	linker, canLink := c.opts.FS.(vfs.Linker)
	linked := false
	if canLink && !c.opts.NoLink {
		if err := linker.Link(from, to); err == nil {
			linked = true
			if info, err := c.opts.FS.Stat(to); err == nil {
				c.advance(info.Size)
			}
		} else if errors.Is(err, fs.ErrNotExist) {
			return segment.SegmentCheck{}, false, err
		}
	}
	if !linked {
		if _, err := copyFile(c.opts.FS, from, to, -1, c.advance); err != nil {
			return segment.SegmentCheck{}, false, err
		}
	}
	img, err := readImage(c.opts.FS, to)
	if err != nil {
		return segment.SegmentCheck{}, linked, err
	}
	defer img.close()
	check, err := segment.InspectSegment(id, name, img.data, false)
	return check, linked, err
}

// copyActive copies the segment being written up to where recovery would
// cut it: after the last intact commit frame. It judges the source first
// (mapped, read-only) and copies only that prefix, so the preallocated
// zeros past the data are never written to the backup's disk. Bytes
// before that frame never change while the broker runs (appends only
// extend the file), so the copy is the log as it stood at one instant;
// the copy is judged again to prove it.
func (c *creator) copyActive(id segment.LogID, from, to, name string) (segment.SegmentCheck, error) {
	var check segment.SegmentCheck
	for attempt := 1; ; attempt++ {
		source, err := judge(c.opts.FS, id, from, name)
		if err != nil {
			return source, err
		}
		if source.HasDamage() && attempt < activeAttempts {
			continue // a batch written while it was read looks damaged
		}
		if _, err := copyFile(c.opts.FS, from, to, source.ValidEnd, c.advance); err != nil {
			return source, err
		}
		if info, err := c.opts.FS.Stat(from); err == nil && info.Size > source.ValidEnd {
			c.advance(info.Size - source.ValidEnd) // the zeros skipped count as done
		}
		check, err = judge(c.opts.FS, id, to, name)
		if err != nil {
			return check, err
		}
		if check.NextOffset != source.NextOffset || check.ValidEnd != source.ValidEnd {
			// The file changed under the copy (sealed and cut, say): again.
			if err := c.opts.FS.Remove(to); err != nil {
				return check, err
			}
			if attempt < activeAttempts {
				continue
			}
			return check, fmt.Errorf("%w: %s kept changing while it was copied", ErrChanged, name)
		}
		// The torn tail was left behind: it is not in the backup.
		events := check.Events[:0]
		for _, event := range check.Events {
			if event.Reason != segment.ReasonTornTail {
				events = append(events, event)
			}
		}
		check.Events = events
		return check, nil
	}
}

// judge inspects one segment file as the last of its log.
func judge(fsys vfs.FS, id segment.LogID, file, name string) (segment.SegmentCheck, error) {
	img, err := readImage(fsys, file)
	if err != nil {
		return segment.SegmentCheck{}, err
	}
	defer img.close()
	return segment.InspectSegment(id, name, img.data, true)
}
