package broker

import (
	"fmt"
	"unsafe"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
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
	// sessionStacks covers the goroutines a connection may run (the
	// writer, a consume wait, the std backend's reader) at grown stacks.
	sessionStacks = 64 << 10
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

// RegisterMemory adds the broker's memory to budget, line by line with the
// knob that scales each: what the connections, streams and groups this
// configuration allows can hold at most. The network backend's read
// buffers and large-frame pool register themselves when they are built.
func (c Config) RegisterMemory(budget *arena.Budget) error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	connections := int64(c.MaxConnections)
	budget.Register("reply queues", "--max-connections × --connection-output", connections*int64(c.ConnectionOutput))
	budget.Register("produce windows and session buffers", "--max-connections × --window",
		connections*sessionBytes(int64(c.Window)))
	budget.Register("goroutine stacks", "--max-connections × 64 KiB", connections*sessionStacks)
	staging := int64(segment.StagingBufferSize(c.Storage))
	if c.Storage.StagingBuffers == nil { // a slab registers itself
		perLog := int64(segment.StagingBuffersPerLog(c.Storage.IOMode))
		budget.Register("append staging", fmt.Sprintf("--max-streams × %d × --staging-bytes", perLog),
			int64(c.MaxStreams)*perLog*staging)
	}
	// With a large-record pool, its capacity (registered when it was
	// built) bounds records larger than staging; without one, every stream
	// may stage one and write another.
	if c.LargeRecords == nil && int64(c.MaxFrame) > staging {
		budget.Register("large records being written (no shared pool)", "--max-streams × 2 × --max-frame",
			int64(c.MaxStreams)*2*int64(c.MaxFrame))
	}
	budget.Register("segment indexes", "--max-streams × open segments × --segment-bytes / 64 KiB × 24 B",
		int64(c.MaxStreams)*indexBytes(c.Storage.SegmentSize, c.Storage.MaxOpenSegments))
	budget.Register("segment subject summaries", "--max-streams × open segments × (--segment-bytes / 64 KiB × 84 B + 8 KiB)",
		int64(c.MaxStreams)*summaryBytes(c.Storage.SegmentSize, c.Storage.MaxOpenSegments))
	budget.Register("consumer group leases", "--max-groups × --max-in-flight × 384 B",
		int64(c.MaxGroups)*int64(c.MaxInFlight)*leaseCost)
	return nil
}

// sessionBytes is what one session holds besides its reply queue: the ring
// of produce request ids and the ack-group channel (window entries each),
// the run slices and the write buffer.
func sessionBytes(window int64) int64 {
	var group ackGroup
	perCredit := int64(unsafe.Sizeof(uint32(0))) + int64(unsafe.Sizeof(group))
	run := int64(maxRun) * (int64(unsafe.Sizeof([]byte(nil))) + 8)
	entries := int64(maxRun) * int64(unsafe.Sizeof(wire.AckEntry{}))
	return window*perCredit + run + entries + 64<<10
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
