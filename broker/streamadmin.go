package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
)

// Stream administration: create, describe, purge and remove streams, and
// bind subjects to them. Changes are durable when a call returns.

// StreamSettings are what a stream is created with. Zero retention
// bounds take the broker's default.
type StreamSettings struct {
	Name       string
	Partitions uint32 // at least one
	MaxBytes   uint64
	MaxAge     time.Duration
	MaxRecords uint64
	Owner      string // the identity creating it ("" without authentication)
	// DedupWindow is how long message ids are remembered: zero takes
	// the default (2 minutes), a negative value turns dedup off; at most
	// 24 hours.
	DedupWindow time.Duration
	// Compact keeps only the latest record per key in sealed segments;
	// DeleteRetention keeps tombstones that long (zero: the default,
	// DefaultDeleteRetention). Only a compacted stream takes one.
	Compact         bool
	DeleteRetention time.Duration
	// CompactPastGroups lets compaction remove records a consumer group
	// has not committed (they reach it as compacted gaps).
	CompactPastGroups bool
	// Replicas is the replication factor (0 or 1: this node alone). A
	// replicated stream is created on each node by the server's cluster
	// door, and takes appends once Replicate attaches its partitions.
	Replicas int
}

// StreamInfo describes a stream: its settings and, per partition, the
// offsets it holds and its bytes on disk.
type StreamInfo struct {
	Name       string
	Created    time.Time // zero for a stream made by its first publish
	MaxBytes   uint64
	MaxAge     time.Duration
	MaxRecords uint64
	// DedupWindow is how long message ids are remembered; 0: off.
	DedupWindow time.Duration
	Groups      int // consumer groups over all partitions
	Partitions  []PartitionInfo
	// Compact and the delete retention in force (the default when the
	// stream names none); zero for a stream that is not compacted.
	Compact           bool
	DeleteRetention   time.Duration
	CompactPastGroups bool
	// Replicas is the replication factor; 0 for a stream of this node alone.
	Replicas int
}

// PartitionInfo is one partition of a StreamInfo.
type PartitionInfo struct {
	First uint64 // the first offset it still holds
	End   uint64 // its committed end
	Bytes uint64 // bytes of its segments on disk
}

// Binding routes subjects matching Pattern to Stream.
type Binding struct {
	Pattern string
	Stream  string
}

// Streams describes every stream, sorted by name.
func (b *Broker) Streams() []StreamInfo {
	list := []StreamInfo{}
	for _, served := range b.streamList() {
		list = append(list, b.streamState(served))
	}
	return list
}

// Bindings lists every subject binding.
func (b *Broker) Bindings() []Binding { return bindingsOf(b.catalog.Catalog().Bindings) }

// DescribeStream describes one stream and its bindings.
func (b *Broker) DescribeStream(name string) (StreamInfo, []Binding, error) {
	served, ok := b.existingStream(name)
	if !ok {
		return StreamInfo{}, nil, noSuchStream(name)
	}
	return b.streamState(served), bindingsOf(b.catalog.Catalog().BindingsOf(name)), nil
}

// CreateStream creates a stream (durably). The same settings again are
// not an error; other settings are ErrConflict.
func (b *Broker) CreateStream(settings StreamSettings) (StreamInfo, []Binding, error) {
	entry := catalog.Stream{Name: settings.Name, Partitions: max(settings.Partitions, 1), MaxBytes: settings.MaxBytes,
		MaxAge: settings.MaxAge, MaxRecords: settings.MaxRecords, Owner: settings.Owner, DedupWindow: max(settings.DedupWindow, catalog.DedupOff),
		Compact: settings.Compact, DeleteRetention: settings.DeleteRetention, CompactPastGroups: settings.CompactPastGroups,
		Replicas: settings.Replicas}
	if _, err := b.createStream(entry, true); err != nil {
		return StreamInfo{}, nil, err
	}
	return b.DescribeStream(settings.Name)
}

func bindingsOf(bindings []catalog.Binding) []Binding {
	out := make([]Binding, 0, len(bindings))
	for _, binding := range bindings {
		out = append(out, Binding{Pattern: binding.Pattern, Stream: binding.Stream})
	}
	return out
}

// streamState describes a stream.
func (b *Broker) streamState(served *Stream) StreamInfo {
	s := served.settings
	state := StreamInfo{Name: s.Name, Created: s.Created, MaxBytes: s.MaxBytes, MaxAge: s.MaxAge,
		MaxRecords: s.MaxRecords, DedupWindow: s.Dedup(), Partitions: make([]PartitionInfo, len(served.logs))}
	if s.Replicated() {
		state.Replicas = s.Replicas
	}
	if s.Compact {
		state.Compact = true
		state.DeleteRetention = deleteRetention(logRef{deleteRetention: s.DeleteRetention})
		state.CompactPastGroups = s.CompactPastGroups
	}
	groups := map[string]bool{}
	for p, l := range served.logs {
		if l == nil {
			continue
		}
		part := PartitionInfo{First: l.FirstOffset(), End: l.Committed()}
		for _, seg := range l.Segments() {
			part.Bytes += uint64(seg.Bytes)
		}
		state.Partitions[p] = part
		summaries, _ := consumer.Inspect(l)
		for _, summary := range summaries {
			groups[fmt.Sprint(p, "/", summary.Name)] = true
		}
	}
	b.groupsMu.Lock()
	for key := range b.groups {
		if key.stream == s.Name {
			groups[fmt.Sprint(key.partition, "/", key.group)] = true
		}
	}
	b.groupsMu.Unlock()
	state.Groups = len(groups)
	return state
}

// PurgeStream drops every record of every partition: the active segment
// is sealed, then every segment below the seal point is deleted, so the
// first offset becomes the committed end. Offsets keep rising; groups
// below it see a retention gap. Records published during the purge may
// stay. The message-id windows stay too: a message id published before
// the purge is still a duplicate inside its window, restart or not.
func (b *Broker) PurgeStream(ctx context.Context, name string) (StreamInfo, []Binding, error) {
	served, ok := b.existingStream(name)
	if !ok {
		return StreamInfo{}, nil, noSuchStream(name)
	}
	// Retention must not date or delete segments of this stream halfway.
	b.retention.passMu.Lock()
	defer b.retention.passMu.Unlock()
	for p, l := range served.logs {
		if l == nil {
			continue
		}
		end, err := l.SealActive(ctx)
		if err == nil {
			// The producers' state outlives the records: the snapshot
			// covers them before they go (producers.go).
			if serr := b.snapshotProducers(&served.partitions[p], producerCloseWait); serr != nil {
				b.cfg.Logger.Warn("producer snapshot not written before a purge; its producers will answer expired after a restart",
					"log", fmt.Sprintf("%s/%d", name, p), "error", serr.Error())
			}
			// The subject index keeps the purged records' offsets (see
			// keyindex.go): it covers them before they go.
			b.flushSubjectIndexOf(&served.partitions[p])
			// The message-id window outlives the records too, but ids
			// not yet in its files live only in the log's tail, which a
			// crash replays: seal them before the tail goes.
			sealWindow(ctx, &served.partitions[p])
			_, err = l.DeleteBefore(end)
		}
		if err != nil {
			return StreamInfo{}, nil, storageError(fmt.Errorf("purging %s/%d: %w", name, p, err))
		}
	}
	b.cfg.Logger.Warn("stream purged", "stream", name, "partitions", len(served.logs))
	return b.DescribeStream(name)
}

// RemoveStream deletes a stream: its partitions with their groups and
// checkpoints, its dead-letter queue and its bindings, and returns what it
// was. ErrGroupActive while a group has live members. It follows the
// crash protocol of package datadir: the files are renamed out of the
// scan (the commit point) before the catalog forgets the stream, and
// deleted last, so a crash never brings a removed stream back.
func (b *Broker) RemoveStream(name string) (StreamInfo, []Binding, error) {
	before, bindings, partitions, aside, err := b.forgetStream(name)
	if err != nil {
		return StreamInfo{}, nil, err
	}
	b.removeDeadLetters(name)
	if err := b.catalog.FinishRemoval(name, aside); err != nil {
		b.cfg.Logger.Error("the files of a removed stream were not all deleted; the next boot retries", "stream", name, "error", err.Error())
	}
	b.cfg.Logger.Warn("stream removed", "stream", name, "partitions", partitions)
	return before, bindings, nil
}

// forgetStream closes a stream's groups and logs, commits its removal
// (datadir.Streams.Remove: files out of the scan, then the catalog) and
// drops it from the router, all under logsMu: a publish that recreates
// the name meanwhile waits, then starts an empty stream in a fresh
// directory. It returns the stream as it was, its bindings and where its
// files went. When the removal does not commit, the stream's logs are
// reopened and it stays.
func (b *Broker) forgetStream(name string) (StreamInfo, []Binding, int, string, error) {
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	b.logsMu.Lock()
	defer b.logsMu.Unlock()
	served, ok := b.streams[name]
	if !ok {
		return StreamInfo{}, nil, 0, "", noSuchStream(name)
	}
	if err := b.closeStreamGroups(name); err != nil {
		return StreamInfo{}, nil, 0, "", err
	}
	before, bindings := b.streamState(served), bindingsOf(b.catalog.Catalog().BindingsOf(name))
	// The windows and logs close before their directory is renamed.
	b.closeWindows(served)
	// The logs (and the indexes beside them) close before their
	// directory is renamed.
	b.closeSubjectIndexes(served)
	for _, l := range served.logs {
		if l != nil {
			_ = l.Close()
		}
	}
	aside, err := b.catalog.Remove(name)
	if err != nil && aside == "" {
		logs := make([]*segment.Log, len(served.logs))
		for p := range logs {
			logs[p], _ = b.dir.OpenLog(segment.LogID{Stream: name, Partition: uint32(p)})
		}
		b.streams[name] = b.newStream(served.settings, logs)
		return StreamInfo{}, nil, 0, "", storageError(err)
	}
	if err != nil {
		b.cfg.Logger.Error("a removed stream is still in the catalog; the next boot forgets it", "stream", name, "error", err.Error())
	}
	for _, router := range b.routers() {
		_ = router.Update(func(t *subject.Table) (*subject.Table, error) {
			for _, binding := range t.Bindings() {
				if binding.Stream == name {
					t, _ = t.Unbind(binding.Pattern)
				}
			}
			return t, nil
		})
	}
	delete(b.streams, name)
	b.openLogs.Add(-int64(len(served.logs)))
	return before, bindings, len(served.logs), aside, nil
}

// closeStreamGroups refuses while a group of the stream (or of its
// dead-letter queue) has live members, and otherwise closes them all.
// REQUIRES: logsMu held.
func (b *Broker) closeStreamGroups(name string) error {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	dlq := deadLetterPrefix + name
	for key, served := range b.groups {
		if (key.stream == name || key.stream == dlq) && served.group.Stats().Members > 0 {
			return fmt.Errorf("%w: stream %q partition %d group %q has %d live member(s); stop its consumers first",
				ErrGroupActive, name, key.partition, key.group, served.group.Stats().Members)
		}
	}
	for key, served := range b.groups {
		if key.stream == name || key.stream == dlq {
			_ = served.group.Close()
			delete(b.groups, key)
			served.wake.notify()
		}
	}
	return nil
}

// removeDeadLetters closes a stream's dead-letter queue, whose files
// datadir.Streams.FinishRemoval deletes.
func (b *Broker) removeDeadLetters(name string) {
	store := &b.deadLetters
	store.mu.Lock()
	defer store.mu.Unlock()
	if l, ok := store.logs[name]; ok {
		_ = l.Close()
		delete(store.logs, name)
		b.openDeadLetters.Add(-1)
	}
}

// Permit says whether a request may change the routing of stream: nil,
// or the error that refuses the whole change. A nil Permit permits all.
type Permit func(stream string) error

func (permit Permit) check(streams ...string) error {
	if permit == nil {
		return nil
	}
	for _, stream := range streams {
		if err := permit(stream); err != nil {
			return err
		}
	}
	return nil
}

// Bind routes subjects matching pattern to stream and returns every
// binding. The pattern is checked, then permit is asked about stream and
// about every stream bound to a pattern some subject could match along
// with this one (the streams the change could route subjects away
// from), then the binding is refused with ErrConflict when some subject
// could match it and a binding to another stream; the catalog is written
// before the router changes and before the answer.
func (b *Broker) Bind(pattern, stream string, permit Permit) ([]Binding, error) {
	if err := subject.ValidatePattern([]byte(pattern)); err != nil {
		return nil, withKind(ErrInvalidName, err)
	}
	if err := permit.check(stream); err != nil {
		return nil, err
	}
	if _, ok := b.existingStream(stream); !ok {
		return nil, noSuchStream(stream)
	}
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	router := b.routerFor(pattern)
	for _, existing := range router.Table().Bindings() {
		if subject.Overlap([]byte(existing.Pattern), []byte(pattern)) {
			if err := permit.check(existing.Stream); err != nil {
				return nil, err
			}
		}
	}
	next, err := router.Table().Bind(pattern, stream)
	var ambiguous *subject.AmbiguousError
	switch {
	case errors.As(err, &ambiguous):
		return nil, fmt.Errorf("%w: pattern %q overlaps the binding of %q to stream %q: some subject would match both (ironbus stream unbind %s first, or pick a narrower pattern)",
			ErrConflict, pattern, ambiguous.Existing.Pattern, ambiguous.Existing.Stream, ambiguous.Existing.Pattern)
	case err != nil:
		return nil, withKind(ErrInvalidArgument, err)
	}
	err = b.catalog.Bind(pattern, stream)
	if errors.Is(err, datadir.ErrNoSuchStream) {
		return nil, noSuchStream(stream) // removed meanwhile
	}
	if err != nil {
		return nil, storageError(err)
	}
	_ = router.Update(func(*subject.Table) (*subject.Table, error) { return next, nil })
	b.cfg.Logger.Info("subject bound", "pattern", pattern, "stream", stream)
	return b.Bindings(), nil
}

// BindMany adds many bindings with one catalog write and one router
// change, all or none (an import of a routing table): each is checked as
// Bind checks it, against the others too.
func (b *Broker) BindMany(bindings []Binding) ([]Binding, error) {
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	byDomain := map[*subject.Router][]subject.Binding{}
	for _, binding := range bindings {
		if err := subject.ValidatePattern([]byte(binding.Pattern)); err != nil {
			return nil, withKind(ErrInvalidName, err)
		}
		if _, ok := b.existingStream(binding.Stream); !ok {
			return nil, noSuchStream(binding.Stream)
		}
		router := b.routerFor(binding.Pattern)
		if _, ok := byDomain[router]; !ok {
			byDomain[router] = router.Table().Bindings()
		}
		byDomain[router] = append(byDomain[router], subject.Binding{Pattern: binding.Pattern, Stream: binding.Stream})
	}
	tables := make(map[*subject.Router]*subject.Table, len(byDomain))
	for router, all := range byDomain {
		next, err := subject.NewTable(all...)
		var ambiguous *subject.AmbiguousError
		switch {
		case errors.As(err, &ambiguous):
			return nil, fmt.Errorf("%w: pattern %q overlaps the binding of %q to stream %q: some subject would match both",
				ErrConflict, ambiguous.New.Pattern, ambiguous.Existing.Pattern, ambiguous.Existing.Stream)
		case err != nil:
			return nil, withKind(ErrInvalidArgument, err)
		}
		tables[router] = next
	}
	entries := make([]catalog.Binding, 0, len(bindings))
	for _, binding := range bindings {
		entries = append(entries, catalog.Binding(binding))
	}
	err := b.catalog.BindMany(entries)
	if errors.Is(err, datadir.ErrNoSuchStream) {
		return nil, withKind(ErrNoSuchStream, err) // removed meanwhile
	}
	if err != nil {
		return nil, storageError(err)
	}
	for router, next := range tables {
		_ = router.Update(func(*subject.Table) (*subject.Table, error) { return next, nil })
	}
	b.cfg.Logger.Info("subjects bound", "bindings", len(bindings))
	return b.Bindings(), nil
}

// Unbind removes the binding of pattern (ErrNoSuchBinding when there is
// none), once permit allows the stream it routes to, and returns every
// binding left.
func (b *Broker) Unbind(pattern string, permit Permit) ([]Binding, error) {
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	router := b.routerFor(pattern)
	table := router.Table()
	for _, existing := range table.Bindings() {
		if existing.Pattern == pattern {
			if err := permit.check(existing.Stream); err != nil {
				return nil, err
			}
		}
	}
	next, err := table.Unbind(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: no binding has pattern %q (ironbus stream ls)", ErrNoSuchBinding, pattern)
	}
	if err := b.catalog.Unbind(pattern); err != nil {
		return nil, storageError(err)
	}
	_ = router.Update(func(*subject.Table) (*subject.Table, error) { return next, nil })
	b.cfg.Logger.Info("subject unbound", "pattern", pattern)
	return b.Bindings(), nil
}

// StreamUsage is what one stream holds, for quotas: its owner, its
// partitions, and its bytes on disk with each partition's active segment
// counted at its preallocated size.
type StreamUsage struct {
	Name       string
	Owner      string
	Partitions int
	Bytes      int64
}

// Usage describes every stream's usage. It reads segment statistics and
// nothing else, so it costs far less than Streams.
func (b *Broker) Usage() []StreamUsage {
	preallocated := b.segmentSize()
	streams := b.streamList()
	usage := make([]StreamUsage, 0, len(streams))
	for _, served := range streams {
		entry := StreamUsage{Name: served.settings.Name, Owner: served.settings.Owner, Partitions: len(served.logs)}
		for _, l := range served.logs {
			entry.Bytes += preallocated // a partition that did not open is still on disk
			if l == nil {
				continue
			}
			for _, seg := range l.Segments() {
				if seg.Sealed {
					entry.Bytes += seg.Bytes
				}
			}
		}
		usage = append(usage, entry)
	}
	return usage
}

// PreallocatedBytes is what a new partition takes on disk before its
// first record: one segment.
func (b *Broker) PreallocatedBytes() int64 { return b.segmentSize() }
