package backup

import (
	"fmt"
	"path"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// ScrubReport is what Scrub found in a data directory tree.
type ScrubReport struct {
	Logs []LogScrub `json:"logs"`
	// Damaged counts logs with damage or an error.
	Damaged int   `json:"damaged"`
	Bytes   int64 `json:"bytes"`
}

// LogScrub is what Scrub found in one log.
type LogScrub struct {
	Dir         string              `json:"dir"`
	Stream      string              `json:"stream"`
	Partition   uint32              `json:"partition"`
	Segments    int                 `json:"segments"`
	Bytes       int64               `json:"bytes"`
	FirstOffset uint64              `json:"first_offset"`
	NextOffset  uint64              `json:"next_offset"`
	Records     uint64              `json:"records"`
	Checkpoints int                 `json:"checkpoints"`
	Events      []segment.LossEvent `json:"events"`
	// Error is set when a file could not be judged at all (unreadable, a
	// newer format, files of another log).
	Error string `json:"error,omitempty"`
}

// Damaged reports whether the log needs an operator: data loss, a damaged
// checkpoint or footer, or an error.
func (l LogScrub) Damaged() bool {
	if l.Error != "" {
		return true
	}
	for _, event := range l.Events {
		if event.Reason != segment.ReasonTornTail {
			return true
		}
	}
	return false
}

// Scrub checks every file of the data directory root and the data
// directories nested in it, read-only and without the lock: every record,
// batch and footer checksum of every segment, the offset chain between
// segments, and every checkpoint. A torn tail of an active segment is
// reported but is not damage (a live broker may be writing it).
func Scrub(fsys vfs.FS, root string, progress func(done, total int64)) (ScrubReport, error) {
	if fsys == nil {
		fsys = vfs.OS{}
	}
	if progress == nil {
		progress = func(int64, int64) {}
	}
	root = path.Clean(root)
	dirs, err := dataDirs(fsys, root)
	if err != nil {
		return ScrubReport{}, err
	}
	counter := &creator{opts: Options{FS: fsys, Progress: progress}, src: root}
	counter.total = counter.estimate(dirs)
	report := ScrubReport{Logs: []LogScrub{}}
	for _, dir := range dirs {
		logs, err := logsOf(fsys, root, dir)
		if err != nil {
			return report, fmt.Errorf("backup: listing the logs of %s: %w", path.Join(root, dir), err)
		}
		for _, log := range logs {
			result := scrubLog(fsys, root, log, counter.advance)
			if result.Damaged() {
				report.Damaged++
			}
			report.Bytes += result.Bytes
			report.Logs = append(report.Logs, result)
		}
	}
	return report, nil
}

func scrubLog(fsys vfs.FS, root string, log logLocation, advance func(int64)) LogScrub {
	result := LogScrub{Dir: log.dir, Stream: log.stream, Partition: log.partition, Events: []segment.LossEvent{}}
	logPath := path.Join(root, log.rel())
	segments, checkpoints, err := logFiles(fsys, logPath)
	if err == nil {
		err = confinedFiles(fsys, root, log.rel(), segments, checkpoints)
	}
	if err != nil {
		result.Error = err.Error()
		return result
	}
	for _, name := range checkpoints {
		advance(1)
		rel := path.Join(segment.CheckpointDirName, name)
		img, err := readImage(fsys, path.Join(logPath, rel))
		if err != nil {
			continue // replaced or deleted since the listing
		}
		_, checkErr := segment.InspectCheckpoint(rel, img.data)
		img.close()
		result.Checkpoints++
		if checkErr != nil {
			result.Events = append(result.Events, segment.LossEvent{Reason: segment.ReasonCorruptCheckpoint,
				ReasonCode: uint32(segment.ReasonCorruptCheckpoint), Segment: rel, Detail: checkErr.Error()})
		}
	}
	var previous *segment.SegmentCheck
	for i, name := range segments {
		check, size, err := scrubSegment(fsys, log.id(), path.Join(logPath, name), name, i == len(segments)-1)
		advance(size)
		if err != nil {
			result.Error = err.Error()
			return result
		}
		if previous == nil {
			result.FirstOffset = check.Base
		} else if gap := chainGap(*previous, check, name); gap != nil {
			result.Events = append(result.Events, *gap)
		}
		result.Segments++
		result.Bytes += size
		result.NextOffset, result.Records = check.NextOffset, result.Records+check.Records
		result.Events = append(result.Events, check.Events...)
		previous = &check
	}
	return result
}

// confinedFiles refuses a log whose directory or files are reached
// through a symbolic link: damage, since the broker never makes one.
func confinedFiles(fsys vfs.FS, root, logRel string, segments, checkpoints []string) error {
	if err := confined(fsys, root, logRel); err != nil {
		return err
	}
	for _, name := range segments {
		if err := confined(fsys, root, path.Join(logRel, name)); err != nil {
			return err
		}
	}
	for _, name := range checkpoints {
		if err := confined(fsys, root, path.Join(logRel, segment.CheckpointDirName, name)); err != nil {
			return err
		}
	}
	return nil
}

// scrubSegment checks one segment. The active one is read again when its
// image shows damage: a batch written while it was read looks damaged in
// that image only.
func scrubSegment(fsys vfs.FS, id segment.LogID, file, name string, last bool) (segment.SegmentCheck, int64, error) {
	for attempt := 1; ; attempt++ {
		img, err := readImage(fsys, file)
		if err != nil {
			return segment.SegmentCheck{}, 0, err
		}
		check, err := segment.InspectSegment(id, name, img.data, last)
		size := int64(len(img.data))
		img.close()
		if err != nil || !last || !check.HasDamage() || attempt >= activeAttempts {
			return check, size, err
		}
	}
}

// chainGap reports offsets no segment holds between two neighbours.
func chainGap(previous, next segment.SegmentCheck, name string) *segment.LossEvent {
	if next.Base <= previous.NextOffset {
		if next.Base < previous.NextOffset {
			event := segment.LossEvent{Reason: segment.ReasonOffsetMismatch, ReasonCode: uint32(segment.ReasonOffsetMismatch),
				DataLoss: true, Segment: name,
				Detail: fmt.Sprintf("starts at offset %d but the segment before it reaches %d", next.Base, previous.NextOffset-1)}
			return &event
		}
		return nil
	}
	count := next.Base - previous.NextOffset
	event := segment.LossEvent{Reason: segment.ReasonMissingSegment, ReasonCode: uint32(segment.ReasonMissingSegment),
		DataLoss: true, Segment: name, FirstOffset: previous.NextOffset, LastOffset: next.Base - 1, Records: count,
		Detail: "no segment holds these offsets"}
	return &event
}
