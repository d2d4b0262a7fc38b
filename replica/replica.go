package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/ironbus/ironbus/record"
)

// Config builds a Replica. Every field but the tunables is required.
type Config struct {
	ID      ReplicaID
	Group   GroupID
	Journal Journal
	// Send hands one marshaled Raft message to the transport for the
	// replica named. It must not block and must not keep message past the
	// call unless it copies it; delivery may fail silently (Raft retries).
	Send func(to ReplicaID, message []byte)
	// Apply receives committed entries in index order, exactly once per
	// process lifetime from Config's restart point on. It runs on the
	// goroutine that calls Process.
	Apply func(entries []Entry) error
	// OnServing, when set, hears the term in which this replica starts
	// taking proposals (it leads and has applied its term's first entry)
	// and 0 when it stops (it lost the leadership, latched, was damaged
	// or closed). On the goroutine that drives the replica; it must not
	// call the replica.
	OnServing func(term uint64)
	// OnLeading, when set, hears whether this replica leads, as soon as
	// it wins an election (before it serves) and when it stops leading.
	// Same goroutine and rules as OnServing.
	OnLeading func(leading bool)
	// Restore, when set, receives a snapshot this replica installed in
	// place of its log (it fell below the leader's retention): the
	// application resets its state to the snapshot's. It runs before the
	// entries that follow the snapshot are applied.
	Restore func(Snapshot) error
	// Logger; nil logs nothing.
	Logger *slog.Logger

	ElectionTicks   int    // ticks without a leader before campaigning (default 10)
	HeartbeatTicks  int    // ticks between leader heartbeats (default 1)
	MaxMessageBytes uint64 // entry bytes per append message (default 1 MiB)
	MaxInflight     int    // append messages in flight per follower (default 256)
}

// Replica drives one group's RawNode. Its methods must be called from one
// goroutine at a time (the node's loop, or the simulator's).
type Replica struct {
	config  Config
	raw     *raft.RawNode
	storage *storage
	// state is what was last handed to Journal.SaveState; durable is the
	// part of it the last Sync covered (term and vote decide whether a
	// leader may send before its own sync).
	state   State
	durable State

	role   Role
	leader ReplicaID
	term   uint64

	// The leader's offset counter, valid for counterTerm: the data offset
	// its next data proposal gets.
	counterTerm uint64
	nextOffset  uint64
	// pending are the proposals not yet decided, in proposal order (which
	// is log order); a proposal learns its index when its entry is
	// written.
	pending []*Proposal

	applied     uint64
	appliedTerm uint64 // the term of the last applied entry
	servingTerm uint64 // what OnServing last said
	// leaderChanges counts the leaders this replica has seen come and go.
	leaderChanges uint64
	watermark     uint64

	latched error
	damaged error
	closed  bool
}

// Proposal is a data or control entry the leader proposed. It completes
// when the entry is committed in the proposing term (Err nil) or when the
// outcome is decided otherwise (ErrIndeterminate, ErrRefused, ErrLatched).
type Proposal struct {
	Index      uint64 // known once the entry is written, before Done
	Term       uint64
	BaseOffset uint64 // data proposals: the first record's offset
	Count      uint32 // data proposals: records in the entry

	data []byte // the entry's Data, as handed to Raft: how its entry is recognised
	done chan struct{}
	err  error
	// mu guards notify and finished: OnDone may be called from any
	// goroutine, the outcome is decided on the replica's.
	mu       sync.Mutex
	notify   []func()
	finished bool
}

// OnDone arranges for fn to run once the outcome is known: on the
// replica's goroutine when it is decided (fn must be quick and must not
// call the replica), or at once on the caller's when it already is.
func (p *Proposal) OnDone(fn func()) {
	p.mu.Lock()
	if !p.finished {
		p.notify = append(p.notify, fn)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	fn()
}

// Done is closed when the proposal's outcome is known.
func (p *Proposal) Done() <-chan struct{} { return p.done }

// Err is the outcome once Done is closed: nil when committed.
func (p *Proposal) Err() error { return p.err }

// Role is a replica's Raft role.
type Role uint8

const (
	RoleFollower Role = iota
	RoleCandidate
	RoleLeader
	RolePreCandidate
)

func (r Role) String() string {
	switch r {
	case RoleCandidate:
		return "candidate"
	case RoleLeader:
		return "leader"
	case RolePreCandidate:
		return "pre-candidate"
	default:
		return "follower"
	}
}

// Status is a snapshot of a replica's state for status views and checks.
type Status struct {
	ID        ReplicaID
	Group     GroupID
	Role      Role
	Leader    ReplicaID
	Term      uint64
	Commit    uint64 // Raft commit index
	Applied   uint64
	LastIndex uint64
	// Watermark is the offset after the last committed data record: what
	// consumers may read and what acks cover.
	Watermark uint64
	Config    Membership
	// Match is, on the leader, each member's highest replicated index.
	Match   map[ReplicaID]uint64
	Latched error // non-nil once a storage failure stopped the replica
	Damaged error // non-nil once a damaged committed entry was found
	// LeaderChanges counts the changes of leader this replica has seen
	// since it opened (elections, transfers, losses).
	LeaderChanges uint64
}

// Record is one record a leader proposes: its producer-framed body and the
// body's CRC32C, checked by the caller.
type Record struct {
	Body      []byte
	BodyCRC   uint32
	Timestamp int64 // wall clock, Unix nanoseconds: data only, the leader stamps it
}

// New opens a replica on its journal. A journal with no state belongs to
// a replica that is not yet a member: it waits for a leader to send it
// its configuration (a learner added by a membership change), unless
// Bootstrap gives it one. A replica whose journal holds a damaged entry
// opens damaged (Status().Damaged): it reports and never votes or serves.
func New(config Config) (*Replica, error) {
	if config.ID == 0 || config.Journal == nil || config.Send == nil || config.Apply == nil {
		return nil, errors.New("replica: Config needs ID, Journal, Send and Apply")
	}
	withDefaults(&config)
	state, snapshot, err := config.Journal.Load()
	if err != nil {
		return nil, fmt.Errorf("replica: load journal: %w", err)
	}
	state = reconcile(state, snapshot)
	if state.Commit > config.Journal.LastIndex() {
		return nil, fmt.Errorf("%w: state commits %d but the journal ends at %d",
			ErrDamaged, state.Commit, config.Journal.LastIndex())
	}
	r := &Replica{config: config, state: state, durable: state,
		storage: &storage{journal: config.Journal, state: state, snapshot: snapshot}}
	r.applied = max(state.ConfigIndex, snapshot.Index)
	r.storage.sendable = r.sendableSnapshot
	raw, err := newRawNode(config, r.storage, r.applied)
	if err != nil {
		return nil, err
	}
	r.raw = raw
	if r.watermark, err = r.dataEndAtOrBefore(r.applied); err != nil {
		if !errors.Is(err, ErrDamaged) {
			return nil, err
		}
		// Still a replica: it reports the damage and waits to be rebuilt,
		// but never votes or serves.
		_ = r.markDamaged(err)
	}
	r.term = state.Term
	return r, nil
}

func newRawNode(config Config, storage *storage, applied uint64) (*raft.RawNode, error) {
	raw, err := raft.NewRawNode(&raft.Config{
		ID:                        uint64(config.ID),
		ElectionTick:              config.ElectionTicks,
		HeartbeatTick:             config.HeartbeatTicks,
		Storage:                   storage,
		Applied:                   applied,
		MaxSizePerMsg:             config.MaxMessageBytes,
		MaxInflightMsgs:           config.MaxInflight,
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{config.Logger},
	})
	if err != nil {
		return nil, fmt.Errorf("replica: start raft: %w", err)
	}
	return raw, nil
}

func withDefaults(config *Config) {
	if config.ElectionTicks <= 0 {
		config.ElectionTicks = 10
	}
	if config.HeartbeatTicks <= 0 {
		config.HeartbeatTicks = 1
	}
	if config.MaxMessageBytes == 0 {
		config.MaxMessageBytes = 1 << 20
	}
	if config.MaxInflight <= 0 {
		config.MaxInflight = 256
	}
	if config.Logger == nil {
		config.Logger = slog.New(slog.DiscardHandler)
	}
}

// reconcile brings a state that a crash left behind its journal's snapshot
// point up to it: a snapshot is committed, and its configuration is the
// one in force at its index.
func reconcile(state State, snapshot Snapshot) State {
	if snapshot.Index == 0 {
		return state
	}
	if snapshot.Term > state.Term {
		state.Term, state.Vote = snapshot.Term, 0
	}
	state.Commit = max(state.Commit, snapshot.Index)
	if state.ConfigIndex < snapshot.Index {
		state.Config, state.ConfigIndex = cloneMembership(snapshot.Config), snapshot.Index
	}
	return state
}

// Bootstrap gives a new group its first configuration: committed
// configuration entries at indexes 1..n, one per voter, so that a learner
// added later learns the founding members from the log. Every founding
// member calls it once, on an empty journal, with the same list. A journal
// that already holds entries or state is left as it is (a restart). A
// replica of an existing group must never bootstrap: an empty journal
// there means a new incarnation, which joins as a learner.
func (r *Replica) Bootstrap(voters []ReplicaID) error {
	if err := r.stopped(); err != nil {
		return err
	}
	journal := r.config.Journal
	if journal.LastIndex() > 0 || r.state.Term > 0 {
		return nil
	}
	if len(voters) == 0 {
		return errors.New("replica: bootstrap needs at least one voter")
	}
	entries := make([]Entry, len(voters))
	for i, v := range voters {
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{
			Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: proto.Uint64(uint64(v))}}}
		data, err := proto.Marshal(cc)
		if err != nil {
			return fmt.Errorf("replica: bootstrap: %w", err)
		}
		entries[i] = Entry{Index: uint64(i + 1), Term: 1, Type: EntryConfChange, Data: data}
	}
	state := State{Term: 1, Commit: uint64(len(entries))}
	if err := journal.Append(entries); err != nil {
		return r.latch(err)
	}
	if err := journal.SaveState(state); err != nil {
		return r.latch(err)
	}
	if err := journal.Sync(); err != nil {
		return r.latch(err)
	}
	r.state, r.durable, r.storage.state, r.term = state, state, state, state.Term
	raw, err := newRawNode(r.config, r.storage, r.applied)
	if err != nil {
		return err
	}
	r.raw = raw
	return nil
}

// Tick advances the replica's logical clock by one tick.
func (r *Replica) Tick() {
	if r.stopped() == nil {
		_ = r.guard(func() error { r.raw.Tick(); return nil })
	}
}

// Step feeds one message received from a peer. ErrBadMessage for bytes
// that are not a Raft message for this replica; ErrDamaged when handling
// it read a damaged entry (the replica stops). Messages to a latched,
// damaged or closed replica are dropped: it neither votes nor answers.
func (r *Replica) Step(message []byte) error {
	if r.stopped() != nil {
		return nil
	}
	var m pb.Message
	if err := proto.Unmarshal(message, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if m.GetTo() != uint64(r.config.ID) {
		return fmt.Errorf("%w: addressed to %d, this replica is %d", ErrBadMessage, m.GetTo(), r.config.ID)
	}
	if m.GetType() == pb.MessageType_MsgProp || m.GetFrom() == 0 {
		return fmt.Errorf("%w: %s from %d is not a peer message", ErrBadMessage, m.GetType(), m.GetFrom())
	}
	err := r.guard(func() error { return r.raw.Step(&m) })
	switch {
	case err == nil, errors.Is(err, raft.ErrStepPeerNotFound), errors.Is(err, raft.ErrStepLocalMsg):
		return nil
	default:
		return err
	}
}

// ProposeRecords frames records at the next offsets and proposes them as
// one data entry. *NotLeaderError when not the leader.
func (r *Replica) ProposeRecords(records []Record) (*Proposal, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: a data entry needs at least one record", ErrBadPayload)
	}
	if err := r.prepareLeader(); err != nil {
		return nil, err
	}
	base := r.nextOffset
	size := DataHeaderSize
	for _, rec := range records {
		size += record.FrameSize(len(rec.Body))
	}
	data := AppendDataHeader(make([]byte, 0, size), DataHeader{Count: uint32(len(records)), BaseOffset: base})
	for i, rec := range records {
		var hash uint64
		if len(rec.Body) >= record.BodyHashThreshold {
			hash = record.BodyHash(rec.Body)
		}
		data = record.AppendFrame(data, base+uint64(i), rec.Timestamp, rec.Body, rec.BodyCRC, hash)
	}
	p, err := r.propose(pb.EntryType_EntryNormal, data)
	if err != nil {
		return nil, err
	}
	p.BaseOffset, p.Count = base, uint32(len(records))
	r.nextOffset = base + uint64(len(records))
	return p, nil
}

// ProposeControl proposes a control entry (consumer state and the like).
func (r *Replica) ProposeControl(kind uint16, body []byte) (*Proposal, error) {
	if err := r.prepareLeader(); err != nil {
		return nil, err
	}
	data := AppendControl(make([]byte, 0, ControlHeaderSize+len(body)), kind, body)
	return r.propose(pb.EntryType_EntryNormal, data)
}

// ChangeMembership proposes a configuration change: add learners, promote
// learners to voters, remove members. More than one change at once runs as
// a joint change, left automatically.
func (r *Replica) ChangeMembership(change MembershipChange) (*Proposal, error) {
	var changes []*pb.ConfChangeSingle
	add := func(kind pb.ConfChangeType, members []ReplicaID) {
		for _, m := range members {
			changes = append(changes, &pb.ConfChangeSingle{Type: kind.Enum(), NodeId: proto.Uint64(uint64(m))})
		}
	}
	add(pb.ConfChangeType_ConfChangeAddLearnerNode, change.AddLearners)
	add(pb.ConfChangeType_ConfChangeAddNode, change.Promote)
	add(pb.ConfChangeType_ConfChangeRemoveNode, change.Remove)
	if len(changes) == 0 {
		return nil, errors.New("replica: an empty membership change")
	}
	if err := r.prepareLeader(); err != nil {
		return nil, err
	}
	data, err := proto.Marshal(&pb.ConfChangeV2{Changes: changes})
	if err != nil {
		return nil, fmt.Errorf("replica: membership change: %w", err)
	}
	return r.propose(pb.EntryType_EntryConfChangeV2, data)
}

// Compact lets the journal drop entries at or below index (retention).
// Only applied entries go, and never the latest configuration change: the
// snapshot a lagging follower then gets names the configuration in force
// at its index, which is the current one only from that change on. It
// returns the index the journal now starts after.
func (r *Replica) Compact(index uint64) (uint64, error) {
	if err := r.stopped(); err != nil {
		return 0, err
	}
	index = min(index, r.applied)
	if index < r.state.ConfigIndex || index <= r.storage.snapshot.Index {
		return r.storage.snapshot.Index, nil
	}
	term, err := r.config.Journal.Term(index)
	if err != nil {
		return 0, r.compactFailed(err)
	}
	next, err := r.dataEndAtOrBefore(index)
	if err != nil {
		return 0, r.compactFailed(err)
	}
	asked := Snapshot{Index: index, Term: term, Config: cloneMembership(r.state.Config), NextOffset: next,
		Data: r.storage.snapshot.Data}
	start, err := r.config.Journal.Compact(asked, r.state.ConfigIndex)
	if err != nil {
		return 0, r.latch(err)
	}
	if start.Index > r.storage.snapshot.Index {
		r.storage.snapshot = start
	}
	return r.storage.snapshot.Index, nil
}

// compactFailed reports a failed read of the entries a compaction needs:
// a damaged one stops the replica (invariant 6), anything else is the
// caller's to retry.
func (r *Replica) compactFailed(err error) error {
	if errors.Is(err, ErrDamaged) {
		return r.markDamaged(err)
	}
	return fmt.Errorf("replica: compact: %w", err)
}

// sendableSnapshot is the snapshot a follower gets when it needs entries
// below the journal's start. Raft refuses a snapshot whose configuration
// does not name its recipient, so a member added after the journal's
// start point gets one at the latest configuration change instead: it is
// committed and applied, and the entries after it are all in the journal.
// Records between the two points are not in the snapshot (snapshots carry
// no records): such a member starts its log at the later point.
func (r *Replica) sendableSnapshot() (Snapshot, error) {
	start := r.storage.snapshot
	if r.state.ConfigIndex <= start.Index {
		return start, nil
	}
	index := r.state.ConfigIndex
	term, err := r.config.Journal.Term(index)
	if err != nil {
		return Snapshot{}, err
	}
	next, err := r.dataEndAtOrBefore(index)
	if err != nil {
		return Snapshot{}, err
	}
	// Data is the application's state at the journal's start, which does
	// not describe this later point: it stays empty.
	return Snapshot{Index: index, Term: term, Config: cloneMembership(r.state.Config), NextOffset: next}, nil
}

// Leader is the replica this one knows as its group's leader, 0 when none
// is known or this replica stopped.
func (r *Replica) Leader() ReplicaID {
	if r.stopped() != nil {
		return 0
	}
	return ReplicaID(r.raw.BasicStatus().Lead)
}

// TransferLeadership asks the leader to hand over to the replica named.
func (r *Replica) TransferLeadership(to ReplicaID) {
	if r.stopped() == nil {
		_ = r.guard(func() error { r.raw.TransferLeader(uint64(to)); return nil })
	}
}

// Campaign starts an election at once (tests and planned failover).
func (r *Replica) Campaign() error {
	if err := r.stopped(); err != nil {
		return err
	}
	return r.guard(r.raw.Campaign)
}

// ReportUnreachable tells Raft a peer could not be reached.
func (r *Replica) ReportUnreachable(to ReplicaID) {
	if r.stopped() == nil {
		_ = r.guard(func() error { r.raw.ReportUnreachable(uint64(to)); return nil })
	}
}

// HasReady says whether Process has work.
func (r *Replica) HasReady() bool {
	return r.stopped() == nil && r.raw.HasReady()
}

// Close fails pending proposals with ErrClosed. It does not close the
// journal.
func (r *Replica) Close() {
	if !r.closed {
		r.noteServing(0)
		r.closed = true
		r.failPending(ErrClosed)
	}
}

// successor is, on a leader, the voter with the highest match index other
// than itself (0 when it does not lead or has no peer).
func (r *Replica) successor() ReplicaID {
	if r.stopped() != nil || r.role != RoleLeader {
		return 0
	}
	status := r.Status()
	var best ReplicaID
	var bestMatch uint64
	for _, v := range status.Config.Voters {
		if v != r.config.ID && (best == 0 || status.Match[v] > bestMatch) {
			best, bestMatch = v, status.Match[v]
		}
	}
	return best
}

// members lists every replica in the current configuration.
func (r *Replica) members() []ReplicaID {
	c := r.state.Config
	out := make([]ReplicaID, 0, len(c.Voters)+len(c.Learners)+len(c.VotersOutgoing))
	out = append(out, c.Voters...)
	out = append(out, c.Learners...)
	return append(out, c.VotersOutgoing...)
}

func (r *Replica) stopped() error {
	switch {
	case r.closed:
		return ErrClosed
	case r.latched != nil:
		return r.latched
	case r.damaged != nil:
		return r.damaged
	}
	return nil
}

// MembershipChange lists what to change.
type MembershipChange struct {
	AddLearners []ReplicaID
	Promote     []ReplicaID // learners to voters
	Remove      []ReplicaID
}
