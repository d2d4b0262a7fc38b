package datadir

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/ironbus/ironbus/backup"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Snapshot describes a data directory as the /admin document of package
// broker/health, minus what only a running broker knows (rates,
// connections, memory, fsync latency), so a monitor draws a stopped
// broker's directory as it draws a live one.
//
// It reads under the directory's shared lock, because only an opened log
// decodes its group checkpoints. When a broker holds the lock it reads
// without it, as backup.Scrub does (sealed segments never change, the
// active one is judged up to its last commit frame): streams, segments,
// bytes and damage, but no groups. unlocked says which of the two the
// document is.
func Snapshot(fsys vfs.FS, root string, logger *slog.Logger) (doc *health.Admin, unlocked bool, err error) {
	doc, err = lockedSnapshot(fsys, root, logger)
	if !errors.Is(err, segment.ErrLocked) {
		return doc, false, err
	}
	doc, err = scrubSnapshot(fsys, root)
	return doc, true, err
}

func emptyAdmin(root, reason string) *health.Admin {
	return &health.Admin{Schema: health.AdminSchema, Version: "offline", Readiness: health.Readiness{Reason: reason},
		Streams: []health.Stream{}, Groups: []health.Group{}, Reactors: []health.Reactor{}, Recovery: []health.RecoveryEntry{},
		Storage: health.Storage{DataDir: root}}
}

// lockedSnapshot reads every log's offsets, bytes, groups and recovery
// under the shared lock.
func lockedSnapshot(fsys vfs.FS, root string, logger *slog.Logger) (*health.Admin, error) {
	doc := emptyAdmin(root, "offline")
	dir, err := OpenReadOnly(fsys, root, logger, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dir.Close() }()
	doc.Storage.IOMode = dir.IOMode().String()
	ids, err := dir.Logs()
	if err != nil {
		return nil, fmt.Errorf("datadir: listing the logs of %s: %w", root, err)
	}
	for _, id := range ids {
		if err := addLog(doc, dir, id); err != nil {
			return nil, err
		}
	}
	if queues, exists := DeadLetters(fsys, root); exists {
		if err := addDeadLetters(fsys, doc, queues, logger); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func addLog(doc *health.Admin, dir *segment.Dir, id segment.LogID) error {
	log, err := dir.OpenLog(id)
	if err != nil {
		return fmt.Errorf("datadir: opening log %s: %w", id.String(), err)
	}
	info := log.Info()
	doc.Storage.Durability = info.Durability
	doc.Streams = append(doc.Streams, health.Stream{Name: id.Stream, Partition: id.Partition, FirstOffset: info.FirstOffset,
		NextOffset: info.Committed, Records: info.Committed - min(info.FirstOffset, info.Committed), DiskBytes: info.Bytes,
		Segments: info.Segments, Frozen: info.Frozen})
	doc.Storage.LogBytes += info.Bytes
	if info.Frozen != "" {
		doc.Storage.FrozenLogs++
	}
	doc.Recovery = append(doc.Recovery, health.RecoveryEntry{Directory: "data", Report: log.Report()})
	summaries, err := consumer.Inspect(log)
	if err != nil {
		return fmt.Errorf("datadir: reading the groups of %s: %w", id.String(), err)
	}
	for _, s := range summaries {
		doc.Groups = append(doc.Groups, health.Group{Stream: id.Stream, Partition: id.Partition, Name: s.Name, Type: s.Type.String(),
			CommittedOffset: s.Committed, LogEnd: info.Committed, Lag: info.Committed - min(s.Committed, info.Committed),
			Unsettled: s.Unsettled})
	}
	return nil
}

// addDeadLetters attaches each dead-letter queue to partition 0 of its
// stream (the broker keeps one queue per stream).
func addDeadLetters(fsys vfs.FS, doc *health.Admin, queues string, logger *slog.Logger) error {
	dir, err := OpenReadOnly(fsys, queues, logger, nil)
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	ids, err := dir.Logs()
	if err != nil {
		return fmt.Errorf("datadir: listing the queues in %s: %w", queues, err)
	}
	for _, id := range ids {
		queue, err := dir.OpenLog(id)
		if err != nil {
			return fmt.Errorf("datadir: opening queue %s: %w", id.String(), err)
		}
		info := queue.Info()
		doc.Storage.DeadLetterBytes += info.Bytes
		doc.Recovery = append(doc.Recovery, health.RecoveryEntry{Directory: DeadLetterDirName, Report: queue.Report()})
		attachDeadLetter(doc, id.Stream, &health.DeadLetter{FirstOffset: info.FirstOffset, NextOffset: info.Committed,
			DiskBytes: info.Bytes, Frozen: info.Frozen})
	}
	return nil
}

func attachDeadLetter(doc *health.Admin, stream string, queue *health.DeadLetter) {
	for i := range doc.Streams {
		if doc.Streams[i].Name == stream && doc.Streams[i].Partition == 0 {
			doc.Streams[i].DeadLetter = queue
			return
		}
	}
}

// scrubSnapshot reads a directory a broker holds, without its lock.
func scrubSnapshot(fsys vfs.FS, root string) (*health.Admin, error) {
	report, err := backup.Scrub(fsys, root, nil)
	if errors.Is(err, backup.ErrNotDataDir) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("datadir: reading %s without its lock: %w", root, err)
	}
	doc := emptyAdmin(root, "offline, a broker holds the directory")
	var queues []backup.LogScrub
	for _, log := range report.Logs {
		if log.Dir != "" {
			queues = append(queues, log)
			continue
		}
		doc.Streams = append(doc.Streams, health.Stream{Name: log.Stream, Partition: log.Partition, FirstOffset: log.FirstOffset,
			NextOffset: log.NextOffset, Records: log.Records, DiskBytes: log.Bytes, Segments: log.Segments})
		doc.Storage.LogBytes += log.Bytes
		doc.Recovery = append(doc.Recovery, scrubRecovery("data", log))
	}
	for _, queue := range queues {
		doc.Storage.DeadLetterBytes += queue.Bytes
		doc.Recovery = append(doc.Recovery, scrubRecovery(queue.Dir, queue))
		attachDeadLetter(doc, queue.Stream, &health.DeadLetter{FirstOffset: queue.FirstOffset, NextOffset: queue.NextOffset,
			DiskBytes: queue.Bytes})
	}
	return doc, nil
}

// scrubRecovery turns what scrub found in a log into a recovery entry, so
// damage shows in the same place as recovery's findings.
func scrubRecovery(directory string, log backup.LogScrub) health.RecoveryEntry {
	report := segment.LogReport{Stream: log.Stream, Partition: log.Partition, Outcome: segment.OutcomeClean, Segments: log.Segments,
		Bytes: log.Bytes, FirstOffset: log.FirstOffset, NextOffset: log.NextOffset, Records: log.Records}
	for _, event := range log.Events {
		// The running broker may be writing the active segment's tail: a
		// torn tail there is normal, not news.
		if event.Reason == segment.ReasonTornTail {
			continue
		}
		report.Events = append(report.Events, event)
		report.LossBytes += event.Bytes
		report.LossRecords += event.Records
		report.Outcome = segment.OutcomeDataLoss
	}
	if log.Error != "" {
		report.Outcome, report.Frozen = "unreadable", fmt.Sprintf("scrub: %s", log.Error)
	}
	return health.RecoveryEntry{Directory: directory, Report: report}
}
