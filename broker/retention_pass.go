package broker

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
)

// pinnedWarnEvery rate-limits the warning that groups hold a bound back.
const pinnedWarnEvery = 10 * time.Minute

// minPassGap spaces passes: at most ten a second, however many seals.
const minPassGap = 100 * time.Millisecond

// retentionState is the broker's retention machinery: the configuration
// in force, the pass goroutine's wake-ups, what the passes remember
// between runs and the counters they keep.
type retentionState struct {
	config atomic.Pointer[RetentionConfig]
	clock  MonotonicClock
	nudge  chan struct{}
	done   chan struct{}

	passMu sync.Mutex // one pass at a time; guards the fields below
	wall   *wallClock
	// sealedAt is when a pass first saw each sealed segment (monotonic):
	// the age rule's second half. Bounded by the segments on disk.
	sealedAt     map[segmentKey]time.Duration
	expiryStage  map[groupKey]int // 0 active, 1 warned, 2 expired
	pinnedWarned map[string]time.Duration
	measured     bool
	lastMeasure  time.Duration

	used      atomic.Int64 // bytes of the data directory at the last measure
	pending   atomic.Int64 // record bytes admitted since that measure
	highWater atomic.Int64
	counters  retentionCounters
}

type retentionCounters struct {
	deleted        [reasonCount]atomic.Uint64
	recordsDropped atomic.Uint64
	held           atomic.Uint64
	expiryWarnings atomic.Uint64
	groupsExpired  atomic.Uint64
	writesRefused  atomic.Uint64
	wallSteps      atomic.Uint64
}

type segmentKey struct {
	deadLetters bool
	stream      string
	partition   uint32
	base        uint64
}

// logRef names a log a pass works on.
type logRef struct {
	stream      string
	partition   uint32
	deadLetters bool
	log         *segment.Log
	// bounds are the stream's own retention bounds (catalog), zero for
	// the broker's default.
	bounds StreamRetention
	// compact: the stream keeps the latest record per key (compaction.go),
	// tombstones for deleteRetention (zero: the default).
	compact         bool
	deleteRetention time.Duration
	pastGroups      bool // compaction ignores the groups' floor
}

func (ref *logRef) id() segment.LogID {
	return segment.LogID{Stream: ref.stream, Partition: ref.partition}
}

func (key groupKey) logID() segment.LogID {
	return segment.LogID{Stream: key.stream, Partition: key.partition}
}

// startRetention loads the wall-clock high-water, runs a first pass (it
// dates the segments found at boot and measures the disk) and starts the
// pass goroutine. Nothing here can keep the broker from starting.
func (b *Broker) startRetention(rc RetentionConfig) {
	r := &b.retention
	r.config.Store(&rc)
	r.sealedAt, r.expiryStage, r.pinnedWarned = map[segmentKey]time.Duration{}, map[groupKey]int{}, map[string]time.Duration{}
	b.compaction.marks = map[segment.LogID]compactMark{}
	r.done = make(chan struct{})
	clock := b.cfg.Storage.Clock
	if clock == nil {
		clock = segment.SystemClock{}
	}
	wall, err := loadWallClock(b.cfg.FS, b.cfg.DataDir, clock, b.cfg.WallClockStepThreshold)
	if err != nil {
		b.cfg.Logger.Warn("wall-clock high-water unreadable; starting from the current clock", "error", err.Error())
	}
	r.wall = wall
	b.retentionPass()
	go b.runRetention()
}

// runRetention runs a pass every RetentionCheck, after every segment seal
// and when a write met the budget.
func (b *Broker) runRetention() {
	defer close(b.retention.done)
	ticker := time.NewTicker(b.cfg.RetentionCheck)
	defer ticker.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		case <-b.retention.nudge:
		}
		b.retentionPass()
		// Seals of many busy logs must not run passes back to back:
		// each lists the directory and reads the group checkpoints.
		select {
		case <-b.stop:
			return
		case <-time.After(minPassGap):
		}
	}
}

// nudgeRetention asks for a pass soon; never blocks.
func (b *Broker) nudgeRetention() {
	select {
	case b.retention.nudge <- struct{}{}:
	default:
	}
}

// stopRetention waits for the pass goroutine and persists the high-water.
func (b *Broker) stopRetention() {
	r := &b.retention
	if r.done == nil {
		return
	}
	<-r.done
	r.passMu.Lock()
	defer r.passMu.Unlock()
	if err := r.wall.persist(); err != nil {
		b.cfg.Logger.Warn("wall-clock high-water not saved", "error", err.Error())
	}
}

// retentionPass applies every bound, group expiry and the disk budget
// once.
func (b *Broker) retentionPass() {
	r := &b.retention
	r.passMu.Lock()
	defer r.passMu.Unlock()
	rc := r.config.Load()
	now := r.clock.Elapsed()
	highWater := b.observeWallClock(now)
	logs := b.retainedLogs()
	floors, grouped := map[segment.LogID]uint64{}, map[segment.LogID]bool{}
	if rc.Stream.Bounded() || rc.GroupExpiry > 0 || rc.DiskBudget > 0 || anyBounded(logs) || anyCompacted(logs) {
		floors, grouped = b.groupFloors(rc, logs, now)
	}
	seen := make(map[segmentKey]bool, len(r.sealedAt))
	for _, ref := range logs {
		bounds := rc.DeadLetters
		bounds.Policy = DropOldest
		floor := uint64(math.MaxUint64)
		if !ref.deadLetters {
			bounds = rc.retentionFor(ref)
			if pinned, ok := floors[ref.id()]; ok {
				floor = pinned
			}
		}
		b.retainLog(ref, bounds, floor, highWater, now, seen)
	}
	b.compactLogs(logs, floors, highWater, now)
	for key := range r.sealedAt {
		if !seen[key] {
			delete(r.sealedAt, key)
		}
	}
	// Without a budget the directory is measured for the counters only,
	// once per RetentionCheck rather than after every seal.
	if rc.DiskBudget > 0 || !r.measured || now-r.lastMeasure >= b.cfg.RetentionCheck {
		r.measured, r.lastMeasure = true, now
		if err := b.enforceBudget(rc, logs, floors, grouped); err != nil {
			b.cfg.Logger.Warn("measuring the disk budget failed", "error", err.Error())
		}
	}
}

// observeWallClock raises the high-water, logs a step and persists the
// high-water when it moved far or stepped. REQUIRES: passMu held.
func (b *Broker) observeWallClock(now time.Duration) int64 {
	r := &b.retention
	highWater, step := r.wall.observe(now)
	r.highWater.Store(highWater)
	if step != nil {
		r.counters.wallSteps.Add(1)
		b.cfg.Logger.Warn("wall clock stepped: treated as a discontinuity; retention ages use the high-water and the monotonic clock",
			"step", step.By.String(), "high_water", time.Unix(0, step.HighWater).UTC().Format(time.RFC3339))
	}
	if step != nil || r.wall.due() {
		if err := r.wall.persist(); err != nil {
			b.cfg.Logger.Warn("wall-clock high-water not saved", "error", err.Error())
		}
	}
	return highWater
}

// retainedLogs lists every open stream log and dead-letter queue.
func (b *Broker) retainedLogs() []logRef {
	var refs []logRef
	for _, served := range b.streamList() {
		if served.settings.Replicated() {
			// A replicated log is cut through its replica (an index, on
			// every replica alike), not by offsets here.
			continue
		}
		for p, l := range served.logs {
			if l != nil {
				refs = append(refs, logRef{stream: served.settings.Name, partition: uint32(p), log: l, bounds: streamBounds(served.settings),
					compact: served.settings.Compact, deleteRetention: served.settings.DeleteRetention, pastGroups: served.settings.CompactPastGroups})
			}
		}
	}
	store := &b.deadLetters
	store.mu.Lock()
	queues := maps.Clone(store.logs)
	store.mu.Unlock()
	for stream, l := range queues {
		refs = append(refs, logRef{stream: stream, deadLetters: true, log: l})
	}
	return refs
}

// retainLog dates the log's sealed segments and deletes what its bounds
// allow. REQUIRES: passMu held.
func (b *Broker) retainLog(ref logRef, bounds StreamRetention, floor uint64, highWater int64, now time.Duration, seen map[segmentKey]bool) {
	r := &b.retention
	segs := ref.log.Segments()
	keys := make([]segmentKey, len(segs))
	for i, s := range segs {
		keys[i] = segmentKey{deadLetters: ref.deadLetters, stream: ref.stream, partition: ref.partition, base: s.Base}
		if !s.Sealed {
			continue
		}
		seen[keys[i]] = true
		if _, ok := r.sealedAt[keys[i]]; !ok {
			r.sealedAt[keys[i]] = now
		}
	}
	if !bounds.Bounded() {
		return
	}
	plan := planLog(segs, bounds, floor, func(i int) bool {
		return ageExpired(segs[i], highWater, now-r.sealedAt[keys[i]], bounds.MaxAge)
	})
	if plan.wanted > plan.drop {
		r.counters.held.Add(1)
		name := ref.stream
		if last, ok := r.pinnedWarned[name]; !ok || now-last >= pinnedWarnEvery {
			r.pinnedWarned[name] = now
			b.cfg.Logger.Warn("retention held back by a consumer group (consumer-safe): the slowest group has not committed these records",
				"stream", name, "bound", reasonNames[plan.reason], "segments_kept", plan.wanted-plan.drop, "slowest_committed", floor,
				"hint", "ack or commit, delete the group, set --group-expiry, or choose --retention-policy drop-oldest")
		}
	}
	if plan.drop > 0 {
		b.dropSegments(ref, segs, plan.drop, plan.reason, floor)
	}
}

// dropSegments deletes the first n segments of a log (whole sealed
// segments, oldest first) and returns the bytes freed.
func (b *Broker) dropSegments(ref logRef, segs []segment.SegmentInfo, n, reason int, floor uint64) int64 {
	r := &b.retention
	b.coverBeforeDelete(ref, segs[n-1].Next)
	deleted, err := ref.log.DeleteBefore(segs[n-1].Next)
	var freed int64
	var dropped uint64
	for _, s := range segs[:deleted] {
		freed += s.Bytes
		if s.Next > floor {
			dropped += s.Next - max(s.Base, floor)
		}
	}
	r.counters.deleted[reason].Add(uint64(deleted))
	r.counters.recordsDropped.Add(dropped)
	if deleted > 0 {
		b.cfg.Logger.Info("retention deleted sealed segments", "stream", ref.stream, "dead_letters", ref.deadLetters,
			"reason", reasonNames[reason], "segments", deleted, "bytes", freed, "first_offset", ref.log.FirstOffset())
	}
	if dropped > 0 {
		b.cfg.Logger.Warn("retention deleted records a consumer group had not committed (drop-oldest); the group gets a gap advisory",
			"stream", ref.stream, "reason", reasonNames[reason], "records", dropped)
	}
	if err != nil && !errors.Is(err, segment.ErrClosed) {
		b.cfg.Logger.Warn("retention could not delete a segment", "stream", ref.stream, "error", err.Error())
	}
	return freed
}

// groupFloors returns, per stream, the lowest committed position of its
// groups that still pin retention, and which streams have groups at all.
// A group's position is its last checkpoint's, so a crash never restarts
// a group below what retention kept.
func (b *Broker) groupFloors(rc *RetentionConfig, logs []logRef, now time.Duration) (map[segment.LogID]uint64, map[segment.LogID]bool) {
	b.groupsMu.Lock()
	loaded := maps.Clone(b.groups)
	b.groupsMu.Unlock()
	floors, grouped := map[segment.LogID]uint64{}, map[segment.LogID]bool{}
	pin := func(key groupKey, committed uint64) {
		grouped[key.logID()] = true
		if b.groupExpired(rc, key, loaded[key], now) {
			return
		}
		if floor, ok := floors[key.logID()]; !ok || committed < floor {
			floors[key.logID()] = committed
		}
	}
	present := map[groupKey]bool{}
	for _, ref := range logs {
		if ref.deadLetters {
			continue
		}
		summaries, err := consumer.Inspect(ref.log)
		if err != nil {
			// An unreadable checkpoint must not let retention run over
			// its group: pin the whole log.
			b.cfg.Logger.Warn("retention cannot read a group checkpoint; the stream keeps everything", "stream", ref.stream, "error", err.Error())
			grouped[ref.id()], floors[ref.id()] = true, 0
		}
		for _, summary := range summaries {
			key := groupKey{stream: ref.stream, partition: ref.partition, group: summary.Name}
			present[key] = true
			pin(key, summary.Committed)
		}
	}
	for key, served := range loaded {
		if _, internal := deadLetterSource(key.stream); !internal && !present[key] {
			present[key] = true
			pin(key, served.group.Committed())
		}
	}
	for key := range b.retention.expiryStage {
		if !present[key] {
			delete(b.retention.expiryStage, key)
		}
	}
	for stream := range grouped {
		if _, ok := floors[stream]; !ok {
			floors[stream] = math.MaxUint64 // every group expired
		}
	}
	for _, ref := range logs {
		if _, ok := floors[ref.id()]; !ok && !ref.deadLetters {
			floors[ref.id()] = math.MaxUint64
		}
	}
	return floors, grouped
}

// groupExpired reports whether a group's inactivity passed the expiry,
// warning (log and counter) at half of it and again at it. A group not
// loaded since the broker started has been inactive since the start: the
// monotonic clock knows nothing earlier. REQUIRES: passMu held.
func (b *Broker) groupExpired(rc *RetentionConfig, key groupKey, served *Group, now time.Duration) bool {
	r := &b.retention
	if rc.GroupExpiry <= 0 {
		delete(r.expiryStage, key)
		return false
	}
	var lastActive time.Duration
	if served != nil {
		if served.group.Stats().Members > 0 {
			served.touch(now)
		}
		lastActive = time.Duration(served.lastActive.Load())
	}
	idle := now - lastActive
	stage := 0
	switch {
	case idle >= rc.GroupExpiry:
		stage = 2
	case idle >= rc.GroupExpiry/2:
		stage = 1
	}
	previous := r.expiryStage[key]
	r.expiryStage[key] = stage
	switch {
	case stage == 1 && previous == 0:
		r.counters.expiryWarnings.Add(1)
		b.cfg.Logger.Warn("consumer group inactive: it will stop pinning retention", "stream", key.stream, "group", key.group,
			"inactive", idle.String(), "expires_in", (rc.GroupExpiry - idle).String())
	case stage == 2 && previous < 2:
		r.counters.groupsExpired.Add(1)
		b.cfg.Logger.Warn("consumer group expired: it no longer pins retention and may get a gap advisory", "stream", key.stream,
			"group", key.group, "inactive", idle.String(), "expiry", rc.GroupExpiry.String())
	case stage == 0 && previous > 0:
		b.cfg.Logger.Info("consumer group active again: it pins retention again", "stream", key.stream, "group", key.group)
	}
	return stage == 2
}

// measureDisk sums the sizes of every file under the data directory: logs,
// dead-letter queues, checkpoints, quarantine, reports.
func (b *Broker) measureDisk(dir string) (int64, error) {
	names, err := b.cfg.FS.List(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range names {
		full := path.Join(dir, name)
		info, err := b.cfg.FS.Stat(full)
		if err != nil {
			continue // removed meanwhile
		}
		if info.IsDir {
			sub, err := b.measureDisk(full)
			if err != nil {
				return total, err
			}
			total += sub
			continue
		}
		total += info.Size
	}
	return total, nil
}

// enforceBudget measures the data directory and, near the admission
// limit, frees space by the disk-full policy. drop-new deletes only what
// every group of a stream has committed; drop-oldest deletes the oldest
// sealed segments of the largest logs. REQUIRES: passMu held.
func (b *Broker) enforceBudget(rc *RetentionConfig, logs []logRef, floors map[segment.LogID]uint64, grouped map[segment.LogID]bool) error {
	r := &b.retention
	used, err := b.measureDisk(b.cfg.DataDir)
	if err != nil {
		return err
	}
	r.pending.Store(0)
	r.used.Store(used)
	if rc.DiskBudget <= 0 {
		return nil
	}
	// One segment below the admission limit, so writes flow again
	// rather than stop at every next record.
	target := b.admissionLimit(rc) - b.segmentSize()
	for used > target {
		victim, segs, floor := b.budgetVictim(rc, logs, floors, grouped)
		if victim == nil {
			break
		}
		freed := b.dropSegments(*victim, segs, 1, reasonBudget, floor)
		if freed == 0 {
			break
		}
		used -= freed
		r.used.Store(used)
	}
	if used > b.admissionLimit(rc) {
		now := r.clock.Elapsed()
		if last, ok := r.pinnedWarned[budgetWarningKey]; !ok || now-last >= pinnedWarnEvery {
			r.pinnedWarned[budgetWarningKey] = now
			b.cfg.Logger.Warn("disk budget reached: new records are refused until space frees", "used", used,
				"budget", rc.DiskBudget, "headroom", rc.DiskHeadroom, "policy", rc.DiskFull.String(),
				"hint", "let consumer groups commit, delete or expire idle groups (--group-expiry), set retention bounds, or raise --disk-budget")
		}
	}
	return nil
}

// budgetWarningKey rate-limits the budget warning beside the per-stream
// ones; no stream name starts with a zero byte.
const budgetWarningKey = "\x00budget"

// budgetVictim picks the log whose oldest sealed segment goes next: the
// one with the most deletable bytes.
func (b *Broker) budgetVictim(rc *RetentionConfig, logs []logRef, floors map[segment.LogID]uint64, grouped map[segment.LogID]bool) (*logRef, []segment.SegmentInfo, uint64) {
	var best *logRef
	var bestSegs []segment.SegmentInfo
	var bestBytes int64
	var bestFloor uint64
	for i := range logs {
		ref := &logs[i]
		segs := ref.log.Segments()
		floor := uint64(math.MaxUint64)
		if pinned, ok := floors[ref.id()]; ok && !ref.deadLetters {
			floor = pinned
		}
		deletable := safePrefix(segs, math.MaxUint64)
		if rc.DiskFull == DropNew {
			if ref.deadLetters || !grouped[ref.id()] {
				continue
			}
			deletable = safePrefix(segs, floor)
		}
		var bytes int64
		for _, s := range segs[:deletable] {
			bytes += s.Bytes
		}
		if deletable > 0 && bytes > bestBytes {
			best, bestSegs, bestBytes, bestFloor = ref, segs, bytes, floor
		}
	}
	return best, bestSegs, bestFloor
}

// admitRecords checks bytes of new records against the disk budget. Over
// it, the write is refused with an error wrapping segment.ErrNoSpace
// (callers give it its kind: a retryable ErrNoSpace) and a pass is
// started, which frees space if the policy allows; reads and acks are
// never refused.
// Dead-letter moves (deadLetter) may use the headroom: a group cannot
// commit past a poison record until it moved, so refusing the move at the
// same limit as producers could keep a full budget full for good.
func (b *Broker) admitRecords(bytes int, deadLetter bool) error {
	r := &b.retention
	rc := r.config.Load()
	if rc.DiskBudget <= 0 {
		return nil
	}
	limit := b.admissionLimit(rc)
	if deadLetter {
		limit = rc.DiskBudget - b.segmentSize()
	}
	used := r.used.Load() + r.pending.Load()
	if used+int64(bytes) > limit {
		r.counters.writesRefused.Add(1)
		b.nudgeRetention()
		return fmt.Errorf("%w: the disk budget is used up (%d of %d bytes, %d kept as headroom); writes resume when retention frees space (%s)",
			segment.ErrNoSpace, used, rc.DiskBudget, rc.DiskHeadroom, rc.DiskFull)
	}
	r.pending.Add(int64(bytes))
	return nil
}

// admissionLimit is the usage at which records are refused: the budget
// minus the headroom minus two segments, because files grow a whole
// segment at a time while admission counts record bytes: the active
// segment's preallocated tail and the next prepared segment (a roll
// allocates it, perhaps just after the last measure) are both on disk
// before any record fills them. One segment of margin let a fast producer
// pass budget − headroom between two measures.
func (b *Broker) admissionLimit(rc *RetentionConfig) int64 {
	return rc.DiskBudget - rc.DiskHeadroom - 2*b.segmentSize()
}

// touch records activity on a group (monotonic time).
func (s *Group) touch(now time.Duration) { s.lastActive.Store(int64(now)) }
