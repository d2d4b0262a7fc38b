package broker

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// servedStream is one stream as the broker serves it: its catalog entry
// and one open log per partition. The logs slice is never changed after
// the stream is published in Broker.streams (a stream is replaced whole),
// so a reader that found it under logsMu may index it without the lock.
type servedStream struct {
	settings catalog.Stream
	logs     []*segment.Log
}

// openStreams loads the catalog and opens every partition of every
// stream in it. Opening the catalog finishes what a crash interrupted and
// adopts logs on disk without a catalog entry (a data directory from
// before named streams): partitions = highest partition found + 1,
// default retention (package datadir).
func (b *Broker) openStreams() error {
	store, rec, err := datadir.OpenStreams(b.cfg.FS, b.dir, datadir.StreamsOptions{})
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
	b.router = b.newRouter(store.Catalog())
	for _, settings := range store.Catalog().Streams {
		served := &servedStream{settings: settings, logs: make([]*segment.Log, settings.Partitions)}
		for p := range served.logs {
			l, err := b.dir.OpenLog(segment.LogID{Stream: settings.Name, Partition: uint32(p)})
			if err != nil {
				// One unreadable log must not keep the broker down: it is
				// reported and the partition answers with an error.
				b.cfg.Logger.Error("log did not open", "log", fmt.Sprintf("%s/%d", settings.Name, p), "error", err.Error())
				continue
			}
			served.logs[p] = l
		}
		b.streams[settings.Name] = served
		b.openLogs += int(settings.Partitions)
	}
	return nil
}

func cmpString(x, y string) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// servedStreamFor returns a stream, creating it with one partition on
// first use (publishing to, or consuming from, an unknown name creates
// it: see docs/STREAMS.md). The lookup does not allocate.
func (b *Broker) servedStreamFor(stream []byte) (*servedStream, *wire.Error) {
	b.logsMu.RLock()
	served, ok := b.streams[string(stream)]
	b.logsMu.RUnlock()
	if ok {
		return served, nil
	}
	return b.createStream(catalog.Stream{Name: string(stream), Partitions: 1}, false)
}

// partitionCount returns the number of partitions of a stream, creating
// the stream (one partition) on first use like logFor. A dead-letter
// queue (".dlq.<stream>") has one partition.
func (b *Broker) partitionCount(stream []byte) (uint32, *wire.Error) {
	if len(stream) > 0 && stream[0] == '.' {
		if _, ok := deadLetterSource(string(stream)); ok {
			return 1, nil
		}
	}
	served, werr := b.servedStreamFor(stream)
	if werr != nil {
		return 0, werr
	}
	return uint32(len(served.logs)), nil
}

// logFor returns the log of a stream partition, creating the stream (one
// partition) on first use; the name ".dlq.<stream>" reads a stream's
// dead-letter queue. Any partition below the stream's count is served;
// another is not_found naming the count. The lookup does not allocate.
func (b *Broker) logFor(stream []byte, partition uint32) (*segment.Log, *wire.Error) {
	if len(stream) > 0 && stream[0] == '.' {
		if source, ok := deadLetterSource(string(stream)); ok {
			return b.deadLetterReadLog(source, partition)
		}
	}
	served, werr := b.servedStreamFor(stream)
	if werr != nil {
		return nil, werr
	}
	return served.log(stream, partition)
}

func (s *servedStream) log(stream []byte, partition uint32) (*segment.Log, *wire.Error) {
	if partition >= uint32(len(s.logs)) {
		return nil, wire.NewError(wire.CodeNotFound, "stream %q has %d partition(s) (0..%d); partition %d does not exist",
			stream, len(s.logs), len(s.logs)-1, partition)
	}
	if l := s.logs[partition]; l != nil {
		return l, nil
	}
	return nil, wire.NewError(wire.CodeFrozen, "stream %q partition %d did not open at boot (see the broker log)", stream, partition)
}

// existingStream returns a stream without creating it.
func (b *Broker) existingStream(stream string) (*servedStream, bool) {
	b.logsMu.RLock()
	defer b.logsMu.RUnlock()
	served, ok := b.streams[stream]
	return served, ok
}

// createStream records a stream in the catalog (durably) and opens its
// partitions. explicit is a StreamAdmin create: the same settings again
// are not an error, other settings are a conflict; a first use (explicit
// false) takes whatever exists.
func (b *Broker) createStream(settings catalog.Stream, explicit bool) (*servedStream, *wire.Error) {
	if err := catalog.ValidateStream(settings); err != nil {
		var code = wire.CodeInvalidRequest
		if errors.Is(err, segment.ErrInvalidName) {
			code = wire.CodeInvalidName
		}
		return nil, wire.NewError(code, "%v", err)
	}
	b.logsMu.Lock()
	defer b.logsMu.Unlock()
	if served, ok := b.streams[settings.Name]; ok {
		if explicit && !served.settings.SameSettings(settings) {
			return nil, wire.NewError(wire.CodeConflict, "stream %q exists with other settings (%s); asked for %s",
				settings.Name, describeSettings(served.settings), describeSettings(settings))
		}
		return served, nil
	}
	if b.draining.Load() {
		return nil, wire.NewError(wire.CodeShuttingDown, "the broker is shutting down")
	}
	if b.openLogs+int(settings.Partitions)+int(b.openDeadLetters.Load()) > b.cfg.MaxStreams {
		return nil, wire.NewError(wire.CodeBusy, "the broker serves at most %d logs (one per stream partition; serve --max-streams); stream %q with %d partition(s) was not created",
			b.cfg.MaxStreams, settings.Name, settings.Partitions)
	}
	if explicit {
		settings.Created = b.wallNow()
	}
	if _, err := b.catalog.Create(settings); errors.Is(err, datadir.ErrStreamExists) {
		return nil, wire.NewError(wire.CodeConflict, "%v", err)
	} else if err != nil {
		return nil, storageError(err)
	}
	served := &servedStream{settings: settings, logs: make([]*segment.Log, settings.Partitions)}
	for p := range served.logs {
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
		served.logs[p] = l
	}
	b.streams[settings.Name] = served
	b.openLogs += int(settings.Partitions)
	b.cfg.Logger.Info("stream created", "stream", settings.Name, "partitions", settings.Partitions)
	return served, nil
}

// wallNow is the wall clock for creation times (the retention clock when
// one is configured, so tests can pin it).
func (b *Broker) wallNow() time.Time {
	return time.Now().UTC()
}

func describeSettings(s catalog.Stream) string {
	return fmt.Sprintf("partitions %d, max bytes %d, max age %v, max records %d", s.Partitions, s.MaxBytes, s.MaxAge, s.MaxRecords)
}

// streamList returns every served stream sorted by name.
func (b *Broker) streamList() []*servedStream {
	b.logsMu.RLock()
	out := make([]*servedStream, 0, len(b.streams))
	for _, s := range b.streams {
		out = append(out, s)
	}
	b.logsMu.RUnlock()
	slices.SortFunc(out, func(x, y *servedStream) int { return cmpString(x.settings.Name, y.settings.Name) })
	return out
}

// streamBounds are a stream's own retention bounds (zero: the default).
func streamBounds(s catalog.Stream) StreamRetention {
	return StreamRetention{MaxBytes: int64(min(s.MaxBytes, math.MaxInt64)), MaxAge: s.MaxAge, MaxRecords: s.MaxRecords}
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

// placeRecord decides where a produced record goes: its stream (named, or
// routed by its subject), the permission to publish there, and its
// partition (named, or PartitionAny: the stable hash of its key, or this
// connection's own partition for a keyless record). closes reports an
// error that ends the connection (an identity removed). Allocation-free.
func (s *session) placeRecord(p *wire.Produce) (l *segment.Log, partition uint32, werr *wire.Error, closes bool) {
	stream := p.Stream
	routed := p.Flags&wire.ProduceRouteBySubject != 0
	if !routed {
		// The permission check comes first, as it always has: a
		// refused identity learns nothing about its records.
		if werr, closes = s.authorize(security.ScopePublish, stream); werr != nil {
			return nil, 0, werr, closes
		}
	}
	view, werr := s.validateRecord(p)
	if werr != nil {
		return nil, 0, werr, false
	}
	if !routed && len(view.Subject) > 0 {
		if werr = validateSubject(view.Subject); werr != nil {
			return nil, 0, werr, false
		}
	}
	if routed {
		if len(stream) != 0 {
			return nil, 0, wire.NewError(wire.CodeInvalidRequest, "a Produce routed by subject names no stream; it names %q", stream), false
		}
		if stream, werr = s.routeSubject(view.Subject); werr != nil {
			return nil, 0, werr, false
		}
		if werr, closes = s.authorize(security.ScopePublish, stream); werr != nil {
			return nil, 0, werr, closes
		}
	}
	if len(stream) > 0 && stream[0] == '.' {
		// Internal streams (dead-letter queues) are written by the broker only.
		return nil, 0, wire.NewError(wire.CodeInvalidName, "stream %q is internal and read-only; produce to a stream whose name does not start with '.'", stream), false
	}
	served, werr := s.broker.servedStreamFor(stream)
	if werr != nil {
		return nil, 0, werr, false
	}
	partition = p.Partition
	if partition == wire.PartitionAny {
		count := uint32(len(served.logs))
		if len(view.Key) > 0 {
			partition = wire.PartitionForKey(view.Key, count)
		} else {
			partition = s.sticky % count
		}
	}
	l, werr = served.log(stream, partition)
	return l, partition, werr, false
}
