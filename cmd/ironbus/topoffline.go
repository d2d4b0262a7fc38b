package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/backup"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// offlineSnapshot builds an /admin-shaped document from a data directory,
// so `top --data-dir` draws the same screen as a live broker (minus the
// live parts: rates, connections, memory, fsync latency).
//
// It reads the way verify and group ls do, read-only under the
// directory's lock, because only an opened log can decode the group
// checkpoints. When a broker holds the lock it falls back to the lock-free
// reader of scrub: streams, segments, bytes and damage, but no groups
// (those the running broker shows live, through --health-addr). The note
// says which of the two the screen shows.
func offlineSnapshot(ctx context.Context, opts *globalOptions, dataDir string) (*health.Admin, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	doc, err := lockedSnapshot(opts, dataDir)
	var exit *exitError
	if err == nil || !errors.As(err, &exit) || exit.code != exitLocked {
		return doc, "offline: read under the directory's lock; no live rates", err
	}
	doc, err = scrubSnapshot(dataDir)
	return doc, "offline: a broker runs here (directory locked), so no groups; run `ironbus top` against its --health-addr for the live view", err
}

func emptyAdmin(dataDir, reason string) *health.Admin {
	return &health.Admin{Schema: health.AdminSchema, Version: "offline", Readiness: health.Readiness{Reason: reason},
		Streams: []health.Stream{}, Groups: []health.Group{}, Reactors: []health.Reactor{}, Recovery: []health.RecoveryEntry{},
		Storage: health.Storage{DataDir: dataDir}}
}

// lockedSnapshot opens the directory read-only (taking its lock, like
// verify) and reads every log's offsets, bytes, groups and recovery.
func lockedSnapshot(opts *globalOptions, dataDir string) (*health.Admin, error) {
	doc := emptyAdmin(dataDir, "offline")
	dir, err := openDataDir(opts, dataDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dir.Close() }()
	doc.Storage.IOMode = dir.IOMode().String()
	ids, err := dir.Logs()
	if err != nil {
		return nil, exitErrorf(exitUnreadable, "listing the logs of %s: %w", dataDir, err)
	}
	for _, id := range ids {
		if err := addOfflineLog(doc, dir, dataDir, id); err != nil {
			return nil, err
		}
	}
	if path, exists := deadLetterDir(dataDir); exists {
		if err := addOfflineDeadLetters(opts, doc, path); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func addOfflineLog(doc *health.Admin, dir *segment.Dir, dataDir string, id segment.LogID) error {
	log, err := dir.OpenLog(id)
	if err != nil {
		return openLogError(dataDir, id, err)
	}
	info := log.Info()
	doc.Storage.Durability = info.Durability
	stream := health.Stream{Name: id.Stream, Partition: id.Partition, FirstOffset: info.FirstOffset, NextOffset: info.Committed,
		Records: info.Committed - min(info.FirstOffset, info.Committed), DiskBytes: info.Bytes, Segments: info.Segments, Frozen: info.Frozen}
	doc.Streams = append(doc.Streams, stream)
	doc.Storage.LogBytes += info.Bytes
	if info.Frozen != "" {
		doc.Storage.FrozenLogs++
	}
	doc.Recovery = append(doc.Recovery, health.RecoveryEntry{Directory: "data", Report: log.Report()})
	summaries, err := consumer.Inspect(log)
	if err != nil {
		return exitErrorf(exitUnreadable, "reading the groups of %s: %w", id.String(), err)
	}
	for _, s := range summaries {
		doc.Groups = append(doc.Groups, health.Group{Stream: id.Stream, Partition: id.Partition, Name: s.Name, Type: s.Type.String(),
			CommittedOffset: s.Committed, LogEnd: info.Committed, Lag: info.Committed - min(s.Committed, info.Committed),
			Unsettled: s.Unsettled})
	}
	return nil
}

// addOfflineDeadLetters attaches each dead-letter queue to partition 0 of
// its stream (the broker keeps one queue per stream).
func addOfflineDeadLetters(opts *globalOptions, doc *health.Admin, path string) error {
	dir, err := openDataDir(opts, path)
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	ids, err := dir.Logs()
	if err != nil {
		return exitErrorf(exitUnreadable, "listing the queues in %s: %w", path, err)
	}
	for _, id := range ids {
		queue, err := dir.OpenLog(id)
		if err != nil {
			return openLogError(path, id, err)
		}
		info := queue.Info()
		doc.Storage.DeadLetterBytes += info.Bytes
		doc.Recovery = append(doc.Recovery, health.RecoveryEntry{Directory: "deadletters", Report: queue.Report()})
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

// scrubSnapshot reads a directory a broker holds, without its lock, the
// way scrub does: sealed segments never change and the active one is
// judged up to its last commit frame.
func scrubSnapshot(dataDir string) (*health.Admin, error) {
	report, err := backup.Scrub(vfs.OS{}, dataDir, nil)
	if errors.Is(err, backup.ErrNotDataDir) {
		return nil, exitErrorf(exitNotFound, "%w; check --data-dir: it must name the broker's data directory", err)
	}
	if err != nil {
		return nil, exitErrorf(exitUnreadable, "reading %s without its lock: %w", dataDir, err)
	}
	doc := emptyAdmin(dataDir, "offline, a broker holds the directory")
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
