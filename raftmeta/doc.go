// Package raftmeta will own the cluster's metadata group on
// hashicorp/raft: membership, placement and leader epochs.
//
// Invariant: raftmeta never sits on the data path.
//
// Not built yet: clustering is not filed.
package raftmeta
