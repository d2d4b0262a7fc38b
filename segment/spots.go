package segment

import (
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// Spots extend the subject summary for subjects that are rare inside a
// block but not absent from it: a filter matching 1 record in 100,
// interleaved with the rest, finds its subject in every block, so the
// bitmap skips nothing. For each block the summary also lists where the
// records of its sparse subjects start (a "spot": the dictionary id and
// the position relative to the block start, which is below indexInterval
// and so fits 16 bits). A filtered reader entering a block in which every
// subject it matches has spots jumps from spot to spot, reads only those
// records, and reports the rest of the block as filtered without reading
// it.
//
// Invariants (the reader relies on them to jump):
//   - P1 len(ends) <= len(blocks): ends[i] closes the spots of block i,
//     and a block at or past len(ends) has none listed (its builder has not
//     finished it: the last block of the active segment).
//   - P2 all or nothing per subject: a block that lists a spot of subject
//     id lists every record of id in the block. A subject met more than
//     spotMaxPerSubject times in a block is dense there and lists none; a
//     block whose spots would pass spotMaxPerBlock, or the segment's
//     spotMaxPerSegment, or whose records the builder could not all see
//     (spoiled), lists none. A subject present in the bitmap with no spot
//     is therefore read record by record, as before.
//   - P3 spots are fed only for records that were accepted: written
//     (appender) or closed by a valid commit frame (recovery scan), in the
//     same order and with the same block starts as the index entries.
//
// Memory: 4 bytes per spot, at most spotMaxPerSegment (64 KiB) per segment,
// plus 4 bytes per block for ends (4 KiB for a full 64 MiB segment).
const (
	spotMaxPerSubject = 8
	spotMaxPerBlock   = 16
	spotMaxPerSegment = 16 << 10
	spotMaxRelative   = 1<<16 - 1
)

func makeSpot(id int, relative int64) uint32 { return uint32(id)<<16 | uint32(relative) }

func spotID(spot uint32) int         { return int(spot >> 16) }
func spotRelative(spot uint32) int64 { return int64(spot & 0xffff) }

// blockSpots is what a segment publishes. Both slices only grow by
// appending while the segment is active, so a copy of the headers taken
// under the segment's lock stays valid (as subjectDict).
type blockSpots struct {
	spots []uint32
	ends  []uint32
}

// of returns the spots of block i; REQUIRES: i < len(b.ends).
func (b blockSpots) of(i int) []uint32 {
	start := uint32(0)
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.spots[start:b.ends[i]]
}

// exact returns a copy without spare capacity: a sealed segment's spots no
// longer grow.
func (b blockSpots) exact() blockSpots {
	return blockSpots{spots: append([]uint32(nil), b.spots...), ends: append([]uint32(nil), b.ends...)}
}

// truncated keeps the spots of the first n blocks, padding with empty
// blocks (read record by record) when fewer are finished.
func (b blockSpots) truncated(n int) blockSpots {
	n = max(n, 0)
	for len(b.ends) < n {
		b.ends = append(b.ends, uint32(len(b.spots)))
	}
	b.ends = b.ends[:n]
	if n == 0 {
		b.spots = b.spots[:0]
	} else {
		b.spots = b.spots[:b.ends[n-1]]
	}
	return b
}

// spotBuilder collects the spots of the block being built. It is owned by
// whoever builds the summary (see dictBuilder).
type spotBuilder struct {
	blockSpots
	counts  [summaryMaxSubjects]uint8 // records per id in the current block, saturating
	current []uint32                  // spots of the current block, dense ones included
	start   int64                     // position of the current block
	open    bool
	spoiled bool // the current block lists no spots whatever it holds
}

// reset starts a new segment; the published slices stay with the old one.
func (b *spotBuilder) reset() {
	b.blockSpots = blockSpots{}
	b.open, b.spoiled = false, false
	b.current = b.current[:0]
}

// add records a record of subject id at position pos; newEntry says it
// opened a block (it has an index entry).
func (b *spotBuilder) add(id int, pos int64, newEntry bool) {
	if newEntry {
		b.finish()
		b.open, b.start, b.spoiled = true, pos, false
		b.counts = [summaryMaxSubjects]uint8{}
		b.current = b.current[:0]
	}
	if !b.open || b.spoiled || id >= summaryMaxSubjects {
		return
	}
	relative := pos - b.start
	if relative < 0 || relative > spotMaxRelative {
		b.spoiled = true
		return
	}
	if b.counts[id] > spotMaxPerSubject {
		return
	}
	b.counts[id]++
	if b.counts[id] <= spotMaxPerSubject {
		b.current = append(b.current, makeSpot(id, relative))
	}
}

// finish closes the current block, keeping its sparse subjects' spots
// when they fit (P2).
func (b *spotBuilder) finish() {
	if !b.open {
		return
	}
	b.open = false
	kept := 0
	if !b.spoiled {
		for _, spot := range b.current {
			if b.counts[spotID(spot)] <= spotMaxPerSubject {
				kept++
			}
		}
	}
	if kept <= spotMaxPerBlock && len(b.spots)+kept <= spotMaxPerSegment && kept > 0 {
		for _, spot := range b.current {
			if b.counts[spotID(spot)] <= spotMaxPerSubject {
				b.spots = append(b.spots, spot)
			}
		}
	}
	b.ends = append(b.ends, uint32(len(b.spots)))
}

// continueFrom makes the builder continue a segment a recovery scan built:
// the scanned spots of every block but the last, which the appender goes
// on filling; that block lists none (spoiled), as the builder did not see
// its earlier records.
func (b *spotBuilder) continueFrom(scanned blockSpots, index []indexEntry) {
	b.reset()
	if len(index) == 0 {
		return
	}
	b.blockSpots = scanned.truncated(len(index) - 1)
	b.open, b.spoiled, b.start = true, true, index[len(index)-1].Position
}

// pendingSpot is a record whose spot waits until the record is accepted
// (P3).
type pendingSpot struct {
	pos      int64
	id       int
	newEntry bool
}

func (b *spotBuilder) addPending(pending []pendingSpot) {
	for _, p := range pending {
		b.add(p.id, p.pos, p.newEntry)
	}
}

// sparseBlock is a filtered reader's plan for the block it is in: the
// positions of the records that may match, ascending, and where the block
// ends. Records between them are reported as filtered without being read.
type sparseBlock struct {
	active  bool
	at      []int64
	next    int // index into at of the next record to reach
	end     int64
	endNext uint64 // the offset of the first record after the block
}

// planSparse sets up a jump through block i (ending at end, where the
// record after it has offset next) when every subject of the block that
// the filter matches has spots there. REQUIRES: r.seg.mu held; the
// reader stands at the block's start.
func (r *Reader) planSparse(i int, end int64, next uint64) {
	s := r.seg
	spots, index := s.mu.summary.spots, s.mu.index
	plan := &r.sparse
	plan.active = false
	// Only a block whose end is its successor's start (or a sealed
	// segment's end) is trusted: a block the committed mark cuts short
	// is read record by record.
	if i >= len(spots.ends) || !(i+1 < len(index) && end == index[i+1].Position || s.sealed.Load()) {
		return
	}
	wanted := s.mu.summary.blocks[i]
	wanted[0] &= r.matching[0]
	wanted[1] &= r.matching[1]
	var listed subjectMask
	plan.at = plan.at[:0]
	start := index[i].Position
	for _, spot := range spots.of(i) {
		id := spotID(spot)
		if mask := maskOf(id); mask.intersects(r.matching) {
			listed.add(mask)
			if at := start + spotRelative(spot); at < end {
				plan.at = append(plan.at, at)
			}
		}
	}
	if wanted[0]&^listed[0] != 0 || wanted[1]&^listed[1] != 0 {
		return // a matching subject is dense here
	}
	plan.active, plan.next, plan.end, plan.endNext = true, 0, end, next
}

// jumpSparse moves a reader with an active plan to the next record that
// may match, or past the block when none is left, extending the pending
// filtered stretch over the records it passes; it reports whether it
// moved. A spot that does not hold a record where the plan expects one
// ends the plan, and the block is read record by record from where the
// reader stands.
func (r *Reader) jumpSparse(committed *mark, runs bool) bool {
	plan := &r.sparse
	for plan.next < len(plan.at) && plan.at[plan.next] < r.pos {
		plan.next++
	}
	switch {
	case r.pos >= plan.end:
		plan.active = false
		return false
	case plan.next < len(plan.at) && plan.at[plan.next] == r.pos:
		return false // the record path reads it
	case plan.next == len(plan.at):
		plan.active = false
		if plan.endNext < r.next {
			return false
		}
		r.passTo(plan.end, plan.endNext)
		return true
	}
	target := plan.at[plan.next]
	h, ok := r.headerAt(target, committed, runs)
	if !ok || h.Offset >= plan.endNext || target+int64(h.FrameLength) > plan.end {
		plan.active = false
		return false
	}
	if h.Offset < r.next {
		// Below the reader's offset: so is everything before it.
		r.pos = target + int64(h.FrameLength)
		plan.next++
		return true
	}
	r.passTo(target, h.Offset)
	return true
}

// passTo moves the reader to position pos, where the record with offset
// next starts, extending the filtered stretch over the offsets between.
func (r *Reader) passTo(pos int64, next uint64) {
	if next > r.next {
		if !r.skipping {
			r.skipping, r.skipFrom = true, r.next
		}
		r.next = next
	}
	r.pos = pos
}

// sparseChunk is what a jump reads of the active segment when the
// reader's window does not hold the record already: one short record and
// its neighbours, not the readChunk a record-by-record walk wants (the
// next jump is usually further away than that).
const sparseChunk = 4 << 10

// headerAt decodes the record header at pos, through the reader's window
// for runs or its buffer for entries so the record path finds it there.
func (r *Reader) headerAt(pos int64, committed *mark, runs bool) (record.FrameHeader, bool) {
	limit := r.limit(committed)
	var head []byte
	var err error
	if runs {
		head, err = r.window(pos, sparseChunk, limit)
	} else {
		head, err = r.bytesAtChunk(pos, record.FrameHeaderSize, limit, sparseChunk)
	}
	if err != nil || len(head) < record.FrameHeaderSize || format.PeekKind(head) != format.KindRecord {
		return record.FrameHeader{}, false
	}
	h, err := record.ParseFrameHeader(head, r.log.opts.MaxRecordBytes)
	return h, err == nil
}
