package ring

import (
	"fmt"
	"math/bits"
)

// cacheLineSize is the coherence granule the padding is sized for. 64 bytes
// is the line on amd64 and on the arm64 cores IronBus targets at the edge;
// a full line of padding between two groups of fields keeps them on
// different lines whatever the allocation's alignment, because neither
// group is longer than a line.
const cacheLineSize = 64

// cacheLinePad separates fields written by different goroutines, so a write
// by one side does not invalidate the line the other side is reading
// (false sharing).
type cacheLinePad [cacheLineSize]byte

// maxCapacity bounds a ring's slot count. A ring that large is a
// configuration error (memory is a function of configuration, invariant
// I8), and the bound keeps the power-of-two rounding far from overflow on
// 32-bit platforms.
const maxCapacity = 1 << 30

// roundCapacity returns the smallest power of two that is at least
// capacity and at least minimum. A power of two turns "position modulo
// capacity" into a mask, and lets positions run as free-running uint64
// counters that never need resetting. It panics on a capacity outside
// [1, maxCapacity]: a ring's size comes from configuration, and a bad one
// must stop the broker at boot, not surface later as a ring that is always
// full.
func roundCapacity(capacity, minimum int) int {
	if capacity < 1 || capacity > maxCapacity {
		panic(fmt.Sprintf("ring: capacity %d outside [1, %d]", capacity, maxCapacity))
	}
	capacity = max(capacity, minimum)
	return 1 << bits.Len(uint(capacity-1))
}

// occupancy turns two position snapshots into a length in [0, capacity].
// The caller must load popPosition before pushPosition: positions only
// grow and a pop never passes a push, so the later push snapshot is at
// least the earlier pop snapshot and the difference cannot underflow. It
// can exceed the capacity when the consumer popped and producers refilled
// between the two loads, hence the clamp.
func occupancy(popPosition, pushPosition, capacity uint64) int {
	return int(min(pushPosition-popPosition, capacity))
}
