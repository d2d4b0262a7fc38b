package session

import (
	"context"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// The admin verbs (GroupAdmin, DeadLetterAdmin, StreamAdmin). They touch
// checkpoint files and wait for durable appends, so each runs on a
// goroutine of its own rather than on the connection's reader, like a
// rejection does.

// adminRequest runs one group or dead-letter admin request off the reader
// and sends its answer.
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
		identity, refused, err := s.admitAdmin(m.Stream, m.Op == wire.GroupOpList && len(m.Stream) == 0, frame.RequestID)
		if refused {
			return err
		}
		if (m.Op == wire.GroupOpReset || m.Op == wire.GroupOpDelete) && s.groupRefused(security.GroupReset, m.Stream, m.Group, frame.RequestID) {
			return nil
		}
		s.auditAdmin("admin.group", fmt.Sprintf("op %d stream %q group %q", m.Op, m.Stream, m.Group))
		if m.Stream, err = s.engineName(m.Stream, frame.RequestID); err != nil {
			return nil
		}
		m.Stream, m.Group = clone(m.Stream), clone(m.Group) // the body goes back to the reader
		serve = func() wire.Message { return adminAnswer(s.groupAdmin(m, identity)) }
	default:
		m, err := wire.DecodeDeadLetterAdmin(frame.Body)
		if err != nil {
			return s.malformed(frame, err)
		}
		identity, refused, err := s.admitAdmin(m.Stream, m.Op == wire.DeadLetterOpList && len(m.Stream) == 0, frame.RequestID)
		if refused {
			return err
		}
		// A redrive reads the queue and writes the stream: it needs
		// admin on both names.
		if m.Op == wire.DeadLetterOpRedrive && len(m.Stream) > 0 {
			if refused, err := s.refused(security.ScopeAdmin, []byte(deadLetterName(m.Stream)), frame.RequestID); refused {
				return err
			}
		}
		s.auditAdmin("admin.dlq", fmt.Sprintf("op %d stream %q", m.Op, m.Stream))
		if m.Stream, err = s.engineName(m.Stream, frame.RequestID); err != nil {
			return nil
		}
		m.Stream = clone(m.Stream)
		serve = func() wire.Message { return adminAnswer(s.deadLetterAdmin(m, identity)) }
	}
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		s.out.frame(wire.Append(nil, frame.RequestID, s.hideMessage(serve())))
	}()
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// deadLetterName is the name a stream's dead-letter queue is read by.
func deadLetterName(stream []byte) string { return ".dlq." + string(stream) }

// admitAdmin checks an admin request against the scope: on the stream it
// names, or, for a broker-wide list, only that the identity still exists
// (the list then shows what the scope covers). It returns the identity
// the request's streams are checked against (nil: no auth).
func (s *session) admitAdmin(stream []byte, list bool, requestID uint32) (*security.Identity, bool, error) {
	if list {
		return s.admitRequester(security.ScopeAdmin, requestID)
	}
	if refused, err := s.refused(security.ScopeAdmin, stream, requestID); refused {
		return nil, true, err
	}
	identity, _ := s.requester(security.ScopeAdmin)
	return identity, false, nil
}

// adminAnswer returns the reply, or the error in its place.
func adminAnswer[M wire.Message](reply M, err error) wire.Message {
	if err != nil {
		return wireError(err)
	}
	return reply
}

// groupAdmin serves one GroupAdmin request.
func (s *session) groupAdmin(m wire.GroupAdmin, identity *security.Identity) (*wire.GroupList, error) {
	stream, group := string(m.Stream), string(m.Group)
	var states []broker.GroupState
	var state broker.GroupState
	var err error
	switch m.Op {
	case wire.GroupOpList:
		states, err = s.engine.ListGroups(stream, m.Partition)
	case wire.GroupOpInfo:
		state, err = s.engine.GroupInfo(stream, m.Partition, group)
		states = []broker.GroupState{state}
	case wire.GroupOpReset:
		state, err = s.engine.ResetGroup(stream, m.Partition, group, startPosition(m.TargetKind, m.TargetValue))
		states = []broker.GroupState{state}
		s.auditOutcome(identity, "group.reset", err, fmt.Sprintf("stream %q partition %d group %q to %d/%d", stream, m.Partition, group, m.TargetKind, m.TargetValue))
	case wire.GroupOpDelete:
		state, err = s.engine.DeleteGroup(stream, m.Partition, group)
		states = []broker.GroupState{state}
		s.auditOutcome(identity, "group.delete", err, fmt.Sprintf("stream %q partition %d group %q", stream, m.Partition, group))
	default:
		return nil, wire.NewError(wire.CodeInvalidRequest, "group admin op %d: the ops are list (0), info (1), reset (2) and delete (3)", m.Op)
	}
	if err != nil {
		return nil, err
	}
	list := &wire.GroupList{Groups: make([]wire.GroupState, 0, len(states))}
	for _, state := range states {
		var own bool
		if state.Stream, own = s.names.External(state.Stream); own && sees(identity, security.ScopeAdmin, state.Stream) {
			list.Groups = append(list.Groups, groupState(state))
		}
	}
	return list, nil
}

func groupState(g broker.GroupState) wire.GroupState {
	s := g.Summary
	return wire.GroupState{Stream: []byte(g.Stream), Partition: g.Partition, Group: []byte(s.Name), Mode: typeMode(s.Type),
		Committed: s.Committed, AckedAhead: s.AckedAhead, Unsettled: uint32(s.Unsettled), MostDeliveries: s.MostDeliveries,
		PendingMoves: uint32(s.PendingMoves), LogEnd: g.LogEnd, Members: uint32(s.Members), Leased: uint32(s.Leased)}
}

// deadLetterAdmin serves one DeadLetterAdmin request.
func (s *session) deadLetterAdmin(m wire.DeadLetterAdmin, identity *security.Identity) (*wire.DeadLetterState, error) {
	switch m.Op {
	case wire.DeadLetterOpList:
		queues, err := s.engine.DeadLetterQueues(string(m.Stream))
		if err != nil {
			return nil, err
		}
		state := &wire.DeadLetterState{Queues: make([]wire.DeadLetterQueue, 0, len(queues))}
		for _, queue := range queues {
			var own bool
			if queue.Stream, own = s.names.External(queue.Stream); own && sees(identity, security.ScopeAdmin, queue.Stream) {
				state.Queues = append(state.Queues, deadLetterQueue(queue))
			}
		}
		return state, nil
	case wire.DeadLetterOpRedrive:
		result, queue, err := s.engine.Redrive(s.ctx, string(m.Stream), int(m.Max))
		s.auditOutcome(identity, "dlq.redrive", err, fmt.Sprintf("stream %q republished %d skipped %d", m.Stream, result.Republished, result.Skipped))
		if err != nil {
			return nil, err
		}
		queue.Stream, _ = s.names.External(queue.Stream)
		return &wire.DeadLetterState{Republished: result.Republished, Skipped: result.Skipped,
			Queues: []wire.DeadLetterQueue{deadLetterQueue(queue)}}, nil
	}
	return nil, wire.NewError(wire.CodeInvalidRequest, "dead-letter admin op %d: the ops are list (0) and redrive (1)", m.Op)
}

func deadLetterQueue(q broker.DeadLetterQueue) wire.DeadLetterQueue {
	return wire.DeadLetterQueue{Stream: []byte(q.Stream), First: q.First, End: q.End, Redriven: q.Redriven}
}

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
	// A list shows what the scope covers; an unbind is checked against
	// the stream its binding routes to, whatever stream the request names.
	identity, refused, err := s.admitAdmin(m.Stream, m.Op == wire.StreamOpList || m.Op == wire.StreamOpUnbind, frame.RequestID)
	if refused {
		return err
	}
	s.auditAdmin("admin.stream", fmt.Sprintf("op %d stream %q pattern %q", m.Op, m.Stream, m.Pattern))
	if m.Stream, err = s.engineName(m.Stream, frame.RequestID); err != nil {
		return nil
	}
	if len(m.Pattern) > 0 {
		pattern, err := s.names.AppendSubject(nil, m.Pattern)
		if err != nil {
			s.reply(frame.RequestID, foreignName(err))
			return nil
		}
		m.Pattern = pattern
		if m.Op == wire.StreamOpBind && !security.SameAccount(string(m.Pattern), string(m.Stream)) {
			s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "a binding routes one account's subjects to a stream of the same account"))
			return nil
		}
	}
	m.Stream, m.Pattern = clone(m.Stream), clone(m.Pattern) // the body goes back to the reader
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		var answer wire.Message
		if m.Op == wire.StreamOpCompact {
			answer = adminAnswer(s.compactStream(s.ctx, string(m.Stream)))
		} else {
			answer = adminAnswer(s.withSettings(s.streamAdmin(s.ctx, m, identity)))
		}
		s.out.frame(wire.Append(nil, frame.RequestID, s.hideMessage(answer)))
	}()
	return nil
}

// streamAdmin serves one StreamAdmin request.
func (s *session) streamAdmin(ctx context.Context, m wire.StreamAdmin, identity *security.Identity) (*wire.StreamList, error) {
	name := string(m.Stream)
	force := m.Flags&wire.StreamForce != 0
	switch m.Op {
	case wire.StreamOpList:
		return visibleList(identity, s.ownStreams(s.engine.Streams()), s.ownBindings(s.engine.Bindings())), nil
	case wire.StreamOpInfo:
		return s.describedStream(s.engine.DescribeStream(name))
	case wire.StreamOpCreate:
		unlock, werr := s.creationRefused(identity, m.Stream, m.Partitions)
		if werr != nil {
			return nil, werr
		}
		defer unlock()
		if m.Settings&wire.StreamReplicated != 0 && m.Replicas > 1 {
			return s.createReplicated(ctx, m)
		}
		settings := broker.StreamSettings{Name: name, Partitions: m.Partitions, MaxBytes: m.MaxBytes, Owner: identityName(identity),
			MaxAge: durationMs(m.MaxAgeMs), MaxRecords: m.MaxRecords, DedupWindow: dedupWindow(m),
			Compact: m.Settings&wire.StreamCompact != 0, DeleteRetention: durationMs(m.DeleteRetentionMs),
			CompactPastGroups: m.Settings&wire.StreamCompactPastGroups != 0}
		return s.describedStream(s.engine.CreateStream(settings))
	case wire.StreamOpPurge, wire.StreamOpRemove:
		if !force {
			return nil, wire.NewError(wire.CodeInvalidRequest, "%s drops every record of stream %q: it needs the force flag (ironbus stream %s --force)",
				opName(m.Op), name, opName(m.Op))
		}
		if m.Op == wire.StreamOpPurge {
			return s.describedStream(s.engine.PurgeStream(ctx, name))
		}
		return s.describedStream(s.engine.RemoveStream(name))
	case wire.StreamOpBind:
		change := &rebinding{session: s, identity: identity}
		bindings, err := change.audited(s.engine.Bind(string(m.Pattern), name, change.permit()))
		return boundList(identity, s.ownBindings(bindings), err)
	case wire.StreamOpUnbind:
		change := &rebinding{session: s, identity: identity}
		bindings, err := change.audited(s.engine.Unbind(string(m.Pattern), change.permit()))
		return boundList(identity, s.ownBindings(bindings), err)
	}
	return nil, wire.NewError(wire.CodeInvalidRequest, "stream admin op %d: the ops are list (0), info (1), create (2), purge (3), remove (4), bind (5), unbind (6) and compact (7)", m.Op)
}

// createReplicated serves a create asking for replicas: through the
// cluster's metadata group, which places the partitions. Retention,
// dedup and compaction settings are the defaults on replicated streams.
func (s *session) createReplicated(ctx context.Context, m wire.StreamAdmin) (*wire.StreamList, error) {
	name := string(m.Stream)
	switch {
	case s.cfg.Cluster == nil:
		return nil, wire.NewError(wire.CodeInvalidRequest, "stream %q asks for %d replicas, but this broker is a single node: start it with --node-id and --peer", name, m.Replicas)
	case m.MaxBytes != 0 || m.MaxAgeMs != 0 || m.MaxRecords != 0 || m.Settings&^wire.StreamReplicated != 0:
		return nil, wire.NewError(wire.CodeInvalidRequest, "stream %q: retention bounds, dedup windows and compaction are not served on replicated streams yet; create it without them", name)
	}
	if err := s.cfg.Cluster.CreateStream(ctx, name, max(m.Partitions, 1), int(m.Replicas)); err != nil {
		return nil, err
	}
	return s.describedStream(s.engine.DescribeStream(name))
}

// durationMs is a wire duration in milliseconds, capped where a
// time.Duration ends.
func durationMs(ms uint64) time.Duration {
	return time.Duration(min(ms, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
}

// compactStream serves a StreamAdmin compact.
func (s *session) compactStream(ctx context.Context, name string) (*wire.StreamCompacted, error) {
	results, err := s.engine.CompactStream(ctx, name)
	if err != nil {
		return nil, err
	}
	answer := &wire.StreamCompacted{Stream: []byte(name), Partitions: make([]wire.CompactedPartition, len(results))}
	for p, r := range results {
		answer.Partitions[p] = wire.CompactedPartition{RecordsRemoved: r.RecordsRemoved, TombstonesRemoved: r.TombstonesRemoved,
			RecordsKept: r.RecordsKept, BytesBefore: uint64(max(r.BytesBefore, 0)), BytesAfter: uint64(max(r.BytesAfter, 0)),
			Segments: uint32(r.SegmentsRewritten), Passes: uint32(r.Passes)}
	}
	return answer, nil
}

// dedupWindow is the message-id window a create asks for, as the engine
// takes it: zero for the default, negative for off.
func dedupWindow(m wire.StreamAdmin) time.Duration {
	switch {
	case m.Settings&wire.StreamDedupWindowSet == 0:
		return 0
	case m.DedupWindowMs == 0:
		return -1
	}
	return time.Duration(min(m.DedupWindowMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
}

// withSettings answers the extended StreamList, with each stream's
// settings, to a connection that negotiated the producers capability.
func (s *session) withSettings(list *wire.StreamList, err error) (*wire.StreamList, error) {
	if list != nil && s.capabilities&wire.CapProducers != 0 {
		list.Extended = true
	}
	if list != nil && s.capabilities&wire.CapCluster == 0 {
		// Only a client with the cluster capability reads the replicas
		// byte the replicated bit announces.
		for i := range list.Streams {
			list.Streams[i].Settings &^= wire.StreamReplicated
			list.Streams[i].Replicas = 0
		}
	}
	return list, err
}

func opName(op uint8) string {
	if op == wire.StreamOpPurge {
		return "purge"
	}
	return "rm"
}

func (s *session) describedStream(info broker.StreamInfo, bindings []broker.Binding, err error) (*wire.StreamList, error) {
	if err != nil {
		return nil, err
	}
	return streamList(s.ownStreams([]broker.StreamInfo{info}), s.ownBindings(bindings)), nil
}

func boundList(identity *security.Identity, bindings []broker.Binding, err error) (*wire.StreamList, error) {
	if err != nil {
		return nil, err
	}
	return visibleList(identity, nil, bindings), nil
}

// visibleList lists the streams identity holds admin on and the bindings
// routing to them (everything without auth).
func visibleList(identity *security.Identity, streams []broker.StreamInfo, bindings []broker.Binding) *wire.StreamList {
	if identity == nil {
		return streamList(streams, bindings)
	}
	seen := make([]broker.StreamInfo, 0, len(streams))
	for _, info := range streams {
		if identity.Allowed(security.ScopeAdmin, info.Name) {
			seen = append(seen, info)
		}
	}
	routes := make([]broker.Binding, 0, len(bindings))
	for _, binding := range bindings {
		if identity.Allowed(security.ScopeAdmin, binding.Stream) {
			routes = append(routes, binding)
		}
	}
	return streamList(seen, routes)
}

func streamList(streams []broker.StreamInfo, bindings []broker.Binding) *wire.StreamList {
	list := &wire.StreamList{Streams: make([]wire.StreamState, 0, len(streams)), Bindings: make([]wire.StreamBinding, 0, len(bindings))}
	for _, info := range streams {
		list.Streams = append(list.Streams, streamState(info))
	}
	for _, binding := range bindings {
		list.Bindings = append(list.Bindings, wire.StreamBinding{Pattern: []byte(binding.Pattern), Stream: []byte(binding.Stream)})
	}
	return list
}

func streamState(info broker.StreamInfo) wire.StreamState {
	state := wire.StreamState{Name: []byte(info.Name), MaxBytes: info.MaxBytes, MaxAgeMs: uint64(info.MaxAge.Milliseconds()),
		MaxRecords: info.MaxRecords, Groups: uint32(info.Groups), Partitions: make([]wire.StreamPartition, len(info.Partitions)),
		DedupWindowMs: uint64(info.DedupWindow.Milliseconds())}
	if info.Compact {
		state.Settings |= wire.StreamCompact
		state.DeleteRetentionMs = uint64(info.DeleteRetention.Milliseconds())
	}
	if info.Replicas > 1 {
		state.Settings |= wire.StreamReplicated
		state.Replicas = uint8(info.Replicas)
	}
	if info.CompactPastGroups {
		state.Settings |= wire.StreamCompactPastGroups
	}
	if !info.Created.IsZero() {
		state.CreatedMs = uint64(info.Created.UnixMilli())
	}
	for p, part := range info.Partitions {
		state.Partitions[p] = wire.StreamPartition{First: part.First, End: part.End, Bytes: part.Bytes}
	}
	return state
}
