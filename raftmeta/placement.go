package raftmeta

import (
	"fmt"
	"slices"

	"github.com/ironbus/ironbus/replica"
)

// Placement is deterministic given the state, so every node applying a
// CreateStream computes the same sets. It spreads two loads over the
// active nodes: the first replica of each partition (the preferred
// leader) and the replicas overall. Ties go by node id, and followers by
// ring distance from the leader, so equal loads rotate rather than pile
// onto the lowest ids.

type load struct {
	leaders, replicas int
}

// loads counts, per active node, the preferred leaderships and replicas
// the existing streams give it.
func loads(s *State) map[uint32]*load {
	out := map[uint32]*load{}
	for _, n := range s.activeNodes() {
		out[n.ID] = &load{}
	}
	for _, stream := range s.Streams {
		for _, part := range stream.Partitions {
			for i, r := range part.Replicas {
				if l, ok := out[r.Node()]; ok {
					l.replicas++
					if i == 0 {
						l.leaders++
					}
				}
			}
		}
	}
	return out
}

// place picks factor distinct active nodes for each of partitions new
// partitions, the first of each set being its preferred leader.
func place(s *State, partitions, factor int) ([][]replica.ReplicaID, error) {
	nodes := s.activeNodes()
	if factor > len(nodes) {
		return nil, fmt.Errorf("%w: replication factor %d, %d active nodes", ErrNotEnoughNodes, factor, len(nodes))
	}
	counts := loads(s)
	sets := make([][]replica.ReplicaID, partitions)
	for p := range sets {
		leader := 0
		for i := 1; i < len(nodes); i++ {
			best, candidate := counts[nodes[leader].ID], counts[nodes[i].ID]
			if candidate.leaders < best.leaders || (candidate.leaders == best.leaders && candidate.replicas < best.replicas) {
				leader = i
			}
		}
		// Followers: the least loaded, nearest after the leader in the ring.
		order := make([]int, 0, len(nodes)-1)
		for step := 1; step < len(nodes); step++ {
			order = append(order, (leader+step)%len(nodes))
		}
		slices.SortStableFunc(order, func(a, b int) int { return counts[nodes[a].ID].replicas - counts[nodes[b].ID].replicas })
		set := []replica.ReplicaID{nodes[leader].ReplicaID()}
		counts[nodes[leader].ID].leaders++
		counts[nodes[leader].ID].replicas++
		for _, i := range order[:factor-1] {
			set = append(set, nodes[i].ReplicaID())
			counts[nodes[i].ID].replicas++
		}
		sets[p] = set
	}
	return sets, nil
}

// replacement picks the active node to take a replica off node gone in
// set: the least loaded one the set does not name (ok false when none).
func replacement(s *State, set []replica.ReplicaID, gone uint32) (Node, bool) {
	counts := loads(s)
	var best Node
	found := false
	for _, n := range s.activeNodes() {
		if n.ID == gone || slices.ContainsFunc(set, func(r replica.ReplicaID) bool { return r.Node() == n.ID }) {
			continue
		}
		if !found || counts[n.ID].replicas < counts[best.ID].replicas {
			best, found = n, true
		}
	}
	return best, found
}
