package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/ironbus/ironbus/dedup"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// Message-id windows (package dedup): each partition of a stream whose
// dedup window is on keeps one in dedup/ beside its segments. It opens
// with the stream, replays the log tail its files do not cover, and
// closes with the stream or the broker. A purge deletes segments only, so
// the window, and every id in it, outlives it: the purge seals the ids
// the window holds in RAM first, since a crash after it finds no tail to
// replay them from.

// dedupDirName is the window's directory in a log directory.
const dedupDirName = "dedup"

// replaySegments bounds the replay at open to the newest segments of the
// log: after a clean close there is nothing to replay; after a crash, at
// most the active segment and the one sealed before it.
const replaySegments = 2

// openWindows opens the message-id window of every partition of a
// stream that keeps one. A window that does not open is reported and the
// partition serves without dedup: a retried publish may then be stored
// twice, never refused.
func (b *Broker) openWindows(s *Stream) {
	window := s.settings.Dedup()
	// A replicated stream's windows would miss the ids other leaders
	// stored; message ids are refused there (check).
	if window == 0 || b.cfg.Storage.ReadOnly || s.settings.Replicated() {
		return
	}
	for i := range s.partitions {
		p := &s.partitions[i]
		if p.log == nil || p.log.Err() != nil {
			continue // a frozen log takes no appends, and nothing is written beside it
		}
		w, err := b.openWindow(p.log, window)
		if err != nil {
			b.cfg.Logger.Error("the message-id window did not open; the partition serves without dedup",
				"log", p.log.ID().String(), "error", err.Error())
			continue
		}
		p.dedup = w
	}
}

func (b *Broker) openWindow(l *segment.Log, window time.Duration) (*dedup.Window, error) {
	dir := path.Join(segment.LogPath(b.dir.Path(), l.ID()), dedupDirName)
	w, err := dedup.Open(b.cfg.FS, dir, dedup.Options{Window: window, MaxIDs: b.cfg.DedupMaxIDs,
		Now: b.clock.Now, Durable: durableEnd(l), Logger: b.cfg.Logger})
	if err != nil {
		return nil, err
	}
	if err := replayWindow(w, l); err != nil {
		b.cfg.Logger.Warn("the message-id window replayed only part of the log tail; ids of the rest may be stored again",
			"log", l.ID().String(), "error", err.Error())
	}
	return w, nil
}

// durableEnd is a window's view of its log's durability.
func durableEnd(l *segment.Log) func(context.Context, uint64) uint64 {
	return func(ctx context.Context, end uint64) uint64 {
		if committed := l.Committed(); end == 0 || committed >= end {
			return committed
		}
		committed, _ := l.WaitCommitted(ctx, end-1)
		return committed
	}
}

// replayWindow gives w the message ids of the records its files do not
// cover, up to the log's durable end.
func replayWindow(w *dedup.Window, l *segment.Log) error {
	from := max(w.CoversUpTo(), l.FirstOffset())
	if segments := l.Segments(); len(segments) > replaySegments {
		from = max(from, segments[len(segments)-replaySegments].Base)
	}
	if from >= l.Committed() {
		return nil
	}
	reader := l.NewReader(from)
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if entry.Gap != nil {
			continue
		}
		view, err := record.Parse(entry.Body)
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", entry.Offset, err)
		}
		if id := view.MessageID(); id != nil {
			w.Replay(id, entry.Offset)
		}
	}
}

// closeWindows closes the message-id windows of a stream's partitions,
// after its appends have stopped (the broker drained, or the stream is
// being removed).
func (b *Broker) closeWindows(s *Stream) {
	for i := range s.partitions {
		p := &s.partitions[i]
		p.checkMu.Lock()
		w := p.dedup
		p.dedup = nil
		p.checkMu.Unlock()
		if w == nil {
			continue
		}
		if err := w.Close(); err != nil {
			b.cfg.Logger.Warn("closing a message-id window", "stream", s.settings.Name, "partition", i, "error", err.Error())
		}
	}
}

// sealWindow writes the ids a partition's message-id window holds only
// in RAM to its files (dedup.Window.Seal), under the append lock.
func sealWindow(ctx context.Context, p *Partition) {
	p.checkMu.Lock()
	defer p.checkMu.Unlock()
	if p.dedup != nil {
		p.dedup.Seal(ctx)
	}
}

// maintainWindows lets every message-id window seal an old active
// generation and forget expired ones (dedup.Window.Maintain).
func (b *Broker) maintainWindows() {
	for _, s := range b.streamList() {
		for i := range s.partitions {
			p := &s.partitions[i]
			p.checkMu.Lock()
			if p.dedup != nil {
				p.dedup.Maintain()
			}
			p.checkMu.Unlock()
		}
	}
}

// DedupStats are the message-id window counters of one partition.
type DedupStats struct {
	Stream    string
	Partition uint32
	Window    time.Duration
	dedup.Stats
}

// Dedup returns the counters of every open message-id window, by stream
// and partition.
func (b *Broker) Dedup() []DedupStats {
	var out []DedupStats
	for _, s := range b.streamList() {
		for i := range s.partitions {
			p := &s.partitions[i]
			p.checkMu.Lock()
			w := p.dedup
			p.checkMu.Unlock()
			if w != nil {
				out = append(out, DedupStats{Stream: s.settings.Name, Partition: uint32(i), Window: s.settings.Dedup(), Stats: w.Stats()})
			}
		}
	}
	return out
}

// collectDedup reports the message-id windows, summed over partitions.
func collectDedup(emit *emitter, windows []DedupStats) {
	var ids, generations, evicted, duplicates, failures float64
	for _, w := range windows {
		ids += float64(w.IDs)
		generations += float64(w.Generations)
		evicted += float64(w.EvictedEarly)
		duplicates += float64(w.Duplicates)
		failures += float64(w.Errors)
	}
	emit.gauge("ironbus_dedup_windows", "Partitions keeping a message-id window.", float64(len(windows)))
	emit.gauge("ironbus_dedup_ids", "Message ids remembered, in RAM and on disk.", ids)
	emit.gauge("ironbus_dedup_generations", "Sealed message-id generations on disk.", generations)
	emit.counter("ironbus_dedup_evicted_early_total", "Message ids forgotten before their window ended (count cap, a damaged or unwritten generation).", evicted)
	emit.counter("ironbus_dedup_duplicates_total", "Publishes whose message id was found inside its window.", duplicates)
	emit.counter("ironbus_dedup_errors_total", "Message-id generation reads and writes that failed.", failures)
}
