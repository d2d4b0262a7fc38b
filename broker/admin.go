package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// The admin verbs (GroupAdmin, DeadLetterAdmin). They touch checkpoint
// files and wait for durable appends, so each runs on a goroutine of its
// own rather than on the connection's reader, like a rejection does.

// adminRequest runs one admin request off the reader and sends its answer.
func (s *session) adminRequest(frame wire.Frame) error {
	if s.capabilities&wire.CapAdmin == 0 {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "%v is served only on connections with the admin capability", frame.Type))
		return nil
	}
	var serve func() wire.Message
	switch frame.Type {
	case wire.TypeGroupAdmin:
		m, err := wire.DecodeGroupAdmin(frame.Body)
		if err != nil {
			return s.malformed(frame, err)
		}
		if refused, err := s.refused(security.ScopeAdmin, m.Stream, frame.RequestID); refused {
			return err
		}
		s.auditAdmin("admin.group", fmt.Sprintf("op %d stream %q group %q", m.Op, m.Stream, m.Group))
		m.Stream, m.Group = clone(m.Stream), clone(m.Group) // the body goes back to the reader
		serve = func() wire.Message { return adminAnswer(s.broker.groupAdmin(m)) }
	default:
		m, err := wire.DecodeDeadLetterAdmin(frame.Body)
		if err != nil {
			return s.malformed(frame, err)
		}
		if refused, err := s.refused(security.ScopeAdmin, m.Stream, frame.RequestID); refused {
			return err
		}
		s.auditAdmin("admin.dlq", fmt.Sprintf("op %d stream %q", m.Op, m.Stream))
		m.Stream = clone(m.Stream)
		serve = func() wire.Message { return adminAnswer(s.broker.deadLetterAdmin(s, m)) }
	}
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		s.out.frame(wire.Append(nil, frame.RequestID, serve()))
	}()
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// adminAnswer returns the reply, or the error in its place.
func adminAnswer[M wire.Message](reply M, werr *wire.Error) wire.Message {
	if werr != nil {
		return werr
	}
	return reply
}

// groupAdmin serves one GroupAdmin request.
func (b *Broker) groupAdmin(m wire.GroupAdmin) (*wire.GroupList, *wire.Error) {
	if m.Op == wire.GroupOpList {
		return b.listGroups(m.Stream, m.Partition)
	}
	if m.Op > wire.GroupOpDelete {
		return nil, wire.NewError(wire.CodeInvalidRequest, "group admin op %d: the ops are list (0), info (1), reset (2) and delete (3)", m.Op)
	}
	l, werr := b.existingLog(m.Stream, m.Partition)
	if werr != nil {
		return nil, werr
	}
	key := groupKey{stream: string(m.Stream), partition: m.Partition, group: string(m.Group)}
	var summary consumer.Summary
	var err error
	switch m.Op {
	case wire.GroupOpInfo:
		summary, err = b.groupSummary(l, key)
	case wire.GroupOpReset:
		summary, err = b.resetGroup(l, key, startPosition(m.TargetKind, m.TargetValue))
	case wire.GroupOpDelete:
		summary, err = b.deleteGroup(l, key)
	}
	if err != nil {
		return nil, adminError(key, err)
	}
	return &wire.GroupList{Groups: []wire.GroupState{groupState(key.stream, key.partition, l, summary)}}, nil
}

// existingLog returns a stream partition's log without creating it: an
// admin request about a stream that does not exist is not_found.
func (b *Broker) existingLog(stream []byte, partition uint32) (*segment.Log, *wire.Error) {
	if source, ok := deadLetterSource(string(stream)); ok {
		return b.deadLetterReadLog(source, partition)
	}
	served, ok := b.existingStream(string(stream))
	if !ok {
		return nil, wire.NewError(wire.CodeNotFound, "stream %q does not exist", stream)
	}
	return served.log(stream, partition)
}

// listGroups lists the groups of one log, or of every stream's log when
// stream is empty.
func (b *Broker) listGroups(stream []byte, partition uint32) (*wire.GroupList, *wire.Error) {
	streams := []string{string(stream)}
	if len(stream) == 0 {
		streams = streams[:0]
		for _, served := range b.streamList() {
			streams = append(streams, served.settings.Name)
		}
	}
	list := &wire.GroupList{Groups: []wire.GroupState{}}
	for _, name := range streams {
		l, werr := b.existingLog([]byte(name), partition)
		if werr != nil {
			return nil, werr
		}
		summaries, err := consumer.Inspect(l)
		if err != nil {
			return nil, storageError(err)
		}
		for _, summary := range b.liveSummaries(name, partition, summaries) {
			list.Groups = append(list.Groups, groupState(name, partition, l, summary))
		}
	}
	return list, nil
}

// liveSummaries replaces the checkpointed summary of every group the
// broker has open with its live one, and adds open groups whose first
// checkpoint has not landed yet.
func (b *Broker) liveSummaries(stream string, partition uint32, summaries []consumer.Summary) []consumer.Summary {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	seen := map[string]bool{}
	for i, summary := range summaries {
		seen[summary.Name] = true
		if served := b.groups[groupKey{stream: stream, partition: partition, group: summary.Name}]; served != nil {
			summaries[i] = served.group.Summary()
		}
	}
	for key, served := range b.groups {
		if key.stream == stream && key.partition == partition && !seen[key.group] {
			summaries = append(summaries, served.group.Summary())
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(summaries, func(i, j int) bool { return summaries[i].Name < summaries[j].Name })
	return summaries
}

// groupSummary returns one group's live summary, or its checkpoint's.
func (b *Broker) groupSummary(l *segment.Log, key groupKey) (consumer.Summary, error) {
	if served := b.loadedGroup([]byte(key.stream), key.partition, []byte(key.group)); served != nil {
		return served.group.Summary(), nil
	}
	return consumer.InspectGroup(l, key.group)
}

// resetGroup moves a group's cursor, loading the group first (with the
// type its checkpoint records) when the broker does not have it open.
func (b *Broker) resetGroup(l *segment.Log, key groupKey, start consumer.StartPosition) (consumer.Summary, error) {
	served := b.loadedGroup([]byte(key.stream), key.partition, []byte(key.group))
	if served == nil {
		summary, err := consumer.InspectGroup(l, key.group)
		if err != nil {
			return summary, err
		}
		var werr *wire.Error
		if served, werr = b.openGroup([]byte(key.stream), key.partition, []byte(key.group), groupSpec{kind: summary.Type}); werr != nil {
			return summary, werr
		}
	}
	if err := served.group.Reset(start); err != nil {
		return consumer.Summary{}, err
	}
	served.wake.notify()
	return served.group.Summary(), nil
}

// deleteGroup removes a group and its checkpoint. groupsMu is held
// throughout, so no request can open the group between the check and the
// removal and find a half-deleted one.
func (b *Broker) deleteGroup(l *segment.Log, key groupKey) (consumer.Summary, error) {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	served := b.groups[key]
	if served == nil {
		summary, err := consumer.InspectGroup(l, key.group)
		if err != nil {
			return summary, err
		}
		return summary, consumer.DeleteGroup(l, key.group)
	}
	summary := served.group.Summary()
	if err := served.group.Delete(); err != nil {
		return summary, err
	}
	delete(b.groups, key)
	served.wake.notify()
	return summary, nil
}

// adminError maps what a group admin operation failed with.
func adminError(key groupKey, err error) *wire.Error {
	var werr *wire.Error
	switch {
	case errors.As(err, &werr):
		return werr
	case errors.Is(err, consumer.ErrNoGroup):
		return wire.NewError(wire.CodeNotFound, "stream %q partition %d has no group %q", key.stream, key.partition, key.group)
	case errors.Is(err, consumer.ErrGroupActive):
		return wire.NewError(wire.CodeGroupActive, "%v", err)
	case errors.Is(err, consumer.ErrInvalidName):
		return wire.NewError(wire.CodeInvalidName, "%v", err)
	}
	return consumerError(err)
}

func groupState(stream string, partition uint32, l *segment.Log, s consumer.Summary) wire.GroupState {
	return wire.GroupState{Stream: []byte(stream), Partition: partition, Group: []byte(s.Name), Mode: typeMode(s.Type),
		Committed: s.Committed, AckedAhead: s.AckedAhead, Unsettled: uint32(s.Unsettled), MostDeliveries: s.MostDeliveries,
		PendingMoves: uint32(s.PendingMoves), LogEnd: l.Committed(), Members: uint32(s.Members), Leased: uint32(s.Leased)}
}

// deadLetterAdmin serves one DeadLetterAdmin request.
func (b *Broker) deadLetterAdmin(s *session, m wire.DeadLetterAdmin) (*wire.DeadLetterState, *wire.Error) {
	switch m.Op {
	case wire.DeadLetterOpList:
		return b.listDeadLetters(string(m.Stream))
	case wire.DeadLetterOpRedrive:
		return b.redrive(s, string(m.Stream), int(m.Max))
	}
	return nil, wire.NewError(wire.CodeInvalidRequest, "dead-letter admin op %d: the ops are list (0) and redrive (1)", m.Op)
}

// listDeadLetters describes one stream's queue, or every queue the
// dead-letter directory holds when stream is empty.
func (b *Broker) listDeadLetters(stream string) (*wire.DeadLetterState, *wire.Error) {
	streams := []string{stream}
	if stream == "" {
		var err error
		if streams, err = b.deadLetterStreams(); err != nil {
			return nil, storageError(err)
		}
	} else if _, werr := b.existingLog([]byte(stream), 0); werr != nil {
		return nil, werr
	}
	state := &wire.DeadLetterState{Queues: []wire.DeadLetterQueue{}}
	for _, name := range streams {
		queue, err := b.deadLetterLog(name)
		if err != nil {
			return nil, storageError(err)
		}
		mark, err := consumer.RedriveMark(queue)
		if err != nil {
			return nil, storageError(err)
		}
		state.Queues = append(state.Queues, wire.DeadLetterQueue{Stream: []byte(name), First: queue.FirstOffset(),
			End: queue.Committed(), Redriven: mark})
	}
	return state, nil
}

// deadLetterStreams lists the streams with a queue on disk, without
// creating the dead-letter directory when there is none.
func (b *Broker) deadLetterStreams() ([]string, error) {
	if _, err := b.cfg.FS.Stat(path.Join(b.cfg.DataDir, deadLetterDirName)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	store := &b.deadLetters
	store.mu.Lock()
	dir := store.dir
	store.mu.Unlock()
	if dir == nil {
		return b.deadLetterStreamsOnDisk()
	}
	ids, err := dir.Logs()
	if err != nil {
		return nil, err
	}
	streams := make([]string, 0, len(ids))
	for _, id := range ids {
		streams = append(streams, id.Stream)
	}
	return streams, nil
}

// deadLetterStreamsOnDisk lists the queues of a dead-letter directory this
// broker has not opened yet (queues left by an earlier run): each stream
// is a directory under streams/.
func (b *Broker) deadLetterStreamsOnDisk() ([]string, error) {
	names, err := b.cfg.FS.List(path.Join(b.cfg.DataDir, deadLetterDirName, "streams"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return names, err
}

// redrive republishes a stream's dead letters (consumer.Redrive). Redrives
// run one at a time: two at once would read the same mark and both
// republish.
func (b *Broker) redrive(s *session, stream string, maxLetters int) (*wire.DeadLetterState, *wire.Error) {
	if stream == "" {
		return nil, wire.NewError(wire.CodeInvalidRequest, "a redrive names its stream")
	}
	if _, werr := b.existingLog([]byte(stream), 0); werr != nil || strings.HasPrefix(stream, ".") {
		return nil, wire.NewError(wire.CodeNotFound, "stream %q does not exist, so it has no dead letters to redrive", stream)
	}
	queue, err := b.deadLetterLog(stream)
	if err != nil {
		return nil, storageError(err)
	}
	target := func(partition uint32) (*segment.Log, error) {
		l, werr := b.logFor([]byte(stream), partition)
		if werr != nil {
			return nil, werr
		}
		return l, nil
	}
	// Republished letters are new records: a used-up budget refuses the
	// redrive before it starts (what one redrive adds is not known ahead).
	if err := b.admitRecords(0, false); err != nil {
		return nil, storageError(err)
	}
	b.redriveMu.Lock()
	result, err := consumer.Redrive(s.ctx, queue, target, maxLetters)
	b.redriveMu.Unlock()
	if err != nil {
		var werr *wire.Error
		if errors.As(err, &werr) {
			return nil, werr
		}
		return nil, storageError(err)
	}
	b.cfg.Logger.Info("dead letters redriven", "stream", stream, "republished", result.Republished, "skipped", result.Skipped, "mark", result.Mark)
	return &wire.DeadLetterState{Republished: result.Republished, Skipped: result.Skipped,
		Queues: []wire.DeadLetterQueue{{Stream: []byte(stream), First: queue.FirstOffset(), End: queue.Committed(), Redriven: result.Mark}}}, nil
}
