package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/producer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// Idempotent producers in the engine (package producer): the registry of
// the data directory (producers.log) and one table per stream partition.
//
// A partition's table is built when its log opens: the snapshot kept as
// the log's checkpoint "producers" (checkpoints/producers.ckpt, with the
// previous copy as a fallback), then a replay of the log's records from
// the offset the snapshot covers to the durable end. A missing, damaged
// or unusable snapshot means a longer replay, never a failed open; when
// what the table did not see may have held state (the log no longer
// starts where the snapshot ends, a gap, an unreadable record), the table
// is told (producer.Table.MarkGap) and such producers answer ErrExpired.
//
// Snapshots are written when a segment seals, when a table drops a state
// (so the dropped producer may start afresh), before a purge deletes the
// records, and at Close. A snapshot only covers durable records: it waits
// for the log's durable end to reach everything the table recorded.
//
// Purging a stream keeps its producers' state (the snapshot written
// before the purge holds it); removing a stream drops it with the
// stream's files, and a stream created again under the name starts with
// none (its old records are gone too, so nothing a resend could
// duplicate remains).

// producerCheckpoint names a log's table snapshot among its checkpoints
// (consumer groups use "group-<name>": no clash).
const producerCheckpoint = "producers"

// MaxProducerPositions bounds the positions InitProducer returns.
const MaxProducerPositions = 1024

// How long a snapshot waits for the records it covers to be durable: in
// the background (then it is retried), and at Close.
const (
	producerSnapshotWait = 2 * time.Second
	producerCloseWait    = 10 * time.Second
)

// Memory of producer state, upper estimates: a table's state (struct, map
// slot, list links) plus its ring, and a registry name at full length
// (producer.MaxNameBytes) with its entry and two map slots.
const (
	producerStateCost     = 128
	producerRingBatchCost = 24
	producerNameCost      = producer.MaxNameBytes + 208
)

// ProducerConfig bounds the producer registry and tables (zero fields:
// the package producer defaults).
type ProducerConfig struct {
	// MaxNames caps the producer names of the data directory.
	MaxNames int
	// IDOf, when set, derives each producer name's id from the name
	// (producer.RegistryOptions.IDOf): a cluster member's setting.
	IDOf func(name string) uint64
	// MaxStates caps the producers with state per partition; admitting
	// one more drops the state of the one idle longest.
	MaxStates int
	// RingBatches is how many recent batches per producer and partition
	// keep their offsets, for exact duplicate answers.
	RingBatches int
	// IdleExpiry drops a producer's state on a partition after this much
	// broker running time without an append there.
	IdleExpiry time.Duration
}

func (c ProducerConfig) withDefaults() ProducerConfig {
	if c.MaxNames <= 0 {
		c.MaxNames = producer.DefaultMaxNames
	}
	if c.MaxStates <= 0 {
		c.MaxStates = producer.DefaultMaxProducers
	}
	if c.RingBatches <= 0 {
		c.RingBatches = producer.DefaultRingBatches
	}
	c.RingBatches = min(c.RingBatches, producer.MaxRingBatches)
	if c.IdleExpiry <= 0 {
		c.IdleExpiry = producer.DefaultIdleExpiry
	}
	return c
}

// registerProducerMemory adds the registry and the tables to budget.
func (c Config) registerProducerMemory(budget *arena.Budget) {
	p := c.Producers.withDefaults()
	budget.Register("producer registry", "producer names × 720 B", int64(p.MaxNames)*producerNameCost)
	budget.Register("producer tables", "--max-streams × producer states × (128 B + ring batches × 24 B)",
		int64(c.MaxStreams)*int64(p.MaxStates)*int64(producerStateCost+p.RingBatches*producerRingBatchCost))
}

// ProducerPosition is where a producer's sequence stands on one
// partition: the sequence the partition expects from it next.
type ProducerPosition struct {
	Stream       string
	Partition    uint32
	NextSequence uint64
}

// ProducerStats sums the producer tables of every partition.
type ProducerStats struct {
	Names int // in the registry
	// NamesEvicted counts names dropped from the full registry to make
	// room for new ones (their ids are refused as unknown from then on).
	NamesEvicted uint64
	States       int // producer states held, over all partitions
	// Evicted and Expired count states dropped (a full table, idle
	// expiry); ExpiredAnswers, appends answered ErrExpired. Since open.
	Evicted, Expired, ExpiredAnswers uint64
}

// producerState is the engine's producer machinery.
type producerState struct {
	registry *producer.Registry
	options  producer.TableOptions

	snapshotMu sync.Mutex // one snapshot write at a time

	dueMu sync.Mutex
	due   map[segment.LogID]struct{} // logs whose table wants a snapshot
	// onDisk is, per log, what its snapshot on disk holds, so a stop
	// rewrites only the snapshots something changed since.
	onDisk map[segment.LogID]snapshotMark
	nudge  chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// snapshotMark is what a snapshot holds: the offset it covers and the
// table's drop count when it was taken.
type snapshotMark struct{ covers, drops uint64 }

func newProducerState() *producerState {
	return &producerState{due: map[segment.LogID]struct{}{}, onDisk: map[segment.LogID]snapshotMark{}, nudge: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// markDue asks for a snapshot of log's table; never blocks (a segment
// seal and a table's drop call it).
func (ps *producerState) markDue(log segment.LogID) {
	ps.dueMu.Lock()
	ps.due[log] = struct{}{}
	ps.dueMu.Unlock()
	select {
	case ps.nudge <- struct{}{}:
	default:
	}
}

func (ps *producerState) takeDue() []segment.LogID {
	ps.dueMu.Lock()
	defer ps.dueMu.Unlock()
	logs := make([]segment.LogID, 0, len(ps.due))
	for log := range ps.due {
		logs = append(logs, log)
	}
	clear(ps.due)
	return logs
}

// openProducers opens the registry and starts the snapshot writer.
// Called before the streams open (their tables need the registry).
func (b *Broker) openProducers() error {
	cfg := b.cfg.Producers.withDefaults()
	registry, err := producer.OpenRegistry(b.cfg.FS, b.cfg.DataDir, producer.RegistryOptions{MaxNames: cfg.MaxNames, IDOf: cfg.IDOf})
	if err != nil {
		return storageError(err)
	}
	b.producers.registry = registry
	b.producers.options = producer.TableOptions{MaxProducers: cfg.MaxStates, RingBatches: cfg.RingBatches,
		IdleExpiry: cfg.IdleExpiry, Clock: b.clock.Now}
	go b.writeProducerSnapshots()
	return nil
}

// stopProducers stops the snapshot writer and closes the registry,
// writing nothing (a failed open).
func (b *Broker) stopProducers() {
	if b.producers.registry == nil {
		return
	}
	close(b.producers.stop)
	<-b.producers.done
	_ = b.producers.registry.Close()
}

// closeProducers writes every table's snapshot and closes the registry:
// the clean stop, before the logs close.
func (b *Broker) closeProducers() error {
	if b.producers.registry == nil {
		return nil
	}
	close(b.producers.stop)
	<-b.producers.done
	for _, s := range b.streamList() {
		for i := range s.partitions {
			if err := b.snapshotProducersIfChanged(&s.partitions[i]); err != nil {
				b.cfg.Logger.Warn("producer snapshot not written at close; the next open replays more of the log",
					"log", fmt.Sprintf("%s/%d", s.settings.Name, i), "error", err.Error())
			}
		}
	}
	return b.producers.registry.Close()
}

// writeProducerSnapshots writes the snapshots asked for (markDue) until
// Close; one that cannot be written yet is retried.
func (b *Broker) writeProducerSnapshots() {
	ps := b.producers
	defer close(ps.done)
	var retry <-chan time.Time
	for {
		select {
		case <-ps.stop:
			return
		case <-ps.nudge:
		case <-retry:
			retry = nil
		}
		for _, log := range ps.takeDue() {
			p := b.servedPartition(log)
			if p == nil {
				continue // a dead-letter queue, or a stream removed since
			}
			err := b.snapshotProducers(p, producerSnapshotWait)
			if err == nil {
				continue
			}
			b.cfg.Logger.Warn("producer snapshot not written; retrying", "log", log.String(), "error", err.Error())
			if p.log.Halted() == nil {
				ps.dueMu.Lock()
				ps.due[log] = struct{}{}
				ps.dueMu.Unlock()
				retry = time.After(producerSnapshotWait)
			}
		}
	}
}

// servedPartition returns the partition a log serves, nil for none.
func (b *Broker) servedPartition(log segment.LogID) *Partition {
	s, ok := b.existingStream(log.Stream)
	if !ok || log.Partition >= uint32(len(s.partitions)) {
		return nil
	}
	return &s.partitions[log.Partition]
}

// snapshotProducersIfChanged is snapshotProducers at a stop: skipped when
// the snapshot on disk already covers the log's end and every drop.
func (b *Broker) snapshotProducersIfChanged(p *Partition) error {
	if p.log == nil || p.producers == nil || p.log.Err() != nil {
		return nil
	}
	if p.replicated {
		b.producers.dueMu.Lock()
		written, ok := b.producers.onDisk[p.log.ID()]
		b.producers.dueMu.Unlock()
		if ok && written.covers == p.log.Committed() {
			return nil
		}
		return b.snapshotCommittedProducers(p)
	}
	p.checkMu.Lock()
	current := snapshotMark{covers: max(p.log.Committed(), p.producers.Through()), drops: p.producers.Drops()}
	p.checkMu.Unlock()
	b.producers.dueMu.Lock()
	written, ok := b.producers.onDisk[p.log.ID()]
	b.producers.dueMu.Unlock()
	if ok && written == current {
		return nil
	}
	return b.snapshotProducers(p, producerCloseWait)
}

// snapshotProducers writes p's table as its log's checkpoint, once every
// record the table reflects is durable (waiting up to wait), and then
// tells the table which drops are on disk.
func (b *Broker) snapshotProducers(p *Partition, wait time.Duration) error {
	if p.log == nil || p.producers == nil || p.log.Err() != nil {
		return nil // a frozen log takes no appends: its files stay as they are
	}
	if p.replicated {
		return b.snapshotCommittedProducers(p)
	}
	b.producers.snapshotMu.Lock()
	defer b.producers.snapshotMu.Unlock()
	// Under checkMu every record assigned so far is in the table, so the
	// snapshot covers the log up to whichever is further: what the table
	// recorded, or the durable end.
	p.checkMu.Lock()
	committed, through := p.log.Committed(), p.producers.Through()
	image := p.producers.Encode(max(committed, through))
	drops := p.producers.Drops()
	p.checkMu.Unlock()
	if through > committed {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		_, err := p.log.WaitCommitted(ctx, through-1)
		cancel()
		if err != nil {
			return fmt.Errorf("waiting for offset %d to be durable: %w", through-1, err)
		}
	}
	if err := b.writeProducerCheckpoint(p, image); err != nil {
		return err
	}
	b.producers.noteOnDisk(p.log.ID(), snapshotMark{covers: max(committed, through), drops: drops})
	p.checkMu.Lock()
	p.producers.Persisted(drops)
	p.checkMu.Unlock()
	return nil
}

// snapshotCommittedProducers writes a replicated partition's snapshot
// from its committed records, never from the partition's table: a
// follower's table stopped at its last leadership, and a leader's holds
// proposals that a new leader may cut away, so either, written as
// covering the committed end, would teach the next leader sequences the
// log does not hold (a duplicate answered for a record never stored) or
// miss ones it does. The committed records are the same on every
// replica, so every replica writes the same table. The partition's own
// table is never told its drops are on disk (Persisted): a producer it
// dropped answers expired until the next term reads the table afresh.
func (b *Broker) snapshotCommittedProducers(p *Partition) error {
	b.producers.snapshotMu.Lock()
	defer b.producers.snapshotMu.Unlock()
	table, end := b.readProducerTable(p.log, b.producers.options)
	if err := b.writeProducerCheckpoint(p, table.Encode(end)); err != nil {
		return err
	}
	b.producers.noteOnDisk(p.log.ID(), snapshotMark{covers: end, drops: table.Drops()})
	return nil
}

func (ps *producerState) noteOnDisk(log segment.LogID, mark snapshotMark) {
	ps.dueMu.Lock()
	ps.onDisk[log] = mark
	ps.dueMu.Unlock()
}

// writeProducerCheckpoint writes image unless p's stream was removed
// meanwhile: the removal holds logsMu while it moves the files, and a
// checkpoint written after it would bring a directory back.
func (b *Broker) writeProducerCheckpoint(p *Partition, image []byte) error {
	b.logsMu.RLock()
	defer b.logsMu.RUnlock()
	if s, ok := b.streams[p.stream]; !ok || p.index >= uint32(len(s.partitions)) || &s.partitions[p.index] != p {
		return nil
	}
	return p.log.WriteCheckpoint(producerCheckpoint, image)
}

// producerTable builds the table of a log that just opened: its snapshot
// and a replay of the records after it. Nil when the broker keeps no
// producer state.
func (b *Broker) producerTable(l *segment.Log) *producer.Table {
	ps := b.producers
	if ps.registry == nil {
		return nil
	}
	options := ps.options
	id := l.ID()
	options.OnDrop = func() { ps.markDue(id) }
	table, _ := b.readProducerTable(l, options)
	// A registry older than the logs (lost, or restored from a backup
	// that copied it first) must not give a new name an id a log knows.
	ps.registry.ReserveIDs(table.HighestID())
	return table
}

// readProducerTable reads l's table: its snapshot and a replay of the
// records after it, up to end, the committed end when it began.
func (b *Broker) readProducerTable(l *segment.Log, options producer.TableOptions) (table *producer.Table, end uint64) {
	ps := b.producers
	id := l.ID()
	table, from, gap := b.loadProducerSnapshot(l, options)
	end = l.Committed()
	if loaded := !gap && from > 0; loaded {
		ps.noteOnDisk(id, snapshotMark{covers: from, drops: table.Drops()})
	} else {
		ps.dueMu.Lock()
		delete(ps.onDisk, id)
		ps.dueMu.Unlock()
	}
	if first := l.FirstOffset(); from < first {
		// Records between the snapshot and the log's first offset are
		// gone (retention, a purge without a snapshot).
		gap, from = true, first
	}
	if gap {
		table.MarkGap()
	}
	if from < end {
		if err := replayProducers(table, l, from, end); err != nil {
			b.cfg.Logger.Warn("producer state rebuilt from part of the log; producers without state answer expired",
				"log", id.String(), "error", err.Error())
			table.MarkGap()
		}
	}
	return table, end
}

// loadProducerSnapshot returns the table in l's snapshot and the offset
// it covers, or an empty table from offset 0; gap says a snapshot existed
// and could not be used.
func (b *Broker) loadProducerSnapshot(l *segment.Log, options producer.TableOptions) (*producer.Table, uint64, bool) {
	registry := b.producers.registry
	data, err := l.ReadCheckpoint(producerCheckpoint)
	if errors.Is(err, segment.ErrNotFound) {
		return producer.NewTable(registry, options), 0, false
	}
	if err == nil {
		table, covers, decodeErr := producer.DecodeTable(registry, options, data)
		switch {
		case decodeErr != nil:
			err = decodeErr
		case covers > l.Committed():
			err = fmt.Errorf("the snapshot covers offset %d, beyond the log's durable end %d (recovery cut the log)", covers, l.Committed())
		default:
			return table, covers, false
		}
	}
	b.cfg.Logger.Warn("producer snapshot not used; the table is rebuilt from the log", "log", l.ID().String(), "error", err.Error())
	return producer.NewTable(registry, options), 0, true
}

// replayProducers records every record of l in [from, end) that names a
// producer. A gap in the log is marked in the table.
func replayProducers(table *producer.Table, l *segment.Log, from, end uint64) error {
	reader := l.NewReader(from)
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if entry.Gap != nil && entry.Gap.From < end {
			table.MarkGap()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if entry.Gap != nil {
			continue
		}
		if entry.Offset >= end {
			return nil
		}
		view, err := record.Parse(entry.Body)
		if err != nil {
			// Stored bodies were checked on the way in; one that no
			// longer parses may have named a producer.
			table.MarkGap()
			continue
		}
		if view.HasProducer {
			table.Record(view.ProducerID, view.Sequence, entry.Offset)
		}
	}
}

// InitProducer registers a new incarnation of the producer name: its id
// (the same for life) and a new epoch, on disk before it returns, which
// fences every older incarnation. The positions are where the producer
// stands on each partition holding its state (at most
// MaxProducerPositions, in stream and partition order), each durable:
// a position never counts a record a crash could still remove.
func (b *Broker) InitProducer(name string) (producer.Identity, []ProducerPosition, error) {
	if b.producers.registry == nil || b.draining.Load() {
		return producer.Identity{}, nil, ErrShuttingDown
	}
	identity, err := b.producers.registry.Init(name)
	switch {
	case errors.Is(err, producer.ErrInvalidName):
		return producer.Identity{}, nil, withKind(ErrInvalidName, err)
	case errors.Is(err, producer.ErrEpochsExhausted), errors.Is(err, producer.ErrIDTaken):
		return producer.Identity{}, nil, withKind(ErrInvalidArgument, err)
	case err != nil:
		// A failed write or sync of the registry is final, as a log's is:
		// the broker answers as for a frozen log (I2).
		return producer.Identity{}, nil, fmt.Errorf("%w: the producer registry is read-only after a storage failure: %w", ErrFrozen, err)
	}
	return identity, b.producerPositions(identity.ID), nil
}

// producerPositions lists the partitions holding id's state.
func (b *Broker) producerPositions(id uint64) []ProducerPosition {
	var positions []ProducerPosition
	for _, s := range b.streamList() {
		for i := range s.partitions {
			p := &s.partitions[i]
			if p.producers == nil || p.log == nil {
				continue
			}
			p.checkMu.Lock()
			term, current := p.currentTermLocked()
			next, held := p.producers.Next(id)
			through := p.producers.Through()
			p.checkMu.Unlock()
			if !held || !current {
				continue
			}
			if through > p.log.Committed() {
				ctx, cancel := context.WithTimeout(context.Background(), producerSnapshotWait)
				_, err := p.log.WaitCommitted(ctx, through-1)
				cancel()
				if err != nil {
					// Left out: the producer starts at 0 there and is
					// answered with a gap or a duplicate, never a silent
					// accept.
					b.cfg.Logger.Warn("producer position left out: not yet durable", "log", p.log.ID().String(), "error", err.Error())
					continue
				}
				if p.replicated && p.servingTerm() != term {
					continue // the proposals counted may have been cut away
				}
			}
			positions = append(positions, ProducerPosition{Stream: s.settings.Name, Partition: uint32(i), NextSequence: next})
			if len(positions) == MaxProducerPositions {
				return positions
			}
		}
	}
	return positions
}

// ProducerEpoch returns the current epoch of producer id; false when the
// registry never issued id. An append whose epoch is older is fenced.
func (b *Broker) ProducerEpoch(id uint64) (uint32, bool) {
	if b.producers.registry == nil {
		return 0, false
	}
	return b.producers.registry.Epoch(id)
}

// ProducerStats returns the producer registry's and tables' figures.
func (b *Broker) ProducerStats() ProducerStats {
	var stats ProducerStats
	if b.producers.registry == nil {
		return stats
	}
	stats.Names = b.producers.registry.Names()
	stats.NamesEvicted = b.producers.registry.Evicted()
	for _, s := range b.streamList() {
		for i := range s.partitions {
			if table := s.partitions[i].producers; table != nil {
				t := table.Stats()
				stats.States += t.Producers
				stats.Evicted += t.Evicted
				stats.Expired += t.Expired
				stats.ExpiredAnswers += t.ExpiredAnswers
			}
		}
	}
	return stats
}

// producerRegistryErr is the registry's sticky storage failure, or nil:
// readiness reports it as a frozen log is reported.
func (b *Broker) producerRegistryErr() error {
	if b.producers == nil || b.producers.registry == nil {
		return nil
	}
	return b.producers.registry.Err()
}
