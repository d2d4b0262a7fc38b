package replica

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Process handles one Ready: persists entries and state (syncing when
// Raft asks), sends messages in the order invariant 1 allows, applies
// committed entries and completes proposals. It returns ErrLatched after a
// storage failure and ErrDamaged when a committed entry is damaged.
func (r *Replica) Process() error {
	work, err := r.begin()
	if err != nil || work == nil {
		return err
	}
	var syncErr error
	if work.sync {
		syncErr = r.config.Journal.Sync()
	}
	return r.end(work, syncErr)
}

// readyWork is a Ready between begin, which writes it, and end, which
// runs once its journal is synced: a host syncs many replicas' journals
// at once between the two.
type readyWork struct {
	rd    raft.Ready
	early bool // the leader's appends already left
	sync  bool // the journal must be synced before end
}

// begin takes a Ready, sends what a leader may send before its sync, and
// writes the Ready's snapshot, entries and state to the journal. nil when
// there is nothing to do.
func (r *Replica) begin() (*readyWork, error) {
	if err := r.stopped(); err != nil {
		return nil, err
	}
	if !r.raw.HasReady() {
		return nil, nil
	}
	work := &readyWork{}
	if err := r.guard(func() error { work.rd = r.raw.Ready(); return nil }); err != nil {
		return nil, err
	}
	rd := work.rd
	// Every proposal made so far is in this Ready's entries, unless Raft
	// replaced it.
	proposed := len(r.pending)
	r.noteSoftState(rd.SoftState)
	work.early = r.role == RoleLeader && r.termAndVoteDurable(rd.HardState)
	if work.early {
		r.send(rd.Messages, leaderMessage)
	}
	if err := r.persist(rd, proposed); err != nil {
		return nil, r.latch(err)
	}
	work.sync = rd.MustSync || !raft.IsEmptySnap(rd.Snapshot) || len(rd.Entries) > 0
	return work, nil
}

// end finishes a Ready once its journal sync returned (syncErr): a failed
// sync latches the replica; otherwise the remaining messages leave,
// committed entries are applied and Raft is told the Ready is done.
func (r *Replica) end(work *readyWork, syncErr error) error {
	if syncErr != nil {
		return r.latch(syncErr)
	}
	if work.sync {
		r.durable = cloneState(r.state)
	}
	rd := work.rd
	if !raft.IsEmptySnap(rd.Snapshot) && r.config.Restore != nil {
		if err := r.config.Restore(cloneSnapshot(r.storage.snapshot)); err != nil {
			return r.latch(fmt.Errorf("replica: restore snapshot: %w", err))
		}
	}
	r.send(rd.Messages, func(m *pb.Message) bool { return !work.early || !leaderMessage(m) })
	if err := r.apply(rd.CommittedEntries); err != nil {
		return err
	}
	return r.guard(func() error { r.raw.Advance(rd); return nil })
}

// leaderMessage: the messages a leader whose term and vote are durable may
// send before its own entries are synced. None of them reports on the
// leader's log; its own match index advances only after the sync.
func leaderMessage(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap,
		pb.MessageType_MsgTimeoutNow:
		return true
	}
	return false
}

func (r *Replica) termAndVoteDurable(hard *pb.HardState) bool {
	if hard == nil {
		return true
	}
	return hard.GetTerm() == r.durable.Term && ReplicaID(hard.GetVote()) == r.durable.Vote
}

func (r *Replica) noteSoftState(soft *raft.SoftState) {
	if soft == nil {
		return
	}
	if ReplicaID(soft.Lead) != r.leader {
		r.leaderChanges++
	}
	r.leader = ReplicaID(soft.Lead)
	role := roleOf(soft.RaftState)
	if r.role == RoleLeader && role != RoleLeader {
		r.failPending(ErrIndeterminate)
		r.noteServing(0)
	}
	if (r.role == RoleLeader) != (role == RoleLeader) && r.config.OnLeading != nil {
		r.config.OnLeading(role == RoleLeader)
	}
	r.role = role
}

// noteServing tells the application the term this replica serves
// proposals in (0: none), when it changes.
func (r *Replica) noteServing(term uint64) {
	if term == r.servingTerm {
		return
	}
	r.servingTerm = term
	if r.config.OnServing != nil {
		r.config.OnServing(term)
	}
}

func roleOf(state raft.StateType) Role {
	switch state {
	case raft.StateLeader:
		return RoleLeader
	case raft.StateCandidate:
		return RoleCandidate
	case raft.StatePreCandidate:
		return RolePreCandidate
	}
	return RoleFollower
}

// persist writes a Ready's snapshot, entries and hard state; they are
// durable after the journal's next sync.
func (r *Replica) persist(rd raft.Ready, proposed int) error {
	journal := r.config.Journal
	var entries []Entry
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := r.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 {
		entries = make([]Entry, len(rd.Entries))
		for i, e := range rd.Entries {
			entries[i] = journalEntry(e)
		}
		if err := journal.Append(entries); err != nil {
			return err
		}
	}
	if r.role == RoleLeader || len(r.pending) > 0 {
		r.matchPending(entries, proposed)
	}
	if rd.HardState != nil {
		r.state.Term = rd.HardState.GetTerm()
		r.state.Vote = ReplicaID(rd.HardState.GetVote())
		r.state.Commit = rd.HardState.GetCommit()
		if r.state.Term != r.term {
			r.term = r.state.Term
		}
		if err := journal.SaveState(r.state); err != nil {
			return err
		}
	}
	return nil
}

func (r *Replica) installSnapshot(s *pb.Snapshot) error {
	next, data, err := decodeSnapshotData(s.GetData())
	if err != nil {
		return err
	}
	meta := s.GetMetadata()
	snapshot := Snapshot{Index: meta.GetIndex(), Term: meta.GetTerm(), Config: membership(meta.GetConfState()),
		NextOffset: next, Data: slices.Clone(data)}
	if err := r.config.Journal.InstallSnapshot(snapshot); err != nil {
		return err
	}
	r.storage.snapshot = snapshot
	r.state.Config, r.state.ConfigIndex = cloneMembership(snapshot.Config), snapshot.Index
	r.applied, r.watermark = snapshot.Index, snapshot.NextOffset
	return r.config.Journal.SaveState(r.state)
}

// matchPending gives the proposals written in this Ready their indexes.
// Raft copies a proposal's entry and appends entries of its own (a new
// leader's empty entry, leaving a joint configuration), so an entry is
// recognised by its Data, in proposal order: every proposal carries
// Data, and two data proposals never carry the same bytes (their offsets
// differ). A proposal made before this Ready that is not among its
// entries was replaced by Raft (a refused configuration change): it is
// not in the log.
func (r *Replica) matchPending(entries []Entry, proposed int) {
	next := 0
	for _, e := range entries {
		if len(e.Data) == 0 {
			continue
		}
		for k := next; k < proposed && k < len(r.pending); k++ {
			if p := r.pending[k]; p.Index == 0 && bytes.Equal(p.data, e.Data) {
				p.Index, p.data, next = e.Index, nil, k+1
				break
			}
		}
	}
	kept := r.pending[:0]
	for k, p := range r.pending {
		if p.Index == 0 && k < proposed {
			p.finish(ErrRefused)
			continue
		}
		kept = append(kept, p)
	}
	clear(r.pending[len(kept):])
	r.pending = kept
}

func (r *Replica) send(messages []*pb.Message, which func(*pb.Message) bool) {
	for _, m := range messages {
		if !which(m) || m.GetTo() == uint64(r.config.ID) {
			continue
		}
		bytes, err := proto.Marshal(m)
		if err != nil {
			r.config.Logger.Error("replica: marshal message", "error", err)
			continue
		}
		r.config.Send(ReplicaID(m.GetTo()), bytes)
		if m.GetType() == pb.MessageType_MsgSnap {
			// A snapshot here is a few bytes of metadata, sent whole in its
			// message: reporting it finished lets Raft probe the follower
			// again (and send it anew if the message was lost) instead of
			// waiting in snapshot state for an answer that may never come.
			r.raw.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// apply hands committed entries to the application, applies configuration
// changes, advances the watermark and completes proposals.
func (r *Replica) apply(committed []*pb.Entry) error {
	if len(committed) == 0 {
		return nil
	}
	entries := make([]Entry, len(committed))
	configChanged := false
	for i, e := range committed {
		entries[i] = journalEntry(e)
		if err := r.applyOne(entries[i]); err != nil {
			return r.markDamaged(err)
		}
		configChanged = configChanged || entries[i].Type == EntryConfChange
	}
	if err := r.config.Apply(entries); err != nil {
		return r.latch(fmt.Errorf("replica: apply: %w", err))
	}
	if configChanged {
		if err := r.config.Journal.SaveState(r.state); err != nil {
			return r.latch(err)
		}
	}
	for _, e := range entries {
		r.complete(e)
	}
	last := entries[len(entries)-1]
	r.applied, r.appliedTerm = last.Index, last.Term
	if r.role == RoleLeader && r.appliedTerm == r.raw.BasicStatus().GetTerm() {
		r.noteServing(r.appliedTerm)
	}
	return nil
}

func (r *Replica) applyOne(e Entry) error {
	if e.Type == EntryConfChange {
		var cc pb.ConfChangeV2
		if err := proto.Unmarshal(e.Data, &cc); err != nil {
			return fmt.Errorf("%w: configuration entry %d: %v", ErrDamaged, e.Index, err)
		}
		var cs *pb.ConfState
		if err := r.guard(func() error { cs = r.raw.ApplyConfChange(&cc); return nil }); err != nil {
			return err
		}
		r.state.Config, r.state.ConfigIndex = membership(cs), e.Index
		return nil
	}
	payload, err := DecodePayload(e.Data)
	if err != nil {
		return fmt.Errorf("%w: entry %d: %v", ErrDamaged, e.Index, err)
	}
	if payload.Kind != PayloadData {
		return nil
	}
	if payload.Data.BaseOffset != r.watermark {
		return fmt.Errorf("%w: data entry %d starts at offset %d, the log ends at %d",
			ErrDamaged, e.Index, payload.Data.BaseOffset, r.watermark)
	}
	r.watermark = payload.Data.BaseOffset + uint64(payload.Data.Count)
	return nil
}

func (r *Replica) complete(e Entry) {
	for len(r.pending) > 0 && r.pending[0].Index != 0 && r.pending[0].Index <= e.Index {
		p := r.pending[0]
		r.pending[0] = nil
		r.pending = r.pending[1:]
		switch {
		case p.Index < e.Index:
			p.finish(ErrIndeterminate)
		case p.Term == e.Term:
			p.finish(nil)
		default:
			p.finish(ErrRefused)
		}
	}
}

func (p *Proposal) finish(err error) {
	p.mu.Lock()
	if p.finished {
		p.mu.Unlock()
		return
	}
	p.err, p.finished = err, true
	notify := p.notify
	p.notify = nil
	close(p.done)
	p.mu.Unlock()
	for _, fn := range notify {
		fn()
	}
}

func (r *Replica) failPending(err error) {
	for _, p := range r.pending {
		p.finish(err)
	}
	r.pending = nil
}

// prepareLeader makes sure this replica leads, has applied its log up to
// its own term (ErrLeaderNotReady until then) and that its counters
// describe its whole log: the last data entry gives the next offset.
func (r *Replica) prepareLeader() error {
	if err := r.stopped(); err != nil {
		return err
	}
	status := r.raw.BasicStatus()
	if status.RaftState != raft.StateLeader {
		return &NotLeaderError{Leader: ReplicaID(status.Lead), Term: status.GetTerm()}
	}
	if r.counterTerm == status.GetTerm() {
		return nil
	}
	for r.raw.HasReady() {
		if err := r.Process(); err != nil {
			return err
		}
	}
	status = r.raw.BasicStatus()
	if status.RaftState != raft.StateLeader {
		return &NotLeaderError{Leader: ReplicaID(status.Lead), Term: status.GetTerm()}
	}
	if r.appliedTerm != status.GetTerm() {
		// Serving before the first entry of this term is applied would
		// check producers against state that misses committed records.
		return ErrLeaderNotReady
	}
	last := r.config.Journal.LastIndex()
	next, err := r.dataEndAtOrBefore(last)
	if err != nil {
		return r.markDamaged(err)
	}
	r.counterTerm, r.nextOffset = status.GetTerm(), next
	return nil
}

func (r *Replica) propose(kind pb.EntryType, data []byte) (*Proposal, error) {
	m := &pb.Message{Type: pb.MessageType_MsgProp.Enum(), From: proto.Uint64(uint64(r.config.ID)),
		Entries: []*pb.Entry{{Type: kind.Enum(), Data: data}}}
	if err := r.guard(func() error { return r.raw.Step(m) }); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			if r.leader == r.config.ID || r.leader == 0 {
				// Dropped by this leader itself (a leadership transfer
				// under way): no other node to send the caller to.
				return nil, ErrLeaderNotReady
			}
			return nil, &NotLeaderError{Leader: r.leader, Term: r.term}
		}
		return nil, err
	}
	p := &Proposal{Term: r.counterTerm, data: data, done: make(chan struct{})}
	r.pending = append(r.pending, p)
	return p, nil
}

// dataEndAtOrBefore is the offset after the last data entry at or below
// index: where the next data entry after index starts.
func (r *Replica) dataEndAtOrBefore(index uint64) (uint64, error) {
	journal := r.config.Journal
	first := journal.FirstIndex()
	const chunk = 64
	for hi := index + 1; hi > first; {
		lo := max(first, hi-min(hi, chunk))
		entries, err := journal.Entries(lo, hi, ^uint64(0))
		if err != nil {
			return 0, fmt.Errorf("replica: find the log's last data entry: %w", err)
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if entries[i].Type != EntryNormal {
				continue
			}
			payload, err := DecodePayload(entries[i].Data)
			if err != nil {
				return 0, fmt.Errorf("%w: entry %d: %v", ErrDamaged, entries[i].Index, err)
			}
			if payload.Kind == PayloadData {
				return payload.Data.BaseOffset + uint64(payload.Data.Count), nil
			}
		}
		hi = lo
	}
	return r.storage.snapshot.NextOffset, nil
}

// guard runs a RawNode call. Raft panics when its storage fails in a way it
// does not expect; the storage records a damaged entry before that, so a
// panic after damage becomes ErrDamaged. Any other panic is a bug and
// continues.
func (r *Replica) guard(call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if r.storage.damage == nil {
				panic(p)
			}
			err = r.markDamaged(r.storage.damage)
		}
		if err == nil && r.storage.damage != nil {
			err = r.markDamaged(r.storage.damage)
		}
	}()
	return call()
}

func (r *Replica) latch(err error) error {
	if r.latched == nil {
		r.noteServing(0)
		r.latched = fmt.Errorf("%w: %w", ErrLatched, err)
		r.config.Logger.Error("replica: storage failed; this replica stops", "group", r.config.Group, "error", err)
		r.failPending(ErrLatched)
	}
	return r.latched
}

func (r *Replica) markDamaged(err error) error {
	if r.damaged == nil {
		r.noteServing(0)
		if !errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		r.damaged = err
		r.config.Logger.Error("replica: damaged log; this replica stops voting and serving",
			"group", r.config.Group, "error", err)
		r.failPending(ErrIndeterminate)
	}
	return r.damaged
}

// Serving reports whether this replica leads and takes proposals, and in
// which term (0: it does not); the next data offset it would assign; and
// the watermark. A leader's first call in a term writes what Raft has
// pending, to learn its log's end.
func (r *Replica) Serving() (term, nextOffset, watermark uint64) {
	if r.stopped() != nil {
		return 0, 0, r.watermark
	}
	status := r.raw.BasicStatus()
	if status.RaftState != raft.StateLeader || r.appliedTerm != status.GetTerm() {
		return 0, 0, r.watermark
	}
	if r.counterTerm != status.GetTerm() {
		if err := r.prepareLeader(); err != nil {
			return 0, 0, r.watermark
		}
	}
	return r.counterTerm, r.nextOffset, r.watermark
}

// Status reports the replica's state.
func (r *Replica) Status() Status {
	s := Status{ID: r.config.ID, Group: r.config.Group, Role: r.role, Leader: r.leader, Term: r.term, LeaderChanges: r.leaderChanges,
		Applied: r.applied, LastIndex: r.config.Journal.LastIndex(), Watermark: r.watermark,
		Config: cloneMembership(r.state.Config), Latched: r.latched, Damaged: r.damaged}
	if r.stopped() != nil {
		// A stopped replica leads nothing, whatever role it had.
		s.Commit, s.Role, s.Leader = r.state.Commit, RoleFollower, 0
		return s
	}
	raw := r.raw.Status()
	s.Commit, s.Term, s.Leader, s.Role = raw.GetCommit(), raw.GetTerm(), ReplicaID(raw.Lead), roleOf(raw.RaftState)
	if len(raw.Progress) > 0 {
		s.Match = make(map[ReplicaID]uint64, len(raw.Progress))
		for id, pr := range raw.Progress {
			s.Match[ReplicaID(id)] = pr.Match
		}
	}
	return s
}

// raftLogger sends the library's log lines to slog; its fatal and panic
// lines panic, as the library expects.
type raftLogger struct{ log *slog.Logger }

func (l raftLogger) Debug(v ...any)                   { l.log.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any)   { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Info(v ...any)                    { l.log.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)    { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Warning(v ...any)                 { l.log.Warn(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l raftLogger) Error(v ...any)                   { l.log.Error(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any)   { l.log.Error(fmt.Sprintf(format, v...)) }
func (l raftLogger) Fatal(v ...any)                   { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }
func (l raftLogger) Panic(v ...any)                   { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }
