package replica

import (
	"log/slog"
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
	config Config
}

// Proposal is a data or control entry the leader proposed. It completes
// when the entry is committed in the proposing term (Err nil) or when the
// outcome is decided otherwise (ErrIndeterminate, ErrRefused, ErrLatched).
type Proposal struct {
	Index      uint64
	Term       uint64
	BaseOffset uint64 // data proposals: the first record's offset
	Count      uint32 // data proposals: records in the entry

	done chan struct{}
	err  error
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
}

// Record is one record a leader proposes: its producer-framed body and the
// body's CRC32C, checked by the caller.
type Record struct {
	Body      []byte
	BodyCRC   uint32
	Timestamp int64 // milliseconds; the leader's clock decides
}

// New opens a replica on its journal. A journal with no state belongs to
// a replica that is not yet a member: it waits to be told its
// configuration by a leader (a learner added by a conf change), unless
// Bootstrap gives it one.
func New(config Config) (*Replica, error) { panic("replica: not built") }

// Bootstrap gives a new group its first configuration. Only every
// founding member calls it, once, on an empty journal, with the same list.
func (r *Replica) Bootstrap(voters []ReplicaID) error { panic("replica: not built") }

// Tick advances the replica's logical clock by one tick.
func (r *Replica) Tick() { panic("replica: not built") }

// Step feeds one message received from a peer. ErrBadMessage for bytes
// that are not a Raft message for this group; messages to a latched or
// damaged replica are dropped (votes in particular).
func (r *Replica) Step(message []byte) error { panic("replica: not built") }

// ProposeRecords frames records at the next offsets and proposes them as
// one data entry. *NotLeaderError when not the leader.
func (r *Replica) ProposeRecords(records []Record) (*Proposal, error) {
	panic("replica: not built")
}

// ProposeControl proposes a control entry (consumer state and the like).
func (r *Replica) ProposeControl(kind uint16, body []byte) (*Proposal, error) {
	panic("replica: not built")
}

// ChangeMembership proposes a configuration change: add learners, promote
// learners to voters, remove members. More than one change at once runs as
// a joint change, left automatically.
func (r *Replica) ChangeMembership(change MembershipChange) (*Proposal, error) {
	panic("replica: not built")
}

// MembershipChange lists what to change.
type MembershipChange struct {
	AddLearners []ReplicaID
	Promote     []ReplicaID // learners to voters
	Remove      []ReplicaID
}

// TransferLeadership asks the leader to hand over to the replica named.
func (r *Replica) TransferLeadership(to ReplicaID) { panic("replica: not built") }

// Campaign starts an election at once (tests and planned failover).
func (r *Replica) Campaign() error { panic("replica: not built") }

// ReportUnreachable tells Raft a peer could not be reached.
func (r *Replica) ReportUnreachable(to ReplicaID) { panic("replica: not built") }

// HasReady says whether Process has work.
func (r *Replica) HasReady() bool { panic("replica: not built") }

// Process handles one Ready: persists entries and state (syncing when
// Raft asks), sends messages in the order invariant 1 allows, applies
// committed entries and completes proposals. It returns ErrLatched after a
// storage failure and ErrDamaged when a committed entry is damaged.
func (r *Replica) Process() error { panic("replica: not built") }

// Status reports the replica's state.
func (r *Replica) Status() Status { panic("replica: not built") }

// Close fails pending proposals with ErrClosed. It does not close the
// journal.
func (r *Replica) Close() { panic("replica: not built") }
