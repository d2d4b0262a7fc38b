// Package raftmeta is the cluster's metadata group on hashicorp/raft:
// which nodes exist (id, data-directory incarnation, addresses, tags,
// active or removing), which streams exist with their settings and, per
// partition, the replication group id, the desired replica set and its
// config version; consumer-group definitions; the account/ACL version.
// It is not on the data path and elects no partition leader: partitions
// replicate on their own logs (package replica), and a metadata outage
// stops admin changes, never produce or consume.
//
// # Pieces
//
//   - Commands (command.go): a version byte and a JSON envelope, decoded
//     strictly; Apply (fsm.go) is deterministic and refuses a command the
//     state does not allow with a typed error (ErrStreamExists,
//     ErrUnknownNode, ErrNotEnoughNodes, ...) that comes back through the
//     future's Response to the caller. The state is copy-on-write: a
//     refused command leaves no trace, and readers and snapshots take the
//     published state without locks.
//   - Placement (placement.go): a stream created with replication factor
//     R gets R distinct active nodes per partition, the first replicas
//     (preferred leaders) spread evenly, then the replicas; deterministic
//     given the state.
//   - Storage: raft-boltdb/v2 holds the log and the vote in
//     <data-dir>/meta/raft.db, snapshots are files in
//     <data-dir>/meta/snapshots, and <data-dir>/meta/IDENTITY names the
//     node and incarnation the store belongs to (claim.go).
//   - Transport: hashicorp's NetworkTransport over a StreamLayer (a TCP
//     listener of its own, ListenTCP, or anything else that can dial and
//     accept), with an identity handshake on every connection
//     (transport.go).
//
// # Invariants
//
//  1. A failed store write or sync latches the member (store.go): every
//     later store call fails with ErrLatched, nothing is retried, Status
//     reports it. hashicorp/raft itself would step down and carry on.
//  2. A node's incarnation is part of its identity. Replica ids are
//     node<<32|incarnation (replica.NewReplicaID). A node that comes back
//     with another data directory never passes for its old self: its
//     meta store, if it has one from another identity, is moved aside;
//     peers that dial it refuse its replies (votes, appends) while the
//     metadata registers another incarnation; the leader then registers
//     the new incarnation through the log, which rewrites every desired
//     replica set naming the old replica id to name the new one (config
//     version raised), so partitions add it as a new member that catches
//     up, never with the old one's vote.
//  3. Group ids are never reused: a stream deleted and created again gets
//     new ones, so no replica of the old stream is taken for the new.
//  4. A committed command this binary cannot decode (written by a newer
//     one) stalls the state machine (ErrStalled) instead of being
//     skipped: a stale state is safe, a diverged one is not.
//  5. Pre-vote and check-quorum (the leader lease) are on.
//
// # Membership
//
// Bootstrap starts the group from the static peer list (--peer id=addr),
// every listed node a voter; it does nothing on a member that has state.
// The leader sets the cluster id once and registers each member from the
// identity it shows in the handshake, itself included. AddMember and
// ForgetNode change the membership; LeadershipTransfer hands the
// leadership over before a planned stop.
package raftmeta
