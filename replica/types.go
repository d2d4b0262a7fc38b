package replica

import (
	"errors"
	"fmt"
	"slices"
)

var (
	// ErrNotLeader: the replica is not its group's leader. The error is a
	// *NotLeaderError naming the leader, if one is known.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrLeaderNotReady: this replica just became leader and has not yet
	// applied its log up to its own term's first entry, so its view of
	// the log (producer state above all) may miss committed entries.
	// Retry shortly.
	ErrLeaderNotReady = errors.New("replica: the new leader is still applying its log")
	// ErrIndeterminate: leadership changed while a proposal was pending;
	// it may or may not be committed. Retry idempotently.
	ErrIndeterminate = errors.New("replica: outcome unknown after a leadership change")
	// ErrRefused: the entry at the proposal's index was committed with
	// another term; the proposal is definitely not in the log.
	ErrRefused = errors.New("replica: proposal was replaced by another leader's entry")
	// ErrLatched: a journal write or sync failed; the replica stopped.
	ErrLatched = errors.New("replica: stopped after a storage failure")
	// ErrDamaged: the replica found a damaged committed entry; it serves
	// nothing and never votes until it is rebuilt.
	ErrDamaged = errors.New("replica: damaged entry in the log")
	// ErrClosed: the replica was closed.
	ErrClosed = errors.New("replica: closed")
	// ErrCompacted: the entries asked for are below the journal's first
	// index (removed by retention).
	ErrCompacted = errors.New("replica: entries removed by retention")
	// ErrUnavailable: the entries asked for are past the journal's end.
	ErrUnavailable = errors.New("replica: entries not in the journal")
	// ErrBadPayload: an entry payload does not decode.
	ErrBadPayload = errors.New("replica: malformed entry payload")
	// ErrBadMessage: a message from a peer does not decode.
	ErrBadMessage = errors.New("replica: malformed raft message")
)

// NotLeaderError says which replica leads, when one is known (Leader 0
// when none is).
type NotLeaderError struct {
	Leader ReplicaID
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "replica: not the leader (no leader known)"
	}
	return fmt.Sprintf("replica: not the leader (leader is node %d)", e.Leader.Node())
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// ReplicaID names one replica of a group for Raft: the node it runs on and
// the incarnation of that node's data directory. A node that returns with
// an empty or foreign data directory has a new incarnation and so a new
// ReplicaID, which joins only as a new learner and never inherits the old
// one's vote.
type ReplicaID uint64

// NewReplicaID combines a node id and its data directory's incarnation.
func NewReplicaID(node, incarnation uint32) ReplicaID {
	return ReplicaID(uint64(node)<<32 | uint64(incarnation))
}

// Node is the node the replica runs on.
func (id ReplicaID) Node() uint32 { return uint32(id >> 32) }

// Incarnation is the data directory incarnation of the replica's node.
func (id ReplicaID) Incarnation() uint32 { return uint32(id) }

// GroupID names one replicated (stream, partition) across the cluster.
type GroupID uint64

// EntryType is the Raft entry type, as the journal stores it.
type EntryType uint8

const (
	// EntryNormal: an empty no-op (a new leader's first entry) or a
	// payload (EncodeData, EncodeControl).
	EntryNormal EntryType = 0
	// EntryConfChange: a configuration change (Raft ConfChangeV2 bytes).
	EntryConfChange EntryType = 1
)

// Entry is one Raft entry as the journal stores it: one commit batch.
type Entry struct {
	Index uint64
	Term  uint64
	Type  EntryType
	Data  []byte // nil for a no-op; the journal must return it byte for byte
}

// State is the replica's durable Raft state: its hard state (term, vote,
// commit) and the configuration in force with the index it was applied at.
type State struct {
	Term   uint64
	Vote   ReplicaID
	Commit uint64

	Config      Membership
	ConfigIndex uint64 // index of the last configuration change applied
}

// Membership is a group's configuration: voters, learners and, during a
// joint change, the outgoing voters and the learners to add on leaving.
type Membership struct {
	Voters         []ReplicaID
	Learners       []ReplicaID
	VotersOutgoing []ReplicaID
	LearnersNext   []ReplicaID
	AutoLeave      bool
}

// Journal is the storage a replica runs on: its entries and its State.
// Writes become durable only at Sync; a crash may lose any unsynced write
// but never a synced one. What survives a crash is a prefix of the
// unsynced entries and the state as of the last Sync or of a later
// SaveState whose earlier Appends all survived: a state never gets ahead
// of the entries it describes. A Journal is used by one goroutine at a
// time.
type Journal interface {
	// Load returns the durable state and the snapshot point: the index and
	// term just before FirstIndex (zero for a journal that never dropped
	// entries) and the data offset that follows that point.
	Load() (State, Snapshot, error)
	// Append writes entries. entries[0].Index is at most LastIndex()+1;
	// every stored entry at or after it is replaced (a follower's
	// conflicting suffix). The caller never replaces an index at or below
	// the durable commit.
	Append(entries []Entry) error
	// SaveState records the state; it is durable after the next Sync.
	SaveState(State) error
	// Sync makes every earlier Append and SaveState durable.
	Sync() error
	// Entries returns the entries in [lo, hi), at least one when lo < hi,
	// then as many as fit in maxBytes of Data. ErrCompacted below
	// FirstIndex, ErrUnavailable past LastIndex, ErrDamaged when a stored
	// entry fails its checks.
	Entries(lo, hi, maxBytes uint64) ([]Entry, error)
	// Term is the term of the entry at index, for FirstIndex()-1 through
	// LastIndex().
	Term(index uint64) (uint64, error)
	// FirstIndex is the first stored entry's index (snapshot index + 1).
	FirstIndex() uint64
	// LastIndex is the last written entry's index (synced or not).
	LastIndex() uint64
	// InstallSnapshot drops every entry and starts the journal after the
	// snapshot point; durable after the next Sync.
	InstallSnapshot(Snapshot) error
	// Compact drops entries for retention, up to a point of its choosing
	// in [configSince, start.Index] (a journal may drop only whole
	// segments: less than asked, or nothing). The entries there are
	// committed and applied, and start.Config is the configuration in
	// force at every index of that range. It returns the point the
	// journal now starts after (Load returns it): its index, term and the
	// data offset that follows it, with start.Config and start.Data.
	// Durable after the next Sync.
	Compact(start Snapshot, configSince uint64) (Snapshot, error)
}

// Snapshot is a point a journal starts after: Raft's snapshot metadata and
// the data offset that follows it. IronBus snapshots carry no records: a
// follower below the leader's retention starts its log at NextOffset.
type Snapshot struct {
	Index      uint64
	Term       uint64
	Config     Membership
	NextOffset uint64
	Data       []byte // the application's state at Index (producer and consumer tables); opaque here
}

func cloneState(s State) State {
	s.Config = cloneMembership(s.Config)
	return s
}

func cloneSnapshot(s Snapshot) Snapshot {
	s.Config = cloneMembership(s.Config)
	s.Data = slices.Clone(s.Data)
	return s
}

func cloneMembership(m Membership) Membership {
	return Membership{Voters: slices.Clone(m.Voters), Learners: slices.Clone(m.Learners),
		VotersOutgoing: slices.Clone(m.VotersOutgoing), LearnersNext: slices.Clone(m.LearnersNext),
		AutoLeave: m.AutoLeave}
}
