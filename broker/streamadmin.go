package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
	"github.com/ironbus/ironbus/wire"
)

// streamAdminRequest serves StreamAdmin (admin and streams capabilities,
// admin scope). Changes are answered once durable, off the reading
// goroutine.
func (s *session) streamAdminRequest(frame wire.Frame) error {
	if s.capabilities&wire.CapAdmin == 0 || s.capabilities&wire.CapStreams == 0 {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "StreamAdmin is served only on connections with the admin and streams capabilities"))
		return nil
	}
	m, err := wire.DecodeStreamAdmin(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if refused, err := s.refused(security.ScopeAdmin, m.Stream, frame.RequestID); refused {
		return err
	}
	s.auditAdmin("admin.stream", fmt.Sprintf("op %d stream %q pattern %q", m.Op, m.Stream, m.Pattern))
	m.Stream, m.Pattern = clone(m.Stream), clone(m.Pattern) // the body goes back to the reader
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		s.out.frame(wire.Append(nil, frame.RequestID, adminAnswer(s.broker.streamAdmin(s.ctx, m))))
	}()
	return nil
}

// streamAdmin serves one StreamAdmin request.
func (b *Broker) streamAdmin(ctx context.Context, m wire.StreamAdmin) (*wire.StreamList, *wire.Error) {
	name := string(m.Stream)
	force := m.Flags&wire.StreamForce != 0
	switch m.Op {
	case wire.StreamOpList:
		return b.listStreams(), nil
	case wire.StreamOpInfo:
		return b.streamInfo(name)
	case wire.StreamOpCreate:
		settings := catalog.Stream{Name: name, Partitions: max(m.Partitions, 1), MaxBytes: m.MaxBytes,
			MaxAge: time.Duration(min(m.MaxAgeMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond, MaxRecords: m.MaxRecords}
		if _, werr := b.createStream(settings, true); werr != nil {
			return nil, werr
		}
		return b.streamInfo(name)
	case wire.StreamOpPurge, wire.StreamOpRemove:
		if !force {
			return nil, wire.NewError(wire.CodeInvalidRequest, "%s drops every record of stream %q: it needs the force flag (ironbus stream %s --force)",
				opName(m.Op), name, opName(m.Op))
		}
		if m.Op == wire.StreamOpPurge {
			return b.purgeStream(ctx, name)
		}
		return b.removeStream(name)
	case wire.StreamOpBind:
		return b.bind(string(m.Pattern), name)
	case wire.StreamOpUnbind:
		return b.unbind(string(m.Pattern))
	}
	return nil, wire.NewError(wire.CodeInvalidRequest, "stream admin op %d: the ops are list (0), info (1), create (2), purge (3), remove (4), bind (5) and unbind (6)", m.Op)
}

func opName(op uint8) string {
	if op == wire.StreamOpPurge {
		return "purge"
	}
	return "rm"
}

func (b *Broker) listStreams() *wire.StreamList {
	list := &wire.StreamList{Streams: []wire.StreamState{}, Bindings: []wire.StreamBinding{}}
	for _, served := range b.streamList() {
		list.Streams = append(list.Streams, b.streamState(served))
	}
	list.Bindings = wireBindings(b.catalog.Catalog().Bindings)
	return list
}

func (b *Broker) streamInfo(name string) (*wire.StreamList, *wire.Error) {
	served, ok := b.existingStream(name)
	if !ok {
		return nil, streamNotFound(name)
	}
	return &wire.StreamList{Streams: []wire.StreamState{b.streamState(served)},
		Bindings: wireBindings(b.catalog.Catalog().BindingsOf(name))}, nil
}

func streamNotFound(name string) *wire.Error {
	if err := segment.ValidateStreamName(name); err != nil {
		return wire.NewError(wire.CodeInvalidName, "%v", err)
	}
	return wire.NewError(wire.CodeNotFound, "stream %q does not exist (ironbus stream ls)", name)
}

func wireBindings(bindings []catalog.Binding) []wire.StreamBinding {
	out := make([]wire.StreamBinding, 0, len(bindings))
	for _, binding := range bindings {
		out = append(out, wire.StreamBinding{Pattern: []byte(binding.Pattern), Stream: []byte(binding.Stream)})
	}
	return out
}

// streamState describes a stream: its settings and, per partition, the
// offsets it holds and its bytes on disk.
func (b *Broker) streamState(served *servedStream) wire.StreamState {
	s := served.settings
	state := wire.StreamState{Name: []byte(s.Name), MaxBytes: s.MaxBytes, MaxAgeMs: uint64(s.MaxAge.Milliseconds()),
		MaxRecords: s.MaxRecords, Partitions: make([]wire.StreamPartition, len(served.logs))}
	if !s.Created.IsZero() {
		state.CreatedMs = uint64(s.Created.UnixMilli())
	}
	groups := map[string]bool{}
	for p, l := range served.logs {
		if l == nil {
			continue
		}
		part := wire.StreamPartition{First: l.FirstOffset(), End: l.Committed()}
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
	state.Groups = uint32(len(groups))
	return state
}

// purgeStream drops every record of every partition: the active segment
// is sealed, then every segment below the seal point is deleted, so the
// first offset becomes the committed end. Offsets keep rising; groups
// below it see a retention gap. Records published during the purge may
// stay.
func (b *Broker) purgeStream(ctx context.Context, name string) (*wire.StreamList, *wire.Error) {
	served, ok := b.existingStream(name)
	if !ok {
		return nil, streamNotFound(name)
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
			_, err = l.DeleteBefore(end)
		}
		if err != nil {
			return nil, storageError(fmt.Errorf("purging %s/%d: %w", name, p, err))
		}
	}
	b.cfg.Logger.Warn("stream purged", "stream", name, "partitions", len(served.logs))
	return b.streamInfo(name)
}

// removeStream deletes a stream: its partitions with their groups and
// checkpoints, its dead-letter queue and its bindings. Refused while a
// group has live members. It follows the crash protocol of package
// datadir: the files are renamed out of the scan (the commit point)
// before the catalog forgets the stream, and deleted last, so a crash
// never brings a removed stream back.
func (b *Broker) removeStream(name string) (*wire.StreamList, *wire.Error) {
	before, partitions, aside, werr := b.forgetStream(name)
	if werr != nil {
		return nil, werr
	}
	b.removeDeadLetters(name)
	if err := b.catalog.FinishRemoval(name, aside); err != nil {
		b.cfg.Logger.Error("the files of a removed stream were not all deleted; the next boot retries", "stream", name, "error", err.Error())
	}
	b.cfg.Logger.Warn("stream removed", "stream", name, "partitions", partitions)
	return before, nil
}

// forgetStream closes a stream's groups and logs, commits its removal
// (datadir.Streams.Remove: files out of the scan, then the catalog) and
// drops it from the router, all under logsMu: a publish that recreates
// the name meanwhile waits, then starts an empty stream in a fresh
// directory. It returns the stream as it was and where its files went.
// When the removal does not commit, the stream's logs are reopened and it
// stays.
func (b *Broker) forgetStream(name string) (*wire.StreamList, int, string, *wire.Error) {
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	b.logsMu.Lock()
	defer b.logsMu.Unlock()
	served, ok := b.streams[name]
	if !ok {
		return nil, 0, "", streamNotFound(name)
	}
	if werr := b.closeStreamGroups(name); werr != nil {
		return nil, 0, "", werr
	}
	before := &wire.StreamList{Streams: []wire.StreamState{b.streamState(served)},
		Bindings: wireBindings(b.catalog.Catalog().BindingsOf(name))}
	// The logs close before their directory is renamed.
	for _, l := range served.logs {
		if l != nil {
			_ = l.Close()
		}
	}
	aside, err := b.catalog.Remove(name)
	if err != nil && aside == "" {
		reopened := &servedStream{settings: served.settings, logs: make([]*segment.Log, len(served.logs))}
		for p := range reopened.logs {
			reopened.logs[p], _ = b.dir.OpenLog(segment.LogID{Stream: name, Partition: uint32(p)})
		}
		b.streams[name] = reopened
		return nil, 0, "", storageError(err)
	}
	if err != nil {
		b.cfg.Logger.Error("a removed stream is still in the catalog; the next boot forgets it", "stream", name, "error", err.Error())
	}
	_ = b.router.Update(func(t *subject.Table) (*subject.Table, error) {
		for _, binding := range t.Bindings() {
			if binding.Stream == name {
				t, _ = t.Unbind(binding.Pattern)
			}
		}
		return t, nil
	})
	delete(b.streams, name)
	b.openLogs -= len(served.logs)
	return before, len(served.logs), aside, nil
}

// closeStreamGroups refuses while a group of the stream (or of its
// dead-letter queue) has live members, and otherwise closes them all.
// REQUIRES: logsMu held.
func (b *Broker) closeStreamGroups(name string) *wire.Error {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	dlq := deadLetterPrefix + name
	for key, served := range b.groups {
		if (key.stream == name || key.stream == dlq) && served.group.Stats().Members > 0 {
			return wire.NewError(wire.CodeGroupActive, "stream %q partition %d group %q has %d live member(s); stop its consumers first",
				name, key.partition, key.group, served.group.Stats().Members)
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

// bind routes subjects matching pattern to stream. The pattern is
// checked, then the binding is refused with conflict when some subject
// could match it and a binding to another stream; the catalog is written
// before the router changes and before the answer.
func (b *Broker) bind(pattern, stream string) (*wire.StreamList, *wire.Error) {
	if err := subject.ValidatePattern([]byte(pattern)); err != nil {
		return nil, wire.NewError(wire.CodeInvalidName, "%v", err)
	}
	if _, ok := b.existingStream(stream); !ok {
		return nil, streamNotFound(stream)
	}
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	next, err := b.router.Table().Bind(pattern, stream)
	var ambiguous *subject.AmbiguousError
	switch {
	case errors.As(err, &ambiguous):
		return nil, wire.NewError(wire.CodeConflict, "pattern %q overlaps the binding of %q to stream %q: some subject would match both (ironbus stream unbind %s first, or pick a narrower pattern)",
			pattern, ambiguous.Existing.Pattern, ambiguous.Existing.Stream, ambiguous.Existing.Pattern)
	case err != nil:
		return nil, wire.NewError(wire.CodeInvalidRequest, "%v", err)
	}
	err = b.catalog.Bind(pattern, stream)
	if errors.Is(err, datadir.ErrNoSuchStream) {
		return nil, streamNotFound(stream) // removed meanwhile
	}
	if err != nil {
		return nil, storageError(err)
	}
	_ = b.router.Update(func(*subject.Table) (*subject.Table, error) { return next, nil })
	b.cfg.Logger.Info("subject bound", "pattern", pattern, "stream", stream)
	return b.listBindings(), nil
}

// unbind removes the binding of pattern: not_found when there is none.
func (b *Broker) unbind(pattern string) (*wire.StreamList, *wire.Error) {
	b.bindMu.Lock()
	defer b.bindMu.Unlock()
	next, err := b.router.Table().Unbind(pattern)
	if err != nil {
		return nil, wire.NewError(wire.CodeNotFound, "no binding has pattern %q (ironbus stream ls)", pattern)
	}
	if err := b.catalog.Unbind(pattern); err != nil {
		return nil, storageError(err)
	}
	_ = b.router.Update(func(*subject.Table) (*subject.Table, error) { return next, nil })
	b.cfg.Logger.Info("subject unbound", "pattern", pattern)
	return b.listBindings(), nil
}

func (b *Broker) listBindings() *wire.StreamList {
	return &wire.StreamList{Streams: []wire.StreamState{}, Bindings: wireBindings(b.catalog.Catalog().Bindings)}
}
