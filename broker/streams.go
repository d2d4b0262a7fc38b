package broker

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
)

// Stream is one stream as the broker serves it: its catalog entry and
// one open log per partition. Neither slice changes after the stream is
// published in Broker.streams (a stream is replaced whole), so a holder
// may index them without a lock. A partition whose log did not open at
// boot has a nil log and answers ErrFrozen.
type Stream struct {
	settings   catalog.Stream
	logs       []*segment.Log
	partitions []Partition
}

// newStream wraps the opened logs of a stream and opens their message-id
// windows.
func (b *Broker) newStream(settings catalog.Stream, logs []*segment.Log) *Stream {
	s := &Stream{settings: settings, logs: logs, partitions: make([]Partition, len(logs))}
	for p, l := range logs {
		s.partitions[p] = Partition{broker: b, log: l, stream: settings.Name, owner: settings.Owner, index: uint32(p),
			replicated: settings.Replicated()}
		if l != nil {
			s.partitions[p].producers = b.producerTable(l)
		}
		b.openSubjectIndex(&s.partitions[p])
	}
	b.openWindows(s)
	return s
}

// Name is the stream's name.
func (s *Stream) Name() string { return s.settings.Name }

// Partitions is how many partitions the stream has (at least one).
func (s *Stream) Partitions() uint32 { return uint32(len(s.logs)) }

// Partition returns one partition: ErrNoSuchPartition past the count,
// ErrFrozen for one whose log did not open at boot. Allocation-free when
// it succeeds.
func (s *Stream) Partition(partition uint32) (*Partition, error) {
	if partition >= uint32(len(s.partitions)) {
		return nil, fmt.Errorf("%w: stream %q has %d partition(s) (0..%d); partition %d does not exist",
			ErrNoSuchPartition, s.settings.Name, len(s.logs), len(s.logs)-1, partition)
	}
	p := &s.partitions[partition]
	if p.log == nil {
		return nil, fmt.Errorf("%w: stream %q partition %d did not open at boot (see the broker log)", ErrFrozen, s.settings.Name, partition)
	}
	return p, nil
}

// openStreams loads the catalog and opens every partition of every
// stream in it. Opening the catalog finishes what a crash interrupted and
// adopts logs on disk without a catalog entry (a data directory from
// before named streams): partitions = highest partition found + 1,
// default retention (package datadir).
func (b *Broker) openStreams() error {
	store, rec, err := datadir.OpenStreams(b.cfg.FS, b.dir, datadir.StreamsOptions{RoutingDomain: b.cfg.RoutingDomain})
	if err != nil {
		return err
	}
	if rec.Catalog.Damaged() {
		b.cfg.Logger.Error("the stream catalog was damaged", "damage", rec.Catalog.Damage, "used", rec.Catalog.Source, "kept", rec.Catalog.Kept,
			"effect", "streams missing from the copy used are adopted from disk with one partition per directory found and default retention; bindings missing from it are lost")
	}
	for _, name := range rec.Removed {
		b.cfg.Logger.Warn("a stream removal interrupted by a crash was finished", "stream", name)
	}
	if rec.Leftovers != nil {
		b.cfg.Logger.Warn("the files of a removed stream were not all deleted", "error", rec.Leftovers.Error())
	}
	for _, s := range rec.Adopted {
		b.cfg.Logger.Info("stream adopted into the catalog", "stream", s.Name, "partitions", s.Partitions)
	}
	b.catalog = store
	b.newRouters(store.Catalog())
	for _, settings := range store.Catalog().Streams {
		logs := make([]*segment.Log, settings.Partitions)
		for p := range logs {
			l, err := b.dir.OpenLog(segment.LogID{Stream: settings.Name, Partition: uint32(p)})
			if err != nil {
				// One unreadable log must not keep the broker down: it is
				// reported and the partition answers with an error.
				b.cfg.Logger.Error("log did not open", "log", fmt.Sprintf("%s/%d", settings.Name, p), "error", err.Error())
				continue
			}
			logs[p] = l
		}
		b.streams[settings.Name] = b.newStream(settings, logs)
		b.openLogs.Add(int64(settings.Partitions))
	}
	return nil
}

// Stream returns a stream without creating it: ErrNoSuchStream (or
// ErrInvalidName for a name no stream can have). A dead-letter queue's
// name (".dlq.<stream>") is not a stream: read it through OpenGroups. The
// lookup does not allocate when the stream exists.
func (b *Broker) Stream(name []byte) (*Stream, error) {
	if served, ok := b.existingStream(string(name)); ok {
		return served, nil
	}
	return nil, noSuchStream(string(name))
}

// ProduceStream returns the stream a record is published to. An unknown
// name is created with one partition unless Config.DisableAutoCreateStreams
// is set, owned by owner (the publishing identity, "" without
// authentication); an internal name (a dead-letter queue, starting with
// '.') is ErrReadOnly. The lookup does not allocate when the stream exists.
func (b *Broker) ProduceStream(name []byte, owner string) (*Stream, error) {
	if served, ok := b.existingStream(string(name)); ok {
		return served, nil
	}
	if len(name) > 0 && name[0] == '.' {
		return nil, fmt.Errorf("%w: stream %q is internal and read-only; produce to a stream whose name does not start with '.'", ErrReadOnly, name)
	}
	if b.cfg.DisableAutoCreateStreams {
		if err := segment.ValidateStreamName(string(name)); err != nil {
			return nil, withKind(ErrInvalidName, err)
		}
		return nil, fmt.Errorf("%w %q: this broker creates streams only on request (ironbus stream create %s)", ErrNoSuchStream, name, name)
	}
	return b.createStream(catalog.Stream{Name: string(name), Partitions: 1, Owner: owner}, false)
}

// noSuchStream is the answer for a name that names no stream.
func noSuchStream(name string) error {
	if err := segment.ValidateStreamName(name); err != nil {
		return withKind(ErrInvalidName, err)
	}
	return fmt.Errorf("%w %q", ErrNoSuchStream, name)
}

// existingStream returns a stream without creating it. A cluster member
// that does not have it yet asks its cluster door to open it, when the
// cluster already holds it (the door's own pass may not have run yet).
func (b *Broker) existingStream(stream string) (*Stream, bool) {
	b.logsMu.RLock()
	served, ok := b.streams[stream]
	b.logsMu.RUnlock()
	if ok {
		return served, true
	}
	// A copy: the caller's name must not escape (a lookup by a converted
	// []byte allocates nothing when the stream exists).
	if open := b.openMissing.Load(); open != nil && (*open)(strings.Clone(stream)) {
		b.logsMu.RLock()
		served, ok = b.streams[stream]
		b.logsMu.RUnlock()
	}
	return served, ok
}

// OpenMissingStreams installs the cluster door's way to open a stream the
// cluster holds and this node does not serve yet: it returns whether the
// stream now exists here.
func (b *Broker) OpenMissingStreams(open func(stream string) bool) { b.openMissing.Store(&open) }

// readLog returns the log of an existing stream partition, or of the
// dead-letter queue a name ".dlq.<stream>" reads (one partition; it exists
// while its stream does). Nothing is created but the queue's log.
func (b *Broker) readLog(stream []byte, partition uint32) (*segment.Log, error) {
	if source, ok := deadLetterSource(string(stream)); ok {
		return b.deadLetterReadLog(source, partition)
	}
	served, err := b.Stream(stream)
	if err != nil {
		return nil, err
	}
	p, err := served.Partition(partition)
	if err != nil {
		return nil, err
	}
	return p.log, nil
}

// partitionCount returns the number of partitions of an existing stream;
// a dead-letter queue has one.
func (b *Broker) partitionCount(stream []byte) (uint32, error) {
	if source, ok := deadLetterSource(string(stream)); ok {
		if _, err := b.Stream([]byte(source)); err != nil {
			return 0, err
		}
		return 1, nil
	}
	served, err := b.Stream(stream)
	if err != nil {
		return 0, err
	}
	return served.Partitions(), nil
}

// createStream records a stream in the catalog (durably) and opens its
// partitions. explicit is an admin create: the same settings again are not
// an error, other settings are ErrConflict; a first publish (explicit
// false) takes whatever exists.
func (b *Broker) createStream(settings catalog.Stream, explicit bool) (*Stream, error) {
	if err := catalog.ValidateStream(settings); err != nil {
		if errors.Is(err, segment.ErrInvalidName) {
			return nil, withKind(ErrInvalidName, err)
		}
		return nil, withKind(ErrInvalidArgument, err)
	}
	b.logsMu.Lock()
	defer b.logsMu.Unlock()
	if served, ok := b.streams[settings.Name]; ok {
		if explicit && !served.settings.SameSettings(settings) {
			return nil, fmt.Errorf("%w: stream %q exists with other settings (%s); asked for %s",
				ErrConflict, settings.Name, describeSettings(served.settings), describeSettings(settings))
		}
		return served, nil
	}
	if b.draining.Load() {
		return nil, ErrShuttingDown
	}
	if int(b.openLogs.Load())+int(settings.Partitions)+int(b.openDeadLetters.Load()) > b.cfg.MaxStreams {
		return nil, fmt.Errorf("%w: the broker serves at most %d logs (one per stream partition; serve --max-streams); stream %q with %d partition(s) was not created",
			ErrBusy, b.cfg.MaxStreams, settings.Name, settings.Partitions)
	}
	if explicit {
		settings.Created = b.wallNow()
	}
	if _, err := b.catalog.Create(settings); errors.Is(err, datadir.ErrStreamExists) {
		return nil, withKind(ErrConflict, err)
	} else if err != nil {
		return nil, storageError(err)
	}
	logs := make([]*segment.Log, settings.Partitions)
	for p := range logs {
		l, err := b.dir.OpenLog(segment.LogID{Stream: settings.Name, Partition: uint32(p)})
		if err != nil {
			// The catalog already names the stream: the partitions that
			// opened serve, and the next boot retries the rest.
			b.cfg.Logger.Error("log did not open", "log", fmt.Sprintf("%s/%d", settings.Name, p), "error", err.Error())
			if p == 0 {
				return nil, storageError(err)
			}
			continue
		}
		logs[p] = l
	}
	served := b.newStream(settings, logs)
	b.streams[settings.Name] = served
	b.openLogs.Add(int64(settings.Partitions))
	b.cfg.Logger.Info("stream created", "stream", settings.Name, "partitions", settings.Partitions)
	return served, nil
}

// wallNow is the wall clock for creation times (the retention clock when
// one is configured, so tests can pin it).
func (b *Broker) wallNow() time.Time {
	return time.Now().UTC()
}

func describeSettings(s catalog.Stream) string {
	text := fmt.Sprintf("partitions %d, max bytes %d, max age %v, max records %d, dedup window %v", s.Partitions, s.MaxBytes, s.MaxAge, s.MaxRecords, s.Dedup())
	if s.Compact {
		text += fmt.Sprintf(", compact (delete retention %v)", s.DeleteRetention)
	}
	return text
}

// streamList returns every served stream sorted by name.
func (b *Broker) streamList() []*Stream {
	b.logsMu.RLock()
	out := make([]*Stream, 0, len(b.streams))
	for _, s := range b.streams {
		out = append(out, s)
	}
	b.logsMu.RUnlock()
	// sort.Slice: one sort for every element type (docs/PACKAGING.md).
	sort.Slice(out, func(i, j int) bool { return out[i].settings.Name < out[j].settings.Name })
	return out
}

// streamBounds are a stream's own retention bounds (zero: the default).
func streamBounds(s catalog.Stream) StreamRetention {
	return StreamRetention{MaxBytes: int64(min(s.MaxBytes, math.MaxInt64)), MaxAge: s.MaxAge, MaxRecords: s.MaxRecords}
}

// anyCompacted reports whether some log is compacted.
func anyCompacted(logs []logRef) bool {
	for i := range logs {
		if logs[i].compact {
			return true
		}
	}
	return false
}

// anyBounded reports whether some log has bounds of its own.
func anyBounded(logs []logRef) bool {
	for i := range logs {
		if logs[i].bounds.Bounded() {
			return true
		}
	}
	return false
}
