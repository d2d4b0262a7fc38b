package raftmeta

import (
	"errors"
	"strconv"
)

// Sentinel errors; each is wrapped with the detail. Apply refusals come
// back through the API calls (and ApplyFuture.Response) as these.
var (
	// ErrInvalid marks a command or configuration with a bad field.
	ErrInvalid = errors.New("raftmeta: invalid")
	// ErrMalformed marks command bytes that do not decode.
	ErrMalformed = errors.New("raftmeta: malformed command")
	// ErrNewerVersion marks a command or snapshot written by a newer
	// binary.
	ErrNewerVersion = errors.New("raftmeta: written by a newer version")
	// ErrStreamExists marks a create of a stream that exists.
	ErrStreamExists = errors.New("raftmeta: stream exists")
	// ErrNoSuchStream marks a stream the metadata does not hold.
	ErrNoSuchStream = errors.New("raftmeta: no such stream")
	// ErrNoSuchPartition marks a partition past a stream's count.
	ErrNoSuchPartition = errors.New("raftmeta: no such partition")
	// ErrGroupExists marks a create of a consumer group that exists.
	ErrGroupExists = errors.New("raftmeta: consumer group exists")
	// ErrNoSuchGroup marks a consumer group the metadata does not hold.
	ErrNoSuchGroup = errors.New("raftmeta: no such consumer group")
	// ErrUnknownNode marks a node id that is not registered.
	ErrUnknownNode = errors.New("raftmeta: unknown node")
	// ErrStaleIncarnation marks a replica id whose incarnation is not its
	// node's current one.
	ErrStaleIncarnation = errors.New("raftmeta: stale incarnation")
	// ErrNodeRemoving marks a node on its way out, which takes no new
	// replicas and cannot re-register.
	ErrNodeRemoving = errors.New("raftmeta: node is being removed")
	// ErrNodeInUse marks a node still named by a desired replica set.
	ErrNodeInUse = errors.New("raftmeta: node still holds replicas")
	// ErrAddressInUse marks a cluster address another node registered.
	ErrAddressInUse = errors.New("raftmeta: cluster address in use")
	// ErrNotEnoughNodes marks a replication factor above the active nodes.
	ErrNotEnoughNodes = errors.New("raftmeta: replication factor above the active nodes")
	// ErrVersionMismatch marks a compare-and-set on a stale config version.
	ErrVersionMismatch = errors.New("raftmeta: config version mismatch")
	// ErrClusterInitialized marks a second cluster id.
	ErrClusterInitialized = errors.New("raftmeta: cluster id already set")
	// ErrNotLeader marks a change or linearizable read asked of a node
	// that is not the leader; it is a *NotLeaderError.
	ErrNotLeader = errors.New("raftmeta: not the leader")
	// ErrLatched marks a node whose store failed a write or sync: it
	// stopped for good (never retried) and serves nothing.
	ErrLatched = errors.New("raftmeta: stopped after a storage failure")
	// ErrStalled marks a node whose state machine met a committed command
	// it cannot decode (a newer binary wrote it): it applies nothing more
	// until upgraded, rather than diverge from the others.
	ErrStalled = errors.New("raftmeta: state machine stalled on an undecodable command")
	// ErrIndeterminate marks a change whose outcome is unknown: the
	// leader lost its leadership or the context ended while it was in
	// flight. It may or may not be applied; read the state to find out.
	ErrIndeterminate = errors.New("raftmeta: outcome unknown")
	// ErrClosed marks a call after Close.
	ErrClosed = errors.New("raftmeta: closed")
	// ErrRefused marks a peer connection refused by the identity check.
	ErrRefused = errors.New("raftmeta: peer refused")
)

// NotLeaderError names the leader when one is known (Leader 0 when
// none): its cluster address and, once registered, its client address,
// where a client verb can go instead.
type NotLeaderError struct {
	Leader           uint32
	LeaderAddr       string
	LeaderClientAddr string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "raftmeta: not the leader (no leader known)"
	}
	return "raftmeta: not the leader (leader is node " + strconv.FormatUint(uint64(e.Leader), 10) + " at " + e.LeaderAddr + ")"
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
