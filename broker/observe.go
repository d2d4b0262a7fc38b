package broker

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// What the broker tells its health endpoints (package health): readiness,
// liveness and the /admin document. Everything here reads counters and
// state the engine keeps anyway, at the moment it is asked: the produce
// and consume paths pay nothing for being observed.

var _ health.Source = (*Broker)(nil)

// Connection reject reasons, the label values of
// ironbus_connections_rejected_total.
const (
	rejectLimit    = iota // MaxConnections reached
	rejectDraining        // the broker is shutting down
	rejectReasons
)

var rejectNames = [rejectReasons]string{rejectLimit: "connection_limit", rejectDraining: "draining"}

// Readiness implements health.Source: writes are accepted unless the
// broker drains or a stream's log is frozen read-only (a failed fsync,
// damage above the recovery caps).
func (b *Broker) Readiness() health.Readiness {
	if b.draining.Load() {
		return health.Readiness{Reason: "draining"}
	}
	for _, l := range b.streamLogs() {
		if err := l.Err(); err != nil {
			return health.Readiness{Reason: fmt.Sprintf("frozen: %s %s", l.ID().String(), err.Error())}
		}
	}
	if err := b.producerRegistryErr(); err != nil {
		return health.Readiness{Reason: fmt.Sprintf("frozen: the producer registry: %s", err.Error())}
	}
	return health.Readiness{Ready: true}
}

// Liveness implements health.Source: the checkpoint flusher's loop keeps
// turning, and no fdatasync has been running for longer than StuckAfter
// (a hung device: every producer of the directory waits on it).
func (b *Broker) Liveness() error {
	var stuck []string
	beat := time.Duration(b.heartbeat.Load())
	if idle := time.Since(b.started) - beat; idle > b.cfg.StuckAfter {
		stuck = append(stuck, fmt.Sprintf("the checkpoint flusher has not run for %s", idle.Round(time.Millisecond)))
	}
	if running := b.dir.Stats().SyncRunning; running > b.cfg.StuckAfter {
		stuck = append(stuck, fmt.Sprintf("an fdatasync has been running for %s", running.Round(time.Millisecond)))
	}
	if len(stuck) > 0 {
		return fmt.Errorf("%w: %s", ErrStuck, strings.Join(stuck, "; "))
	}
	return nil
}

// ErrStuck is what Liveness wraps.
var ErrStuck = errors.New("broker: stuck")

// ObserveReactors tells the broker how to read the network loop's busy
// time per reactor (loop.Server.Busy); the loop starts after the broker.
func (b *Broker) ObserveReactors(busy func() []time.Duration) { b.reactorBusy.Store(&busy) }

// streamLogs returns the open stream logs sorted by name, then
// partition.
func (b *Broker) streamLogs() []*segment.Log {
	var logs []*segment.Log
	for _, served := range b.streamList() {
		for _, l := range served.logs {
			if l != nil {
				logs = append(logs, l)
			}
		}
	}
	return logs
}

// deadLetterLogs returns the open dead-letter logs by source stream.
func (b *Broker) deadLetterLogs() (map[string]*segment.Log, *segment.Dir) {
	store := &b.deadLetters
	store.mu.Lock()
	defer store.mu.Unlock()
	logs := make(map[string]*segment.Log, len(store.logs))
	for name, l := range store.logs {
		logs[name] = l
	}
	return logs, store.dir
}

// Admin implements health.Source: the /admin document.
func (b *Broker) Admin() *health.Admin {
	uptime := time.Since(b.started)
	doc := &health.Admin{Schema: health.AdminSchema, Version: b.cfg.Version, UptimeSeconds: uptime.Seconds(),
		Readiness: b.Readiness(), Streams: []health.Stream{}, Groups: b.adminGroups(), Reactors: []health.Reactor{}}
	deadLetters, deadLetterDir := b.deadLetterLogs()
	for _, l := range b.streamLogs() {
		stream := adminStream(l)
		// A stream has one dead-letter queue: it is shown (and counted)
		// with partition 0.
		if queue, ok := deadLetters[l.ID().Stream]; ok && l.ID().Partition == 0 {
			info := queue.Info()
			stream.DeadLetter = &health.DeadLetter{FirstOffset: info.FirstOffset, NextOffset: info.Committed,
				DiskBytes: info.Bytes, Frozen: info.Frozen}
			doc.Storage.DeadLetterBytes += info.Bytes
		}
		doc.Streams = append(doc.Streams, stream)
		doc.Totals.ProducedRecords += stream.ProducedRecords
		doc.Totals.ProducedBytes += stream.ProducedBytes
		doc.Storage.LogBytes += stream.DiskBytes
		if stream.Frozen != "" {
			doc.Storage.FrozenLogs++
		}
	}
	for _, group := range doc.Groups {
		doc.Totals.DeliveredRecords += group.Delivered
		doc.Totals.RedeliveredRecords += group.Redelivered
		doc.Totals.AckedRecords += group.Acked
		doc.Totals.DeadLetteredRecords += group.DeadLettered
	}
	b.adminStorage(&doc.Storage, deadLetterDir)
	doc.Fsync = b.adminFsync()
	doc.Memory = b.adminMemory()
	doc.Connections = b.adminConnections()
	if busy := b.reactorBusy.Load(); busy != nil {
		for i, d := range (*busy)() {
			doc.Reactors = append(doc.Reactors, health.Reactor{Index: i, BusySeconds: d.Seconds(),
				BusyRatio: d.Seconds() / max(uptime.Seconds(), 1e-9)})
		}
	}
	doc.Recovery = append([]health.RecoveryEntry{}, recoveryEntries("data", b.dir)...)
	if deadLetterDir != nil {
		doc.Recovery = append(doc.Recovery, recoveryEntries("deadletters", deadLetterDir)...)
	}
	return doc
}

func adminStream(l *segment.Log) health.Stream {
	info, counters := l.Info(), l.Counters()
	return health.Stream{Name: info.ID.Stream, Partition: info.ID.Partition, FirstOffset: info.FirstOffset,
		NextOffset: info.Committed, Records: info.Committed - min(info.FirstOffset, info.Committed),
		DiskBytes: info.Bytes, Segments: info.Segments, ProducedRecords: counters.AppendedRecords,
		ProducedBytes: counters.AppendedBytes, Frozen: info.Frozen}
}

// adminGroups lists the groups the broker has open, sorted by stream and
// name. Group locks are taken one at a time, after groupsMu is released.
func (b *Broker) adminGroups() []health.Group {
	b.groupsMu.Lock()
	served := make([]*Group, 0, len(b.groups))
	for _, group := range b.groups {
		served = append(served, group)
	}
	b.groupsMu.Unlock()
	groups := make([]health.Group, 0, len(served))
	for _, s := range served {
		stats := s.group.Stats()
		end := s.log.Committed()
		groups = append(groups, health.Group{Stream: s.key.stream, Partition: s.key.partition, Name: s.key.group,
			Type: stats.Type.String(), CommittedOffset: stats.Committed, LogEnd: end,
			Lag: end - min(stats.Committed, end), InFlight: stats.Leased, Unsettled: stats.Unsettled,
			Members: stats.Members, Delivered: stats.Delivered, Redelivered: stats.Redelivered, Acked: stats.Acked,
			DeadLettered: stats.DeadLettered, DeadLetterFailures: stats.DeadLetterFailures})
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(groups, func(i, j int) bool {
		x, y := groups[i], groups[j]
		return x.Stream < y.Stream || x.Stream == y.Stream && x.Name < y.Name
	})
	return groups
}

func (b *Broker) adminStorage(storage *health.Storage, deadLetterDir *segment.Dir) {
	storage.DataDir = b.cfg.DataDir
	storage.Durability = b.cfg.Storage.Durability.String()
	storage.IOMode = b.dir.IOMode().String()
	storage.QuarantineBytes = treeBytes(b.cfg.FS, path.Join(b.cfg.DataDir, "quarantine"), 4)
	if deadLetterDir != nil {
		storage.QuarantineBytes += treeBytes(b.cfg.FS, path.Join(deadLetterDir.Path(), "quarantine"), 4)
	}
	if rc := b.retention.config.Load(); rc != nil && rc.DiskBudget > 0 {
		storage.DiskBudgetBytes, storage.DiskHeadroomBytes = rc.DiskBudget, rc.DiskHeadroom
		storage.DiskUsedBytes = b.retention.used.Load()
	}
	if size, free, ok := filesystemSpace(b.cfg.DataDir); ok && size > 0 {
		storage.FilesystemBytes, storage.FilesystemFreeBytes = size, free
		storage.FilesystemUsedPercent = 100 * float64(size-min(free, size)) / float64(size)
	}
}

// treeBytes sums the sizes of the files under dir, depth levels down; a
// directory that cannot be listed counts as empty (quarantine/ exists only
// after damage).
func treeBytes(fsys vfs.FS, dir string, depth int) int64 {
	names, err := fsys.List(dir)
	if err != nil || depth < 0 {
		return 0
	}
	var total int64
	for _, name := range names {
		full := path.Join(dir, name)
		info, err := fsys.Stat(full)
		switch {
		case err != nil:
		case info.IsDir:
			total += treeBytes(fsys, full, depth-1)
		default:
			total += info.Size
		}
	}
	return total
}

func (b *Broker) adminFsync() health.Fsync {
	stats := b.dir.Stats()
	recent := b.metrics.recentSyncs()
	fsync := health.Fsync{Syncs: stats.Syncs, Cycles: stats.Cycles, TotalSeconds: time.Duration(stats.SyncNanos).Seconds(),
		RecentSamples: len(recent), RunningSeconds: stats.SyncRunning.Seconds()}
	if synced := b.metrics.syncedRecords.Load(); stats.Syncs > 0 {
		fsync.RecordsPerSync = float64(synced) / float64(stats.Syncs)
	}
	if len(recent) > 0 {
		slices.Sort(recent)
		fsync.P50Seconds = recent[len(recent)/2].Seconds()
		fsync.P99Seconds = recent[min(len(recent)*99/100, len(recent)-1)].Seconds()
		fsync.MaxSeconds = recent[len(recent)-1].Seconds()
	}
	return fsync
}

func (b *Broker) adminMemory() health.Memory {
	memory := health.Memory{BudgetBytes: b.cfg.MemoryBudget, CeilingBytes: b.cfg.MemoryCeiling}
	if memory.CeilingBytes > 0 {
		memory.HeadroomBytes = memory.CeilingBytes - memory.BudgetBytes
	}
	if rss, err := arena.ReadRSS(); err == nil {
		memory.ResidentBytes = rss
	}
	return memory
}

func (b *Broker) adminConnections() health.Connections {
	connections := health.Connections{Open: b.connections.Load(), Max: b.cfg.MaxConnections,
		Accepted: b.accepted.Load(), Rejected: map[string]int64{}}
	for reason, name := range rejectNames {
		connections.Rejected[name] = b.rejected[reason].Load()
	}
	return connections
}

func recoveryEntries(directory string, dir *segment.Dir) []health.RecoveryEntry {
	var entries []health.RecoveryEntry
	for _, report := range dir.Report().Logs {
		entries = append(entries, health.RecoveryEntry{Directory: directory, Report: report})
	}
	return entries
}
