package segment

// SegmentInfo describes one segment of a log for retention decisions: the
// engine exposes what it knows, and the caller (the broker's retention
// pass) decides what to drop, because only it knows the consumer groups
// and the operator's policy.
type SegmentInfo struct {
	// Base is the first offset the segment covers; Next is one past the
	// last.
	Base, Next uint64
	// Records counts the records it holds.
	Records uint64
	// Bytes is the size of its frames; a sealed segment's file ends there.
	Bytes int64
	// MaxTimestamp is the newest record's wall-clock stamp (data only, I6);
	// meaningless when Records is zero.
	MaxTimestamp int64
	// Sealed segments never change again; only they may be dropped.
	Sealed bool
}

// Segments returns a snapshot of the log's segments, oldest first. The
// last one is the active segment (or, after a restart, the newest sealed
// one, which DeleteBefore never removes either).
func (l *Log) Segments() []SegmentInfo {
	set := l.segments.Load()
	infos := make([]SegmentInfo, 0, len(set.segments))
	for _, seg := range set.segments {
		stats := seg.stats()
		infos = append(infos, SegmentInfo{Base: stats.Base, Next: stats.Next, Records: stats.Records,
			Bytes: stats.Bytes, MaxTimestamp: stats.MaxTimestamp, Sealed: stats.Sealed})
	}
	return infos
}
