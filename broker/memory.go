package broker

import (
	"fmt"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/dedup"
	"github.com/ironbus/ironbus/keyindex"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/txn"
)

// Per-item costs the budget counts that no pool holds. They are upper
// estimates, checked by the RSS-under-load test (TestRAMCeilingHoldsUnderLoad
// in cmd/ironbus), not measured at run time.
const (
	// leaseCost is one in-flight delivery of a group: the lease, its map
	// slot and its deadline-heap entry (256 B with map slack), plus the
	// waiting record it can turn into (a nack, a lapse, a key parked
	// behind it: 128 B). A group holds at most MaxInFlight leases and
	// MaxUnsettled = 2 × MaxInFlight records in all, so this bounds both.
	leaseCost = 384
	// indexEntryCost is one sparse-index point of a segment (offset,
	// position, prior timestamp).
	indexEntryCost = 24
	// indexInterval is the bytes of log per index point.
	indexInterval = 64 << 10
	// summaryBlockCost and summaryDictionaryCost bound a segment's subject
	// summary: per block and per segment (summaryBytes).
	summaryBlockCost      = 16 + 4 + 16*4
	summaryDictionaryCost = 8 << 10
)

// RuntimeBaseline is the Go runtime, the binary's data and the broker's
// fixed structures: measured idle at 7 MiB resident, counted with room.
// It is the process's, so RegisterMemory leaves it to the caller.
const RuntimeBaseline = 16 << 20

// RegisterMemory adds the engine's memory to budget, line by line with
// the knob that scales each: what the streams and groups this
// configuration allows can hold at most. Each adapter registers what its
// connections hold (session.Config.RegisterMemory); the network backend's
// read buffers and large-frame pool register themselves when built.
func (c Config) RegisterMemory(budget *arena.Budget) error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	staging := int64(segment.StagingBufferSize(c.Storage))
	if c.Storage.StagingBuffers == nil { // a slab registers itself
		perLog := int64(segment.StagingBuffersPerLog(c.Storage.IOMode))
		budget.Register("append staging", fmt.Sprintf("--max-streams × %d × --staging-bytes", perLog),
			int64(c.MaxStreams)*perLog*staging)
	}
	budget.Register("segment indexes", "--max-streams × open segments × --segment-bytes / 64 KiB × 24 B",
		int64(c.MaxStreams)*indexBytes(c.Storage.SegmentSize, c.Storage.MaxOpenSegments))
	budget.Register("segment subject summaries", "--max-streams × open segments × (--segment-bytes / 64 KiB × 84 B + 8 KiB)",
		int64(c.MaxStreams)*summaryBytes(c.Storage.SegmentSize, c.Storage.MaxOpenSegments))
	budget.Register("message-id dedup windows", "--max-streams × (2 × 64 KiB tables + 96 KiB seal + (max ids + 6 Ki) × 10 bit filters)",
		int64(c.MaxStreams)*dedup.MemoryBytes(c.DedupMaxIDs))
	budget.Register("transactions", "--max-open-txns × (256 B + 4 outcomes kept × 96 B + 16 ranges kept × 200 B)",
		txn.MemoryBytes(c.Transactions.MaxOpen))
	budget.Register("consumer group leases", "--max-groups × --max-in-flight × 384 B",
		int64(c.MaxGroups)*int64(c.MaxInFlight)*leaseCost)
	c.registerProducerMemory(budget)
	budget.Register("subject indexes", "--max-streams × 105 KiB (keyindex.MemoryBound)",
		int64(c.MaxStreams)*keyindex.MemoryBound(subjectIndexOptions()))
	budget.Register("key compaction", "one log at a time: 16,384 keys × 64 B + 512 KiB + --segment-bytes / 512",
		compactionMemory(c.Storage.SegmentSize))
	return nil
}

// summaryBytes bounds the subject summaries of the segments a log keeps
// open (package segment, summary.go and spots.go): per 64 KiB block a
// 16-byte subject mask, a 4-byte end and at most 16 four-byte record
// positions, and per segment a dictionary of at most 4 KiB of subjects in
// a 256-slot table.
func summaryBytes(segmentSize int64, maxOpen int) int64 {
	if segmentSize <= 0 {
		segmentSize = segment.DefaultSegmentSize
	}
	if maxOpen <= 0 {
		maxOpen = segment.DefaultMaxOpenSegments
	}
	return int64(maxOpen+1) * ((segmentSize/indexInterval+1)*summaryBlockCost + summaryDictionaryCost)
}

// indexBytes is the sparse index of the segments a log keeps open: the
// active one and up to maxOpen sealed ones.
func indexBytes(segmentSize int64, maxOpen int) int64 {
	if segmentSize <= 0 {
		segmentSize = segment.DefaultSegmentSize
	}
	if maxOpen <= 0 {
		maxOpen = segment.DefaultMaxOpenSegments
	}
	return int64(maxOpen+1) * (segmentSize/indexInterval + 1) * indexEntryCost
}
