package session

import (
	"unsafe"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// sessionStacks covers the goroutines a connection may run (the writer, a
// consume wait, the std backend's reader) at grown stacks.
const sessionStacks = 64 << 10

// RegisterMemory adds what wire connections can hold at most to budget,
// line by line with the knob that scales each, for the engine
// configuration they are served over (its connection and stream limits).
func (c Config) RegisterMemory(budget *arena.Budget, engine broker.Config) error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	maxConnections := engine.MaxConnections
	if maxConnections <= 0 {
		maxConnections = broker.DefaultMaxConnections
	}
	maxStreams := engine.MaxStreams
	if maxStreams <= 0 {
		maxStreams = broker.DefaultMaxStreams
	}
	connections := int64(maxConnections)
	budget.Register("reply queues", "--max-connections × --connection-output", connections*int64(c.ConnectionOutput))
	budget.Register("produce windows and session buffers", "--max-connections × --window",
		connections*sessionBytes(int64(c.Window)))
	budget.Register("goroutine stacks", "--max-connections × 64 KiB", connections*sessionStacks)
	// With a large-record pool, its capacity (registered when it was
	// built) bounds records larger than staging; without one, every stream
	// may stage one and write another.
	storage := engine.Storage
	if storage.StagingBytes == 0 {
		storage.StagingBytes = segment.DefaultStagingBytes
	}
	if c.LargeRecords == nil && int64(c.MaxFrame) > int64(segment.StagingBufferSize(storage)) {
		budget.Register("large records being written (no shared pool)", "--max-streams × 2 × --max-frame",
			int64(maxStreams)*2*int64(c.MaxFrame))
	}
	return nil
}

// sessionBytes is what one session holds besides its reply queue: the ring
// of produce request ids and the ack-group ring (window entries each),
// the run slices and the write buffer.
func sessionBytes(window int64) int64 {
	var group ackGroup
	perCredit := int64(unsafe.Sizeof(uint32(0))) + int64(unsafe.Sizeof(group))
	run := int64(maxRun) * (int64(unsafe.Sizeof([]byte(nil))) + 8)
	entries := int64(maxRun) * int64(unsafe.Sizeof(wire.AckEntry{}))
	return window*perCredit + run + entries + 64<<10
}
