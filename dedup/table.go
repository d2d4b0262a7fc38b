package dedup

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/zeebo/xxh3"
)

// entry is one remembered id in the compact form a generation keeps, in
// RAM and on disk: the id's hash, its offset after the generation's base
// offset, and its broker time after the generation's base time in
// milliseconds, rounded up (so an id is never forgotten early).
type entry struct {
	hash   uint64
	offset uint32
	age    uint32
}

// entrySize is an entry's size in RAM and on disk.
const entrySize = 16

// hashID is the key an id is remembered by; zero marks a free slot, so no
// id hashes to it.
func hashID(id []byte) uint64 {
	h := xxh3.Hash(id)
	if h == 0 {
		return 1
	}
	return h
}

// table is the active generation: an open-addressing hash table with
// linear probing, sized once for limit ids at a load of at most 3/4, so
// inserting never allocates.
type table struct {
	slots []entry
	mask  uint64
	count int
	limit int

	baseOffset uint64
	baseTime   time.Duration
	maxOffset  uint64
	maxTime    time.Duration
}

// tableSlots is the slot count of a table for limit ids: a power of two,
// at least 4/3 of limit, and always more than limit, so a probe for a
// missing hash meets a free slot.
func tableSlots(limit int) int {
	slots := 1 << bits.Len(uint(max(limit*4/3, 1)-1))
	if slots <= limit {
		slots *= 2
	}
	return slots
}

func newTable(limit int) *table {
	slots := tableSlots(limit)
	return &table{slots: make([]entry, slots), mask: uint64(slots - 1), limit: limit}
}

// reset empties the table for reuse.
func (t *table) reset() {
	clear(t.slots)
	t.count, t.baseOffset, t.baseTime, t.maxOffset, t.maxTime = 0, 0, 0, 0, 0
}

// fits reports whether an id at offset and time now can go in without
// sealing first: there is room, and both deltas fit their fields.
func (t *table) fits(offset uint64, now time.Duration) bool {
	if t.count == 0 {
		return true
	}
	return t.count < t.limit && offset >= t.baseOffset && offset-t.baseOffset <= math.MaxUint32 &&
		now >= t.baseTime && ageOf(now-t.baseTime) <= math.MaxUint32
}

// ageOf is a time after the base in whole milliseconds, rounded up.
func ageOf(d time.Duration) uint64 {
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}

// put remembers hash at offset and time now, replacing an earlier entry
// of the same hash (one that expired, or a log replay's older copy).
// REQUIRES: t.fits(offset, now).
func (t *table) put(hash, offset uint64, now time.Duration) {
	if t.count == 0 {
		t.baseOffset, t.baseTime = offset, now
	}
	e := entry{hash: hash, offset: uint32(offset - t.baseOffset), age: uint32(ageOf(now - t.baseTime))}
	for i := hash & t.mask; ; i = (i + 1) & t.mask {
		slot := &t.slots[i]
		if slot.hash == 0 {
			*slot = e
			t.count++
			break
		}
		if slot.hash == hash {
			*slot = e
			break
		}
	}
	t.maxOffset = max(t.maxOffset, offset)
	t.maxTime = max(t.maxTime, now)
}

// find returns the offset and time hash was remembered at.
func (t *table) find(hash uint64) (uint64, time.Duration, bool) {
	if t.count == 0 {
		return 0, 0, false
	}
	for i := hash & t.mask; ; i = (i + 1) & t.mask {
		slot := &t.slots[i]
		if slot.hash == hash {
			return t.baseOffset + uint64(slot.offset), t.baseTime + time.Duration(slot.age)*time.Millisecond, true
		}
		if slot.hash == 0 {
			return 0, 0, false
		}
	}
}

// sorted returns the entries whose offset is below end, by hash.
func (t *table) sorted(end uint64) []entry {
	out := make([]entry, 0, t.count)
	for _, e := range t.slots {
		if e.hash != 0 && t.baseOffset+uint64(e.offset) < end {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	return out
}
