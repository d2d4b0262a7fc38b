// Package raftmeta is the home of the cluster's metadata group on
// hashicorp/raft: nodes, incarnations, streams, replica sets, group and ACL
// versions. It holds no code: a broker is a single node, and nothing in the
// module imports it.
//
// Invariant: raftmeta never sits on the data path and never elects a
// partition's leader (partitions replicate on their own logs).
package raftmeta
