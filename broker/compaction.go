package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironbus/ironbus/segment"
)

// Key compaction of the streams created with compact (catalog.Stream):
// the retention pass compacts a stream's logs when enough new sealed data
// came in since the last time, and CompactStream does it on request. The
// work is segment.Log.Compact; the engine supplies what only it knows:
//
//   - the floor: the lowest position a pinning consumer group has not
//     committed (the floor retention uses), so a compaction never removes
//     a record a group has not seen; none for a stream created with
//     CompactPastGroups.
//   - tombstone expiry by the monotonic-safe rule retention applies to
//     ages: a tombstone goes once its stamp is older than the wall-clock
//     high-water minus the stream's delete retention AND the monotonic
//     clock has run the delete retention since a pass first saw its
//     segment sealed. A wall clock stepping years ahead expires nothing.

// DefaultDeleteRetention is how long a compacted stream keeps a
// tombstone when its settings name no delete retention.
const DefaultDeleteRetention = 24 * time.Hour

// compactRecheck: a compacted log with no new sealed data is compacted
// again after this much monotonic time when it may have work: tombstones
// it kept that may have expired since, or a groups' floor that moved.
const compactRecheck = 10 * time.Minute

// compactDirtyShare: the retention pass compacts a log once its sealed
// bytes written since the last compaction reach this share of the bytes
// that compaction left.
const compactDirtyShare = 0.5

// compactionState is what the passes remember between runs and the
// counters they keep. marks is guarded by retentionState.passMu.
type compactionState struct {
	marks    map[segment.LogID]compactMark
	counters compactionCounters
	// running lets one log compact at a time in the whole broker, so its
	// memory is one key map (RegisterMemory). Taken after passMu, never
	// before it.
	running sync.Mutex
	// booted: the boot pass is over. The boot pass compacts nothing, so
	// opening a broker never waits for a compaction.
	booted bool
}

// compactionMemory bounds what the one running compaction holds: the key
// map (64 B a key, Go map slack included), a batch of kept records being
// written with its commit frame (twice the batch, for the append that
// grows it), and a bit per offset of the segment being planned (a record
// frame is at least 64 bytes).
func compactionMemory(segmentSize int64) int64 {
	return segment.DefaultCompactKeys*64 + 2*segment.CompactBatchBytes + segmentSize/64/8
}

// compactMark is where a log stood after its last compaction.
type compactMark struct {
	sealedEnd  uint64        // one past the sealed segments compacted
	bytes      int64         // sealed bytes compaction left
	at         time.Duration // monotonic time of it
	floor      uint64        // the groups' floor it used
	tombstones bool          // it kept tombstones
}

type compactionCounters struct {
	passes            atomic.Uint64
	recordsRemoved    atomic.Uint64
	tombstonesRemoved atomic.Uint64
	bytesReclaimed    atomic.Uint64
	segmentsRewritten atomic.Uint64
}

// CompactionStats are the compaction counters since the broker started.
type CompactionStats struct {
	Passes            uint64 // compactions of one log
	RecordsRemoved    uint64 // tombstones included
	TombstonesRemoved uint64
	BytesReclaimed    uint64
	SegmentsRewritten uint64
}

// CompactionStats returns the compaction counters.
func (b *Broker) CompactionStats() CompactionStats {
	c := &b.compaction.counters
	return CompactionStats{Passes: c.passes.Load(), RecordsRemoved: c.recordsRemoved.Load(),
		TombstonesRemoved: c.tombstonesRemoved.Load(), BytesReclaimed: c.bytesReclaimed.Load(),
		SegmentsRewritten: c.segmentsRewritten.Load()}
}

// deleteRetention is a compacted stream's tombstone lifetime.
func deleteRetention(ref logRef) time.Duration {
	if ref.deleteRetention > 0 {
		return ref.deleteRetention
	}
	return DefaultDeleteRetention
}

// CompactStream seals the active segment of each partition of a
// compacted stream and compacts its sealed segments now. It returns what
// each partition's compaction did, in partition order.
func (b *Broker) CompactStream(ctx context.Context, name string) ([]segment.CompactResult, error) {
	served, ok := b.existingStream(name)
	if !ok {
		return nil, noSuchStream(name)
	}
	if !served.settings.Compact {
		return nil, fmt.Errorf("%w: stream %q was not created with compaction (ironbus stream create %s --compact)", ErrInvalidArgument, name, name)
	}
	results := make([]segment.CompactResult, len(served.logs))
	for p, l := range served.logs {
		if l == nil {
			continue
		}
		ref := logRef{stream: name, partition: uint32(p), log: l, compact: true, deleteRetention: served.settings.DeleteRetention,
			pastGroups: served.settings.CompactPastGroups}
		result, err := b.sealAndCompact(ctx, ref)
		results[p] = result
		b.countCompaction(ref, result)
		if err != nil {
			return results, storageError(fmt.Errorf("compacting %s/%d: %w", name, p, err))
		}
	}
	return results, nil
}

// sealAndCompact seals a log's active segment and compacts it, holding
// the broker's compaction turn throughout so a background compaction the
// seal starts cannot run in between and leave this one nothing to report.
// The policy is read before the seal: its floor can only be lower than
// after, and a tombstone of the segment sealed now is young anyway.
func (b *Broker) sealAndCompact(ctx context.Context, ref logRef) (segment.CompactResult, error) {
	policy := b.compactPolicy(ref)
	b.compaction.running.Lock()
	result, err := func() (segment.CompactResult, error) {
		defer b.compaction.running.Unlock()
		if _, err := ref.log.SealActive(ctx); err != nil {
			return segment.CompactResult{}, err
		}
		return ref.log.Compact(ctx, policy)
	}()
	if err == nil {
		r := &b.retention
		r.passMu.Lock()
		b.markCompacted(ref, policy.Floor, result, r.clock.Elapsed())
		r.passMu.Unlock()
	}
	return result, err
}

// markCompacted remembers where a log stood after a compaction, for
// compactionDue. REQUIRES: passMu held.
func (b *Broker) markCompacted(ref logRef, floor uint64, result segment.CompactResult, now time.Duration) {
	b.compaction.marks[ref.id()] = compactMark{sealedEnd: sealedEnd(ref.log.Segments()), bytes: result.BytesAfter, at: now,
		floor: floor, tombstones: result.TombstonesPending}
}

// compactPolicy reads, under the pass lock, the floor of the log's groups
// and the dates of its sealed segments, so the compaction itself runs
// without the lock.
func (b *Broker) compactPolicy(ref logRef) segment.CompactPolicy {
	r := &b.retention
	r.passMu.Lock()
	defer r.passMu.Unlock()
	rc := r.config.Load()
	now := r.clock.Elapsed()
	highWater := b.observeWallClock(now)
	floor := uint64(math.MaxUint64)
	if !ref.pastGroups {
		// Every log, as a pass does: group expiry is tracked over all.
		floors, _ := b.groupFloors(rc, b.retainedLogs(), now)
		if pinned, ok := floors[ref.id()]; ok {
			floor = pinned
		}
	}
	return b.policyFor(ref, floor, highWater, now)
}

// policyFor builds a log's compaction policy. REQUIRES: passMu held.
func (b *Broker) policyFor(ref logRef, floor uint64, highWater int64, now time.Duration) segment.CompactPolicy {
	r := &b.retention
	sealedAt := map[uint64]time.Duration{}
	for _, s := range ref.log.Segments() {
		if !s.Sealed {
			continue
		}
		key := segmentKey{stream: ref.stream, partition: ref.partition, base: s.Base}
		if _, ok := r.sealedAt[key]; !ok {
			r.sealedAt[key] = now
		}
		sealedAt[s.Base] = r.sealedAt[key]
	}
	retain := deleteRetention(ref)
	return segment.CompactPolicy{Floor: floor,
		TombstoneExpired: func(base uint64, timestamp int64) bool {
			seen, ok := sealedAt[base]
			return ok && now-seen >= retain && timestamp < highWater-int64(retain)
		}}
}

// compactLogs compacts, in a retention pass, the compacted logs that are
// due. REQUIRES: passMu held.
func (b *Broker) compactLogs(logs []logRef, floors map[segment.LogID]uint64, highWater int64, now time.Duration) {
	if !b.compaction.booted {
		b.compaction.booted = true
		return
	}
	// A compaction stops at the next segment when the broker closes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, ref := range logs {
		if !ref.compact {
			continue
		}
		floor := uint64(math.MaxUint64)
		if pinned, ok := floors[ref.id()]; ok && !ref.pastGroups {
			floor = pinned
		}
		if !b.compactionDue(ref, floor, now) {
			continue
		}
		b.compaction.running.Lock()
		result, err := ref.log.Compact(ctx, b.policyFor(ref, floor, highWater, now))
		b.compaction.running.Unlock()
		b.countCompaction(ref, result)
		b.markCompacted(ref, floor, result, now)
		if err != nil && !errors.Is(err, segment.ErrClosed) && !errors.Is(err, context.Canceled) {
			b.cfg.Logger.Warn("compaction failed", "stream", ref.stream, "partition", ref.partition, "error", err.Error())
		}
	}
}

// compactionDue: new sealed bytes reached compactDirtyShare of what the
// last compaction left, or compactRecheck passed since it and it kept
// tombstones or the groups' floor moved. REQUIRES: passMu held.
func (b *Broker) compactionDue(ref logRef, floor uint64, now time.Duration) bool {
	segs := ref.log.Segments()
	end := sealedEnd(segs)
	mark, ok := b.compaction.marks[ref.id()]
	if !ok {
		return end > 0
	}
	var dirty int64
	for _, s := range segs {
		if s.Sealed && s.Base >= mark.sealedEnd {
			dirty += s.Bytes
		}
	}
	if dirty > 0 && float64(dirty) >= compactDirtyShare*float64(mark.bytes) {
		return true
	}
	return now-mark.at >= compactRecheck && (mark.tombstones || floor != mark.floor)
}

// sealedEnd is one past the newest sealed segment (0: none).
func sealedEnd(segs []segment.SegmentInfo) uint64 {
	end := uint64(0)
	for _, s := range segs {
		if s.Sealed {
			end = s.Next
		}
	}
	return end
}

// countCompaction adds a compaction to the counters and logs it.
func (b *Broker) countCompaction(ref logRef, result segment.CompactResult) {
	c := &b.compaction.counters
	c.passes.Add(1)
	c.recordsRemoved.Add(result.RecordsRemoved)
	c.tombstonesRemoved.Add(result.TombstonesRemoved)
	c.segmentsRewritten.Add(uint64(result.SegmentsRewritten))
	if result.BytesBefore > result.BytesAfter {
		c.bytesReclaimed.Add(uint64(result.BytesBefore - result.BytesAfter))
	}
	if result.RecordsRemoved > 0 {
		b.cfg.Logger.Info("stream compacted", "stream", ref.stream, "partition", ref.partition,
			"records_removed", result.RecordsRemoved, "tombstones_removed", result.TombstonesRemoved,
			"segments", result.SegmentsRewritten, "bytes_before", result.BytesBefore, "bytes_after", result.BytesAfter)
	}
}

// compactionMetrics are the compaction counters as Prometheus counters,
// read at scrape time.
func compactionMetrics(b *Broker) []prometheus.Collector {
	counter := func(name, help string, value *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(value.Load()) })
	}
	c := &b.compaction.counters
	return []prometheus.Collector{
		counter("ironbus_compaction_passes_total", "Compactions of one log (background and requested).", &c.passes),
		counter("ironbus_compaction_records_removed_total", "Records compaction removed, tombstones included.", &c.recordsRemoved),
		counter("ironbus_compaction_tombstones_removed_total", "Tombstones compaction removed after their delete retention.", &c.tombstonesRemoved),
		counter("ironbus_compaction_bytes_reclaimed_total", "Bytes of sealed segments compaction freed.", &c.bytesReclaimed),
		counter("ironbus_compaction_segments_rewritten_total", "Sealed segments compaction rewrote.", &c.segmentsRewritten),
	}
}
