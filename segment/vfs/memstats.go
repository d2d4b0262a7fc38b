package vfs

// UnsyncedStats counts what a power cut could still take from a MemFS.
type UnsyncedStats struct {
	// Writes and Bytes count file writes no sync has covered yet.
	Writes int
	Bytes  int64
	// Resizes counts unsynced truncates and allocations.
	Resizes int
	// DirChanges counts directory entry changes (creations, renames,
	// removals) no directory sync has covered yet.
	DirChanges int
}

// Unsynced reports the unsynced state, so a power-cut test can say how
// much each cut was able to drop.
func (m *MemFS) Unsynced() UnsyncedStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	stats := UnsyncedStats{DirChanges: len(m.dirOps)}
	seen := map[*memNode]bool{}
	var walk func(node *memNode)
	walk = func(node *memNode) {
		if seen[node] {
			return
		}
		seen[node] = true
		for _, op := range node.pending {
			if op.kind == opWrite {
				stats.Writes++
				stats.Bytes += int64(len(op.data))
			} else {
				stats.Resizes++
			}
		}
		for _, child := range node.children {
			walk(child)
		}
	}
	walk(m.root)
	return stats
}
