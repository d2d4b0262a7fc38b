package segment

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// committer makes written batches durable. There is one per data
// directory, a goroutine of its own because fdatasync blocks for 100 µs to
// milliseconds (the runtime gives it a thread of its own for the call).
// It is not locked to a thread: a locked goroutine is woken only by waking
// its thread, which cost 20-30 µs per hand-off on the reference machine.
// Each cycle issues one fdatasync per dirty log, covering everything its
// appender wrote before the call; meanwhile the appenders keep writing the
// next batches (pipelined group commit).
//
// With several dirty logs the cycle issues their fdatasyncs in parallel (up
// to parallelism at once): the device merges concurrent flushes, so a cycle
// over 16 logs took 1.4-1.6 ms instead of 3.6 ms on the reference machine
// (docs/BENCHMARKS.md). A single dirty log is synced inline.
type committer struct {
	mu    sync.Mutex
	queue []*Log // dirty logs, each at most once (Log.mu.dirty)
	spare []*Log

	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}
	interval    time.Duration // > 0: sync on a timer (DurabilityInterval)
	linger      time.Duration // > 0: a busy log's sync may wait (linger.go)
	parallelism int
	holding     []*Log // logs a lingering cycle put back (linger.go)

	syncs     atomic.Uint64
	syncNanos atomic.Uint64
	cycles    atomic.Uint64
	held      atomic.Uint64 // times the linger held a log back
	observer  Observer

	// started anchors syncStarted on the monotonic clock; syncStarted is
	// when a running fdatasync began (nanoseconds after started, 0: none
	// running), so a hung device shows as a sync whose age keeps growing,
	// which no completed-sync figure can show. With parallel syncs it
	// follows the first of a cycle: a lower bound.
	started     time.Time
	syncStarted atomic.Int64
	// lastSync is how long the latest completed fdatasync took
	// (nanoseconds): inlineHealthy reads it.
	lastSync atomic.Int64
}

// An inline commit (Log.TryCommitBatch) blocks its caller, a reactor
// serving other connections, for the whole fdatasync. Behind a device
// that stalls, commits go through the committer instead, which keeps the
// callers free: while an fdatasync has been running for longer than
// inlineRunningLimit, and until a sync completes in less than
// inlineSlowSync again.
const (
	inlineRunningLimit = 2 * time.Millisecond
	inlineSlowSync     = 20 * time.Millisecond
)

// inlineHealthy reports whether the device looks able to take an inline
// commit now (see inlineRunningLimit).
func (c *committer) inlineHealthy() bool {
	if since := c.syncStarted.Load(); since != 0 && time.Since(c.started)-time.Duration(since) > inlineRunningLimit {
		return false
	}
	return c.lastSync.Load() < int64(inlineSlowSync)
}

func newCommitter(interval, linger time.Duration, parallelism int, observer Observer) *committer {
	c := &committer{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		interval: interval, linger: linger, parallelism: max(parallelism, 1), observer: observer, started: time.Now()}
	if linger > 0 {
		go c.runLingering()
	} else {
		go c.run()
	}
	return c
}

// enqueue queues a dirty log for the next cycle.
func (c *committer) enqueue(l *Log) {
	c.mu.Lock()
	c.queue = append(c.queue, l)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *committer) run() {
	defer close(c.done)
	var tick <-chan time.Time
	if c.interval > 0 {
		ticker := time.NewTicker(c.interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		if tick != nil {
			select {
			case <-tick:
			case <-c.stop:
				c.cycle()
				return
			}
		} else {
			select {
			case <-c.wake:
			case <-c.stop:
				c.cycle()
				return
			}
		}
		c.cycle()
	}
}

// cycle syncs every queued log once.
func (c *committer) cycle() {
	c.mu.Lock()
	logs := c.queue
	c.queue = c.spare[:0]
	c.mu.Unlock()
	c.syncAll(logs)
}

// syncAll syncs logs, each once, and keeps the slice for the next cycle.
func (c *committer) syncAll(logs []*Log) {
	if len(logs) == 0 {
		c.spare = logs
		return
	}
	c.cycles.Add(1)
	if len(logs) == 1 || c.parallelism == 1 {
		for _, l := range logs {
			c.syncLog(l)
		}
	} else {
		c.syncParallel(logs)
	}
	clear(logs)
	c.spare = logs
}

// syncParallel syncs logs concurrently, at most c.parallelism at once, and
// returns when all are done.
func (c *committer) syncParallel(logs []*Log) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, c.parallelism)
	for _, l := range logs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.syncLog(l)
			<-slots
		}()
	}
	wg.Wait()
}

// syncLog makes everything l's appender wrote so far durable, then
// publishes it as committed. A failed sync freezes the log: it is never
// retried, because the kernel may already have dropped the unsynced pages.
func (c *committer) syncLog(l *Log) {
	l.mu.Lock()
	l.mu.dirty = false
	written := l.mu.written
	covered := l.opts.Durability == DurabilitySync && written.next <= l.committed.Load().next
	if l.mu.failure != nil || written.seg == nil || covered || !written.seg.tryAcquire() {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	started := time.Now()
	c.syncStarted.CompareAndSwap(0, max(int64(started.Sub(c.started)), 1))
	err := written.seg.syncData()
	elapsed := time.Since(started)
	c.syncStarted.Store(0)
	c.lastSync.Store(int64(elapsed))
	c.syncNanos.Add(uint64(elapsed))
	c.syncs.Add(1)
	written.seg.release()
	if err != nil {
		c.observer.ObserveSync(elapsed, 0)
		l.freeze(fmt.Errorf("fdatasync of %s failed, acknowledged nothing after it: %w", written.seg.path, err))
		return
	}
	records := l.syncedRecords(written.next)
	if c.linger > 0 && records > 0 {
		l.noteRound(records, written.next)
	}
	c.observer.ObserveSync(elapsed, records)
	if l.opts.Durability == DurabilitySync {
		l.advanceCommitted(written)
	}
}

// syncNow syncs l directly (used on close under relaxed durability).
func (l *Log) syncNow() {
	l.dir.committer.syncLog(l)
}

func (c *committer) close() {
	close(c.stop)
	<-c.done
}

// CommitterStats counts the committer's work since the directory opened.
type CommitterStats struct {
	Cycles    uint64
	Syncs     uint64
	SyncNanos uint64
	// Held counts the times a commit linger held a busy log's sync back
	// to gather more records (0 without one).
	Held uint64
	// SyncRunning is how long the fdatasync running now has taken so
	// far (zero when none runs): a liveness check's view of a hung device.
	SyncRunning time.Duration
}

func (c *committer) stats() CommitterStats {
	stats := CommitterStats{Cycles: c.cycles.Load(), Syncs: c.syncs.Load(), SyncNanos: c.syncNanos.Load(), Held: c.held.Load()}
	if since := c.syncStarted.Load(); since != 0 {
		stats.SyncRunning = max(time.Since(c.started)-time.Duration(since), 0)
	}
	return stats
}

// syncedRecords returns how many records a sync covering every offset
// below next made durable that no earlier sync of l had covered.
func (l *Log) syncedRecords(next uint64) uint64 {
	for {
		previous := l.syncedNext.Load()
		if next <= previous {
			return 0
		}
		if l.syncedNext.CompareAndSwap(previous, next) {
			return next - previous
		}
	}
}
