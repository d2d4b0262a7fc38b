package segment

import (
	"bytes"
	"sort"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// The subject summary lets a filtered reader skip whole blocks of a segment
// without reading them. A block is the span between two entries of the
// sparse index (about indexInterval bytes of frames): block i starts at
// index[i].Position and ends where block i+1 starts, or at the end of the
// data. Per segment the summary keeps a small dictionary of the distinct
// subjects met first (ids by first occurrence, at most summaryMaxSubjects
// of them and summaryMaxBytes of subject bytes; later subjects are
// "unknown"), and per block a 128-bit mask of the ids of its records, whose
// last bit means "a record with an unknown subject is here". 16 bytes per
// 64 KiB block: 16 KiB for a full 64 MiB segment, plus the dictionary.
//
// It lives beside the index and under the same rules: built by the
// appender as it writes, by the scanner on recovery and on the first read
// of a sealed segment, and again whenever a sealed segment that went idle
// rebuilds its index; dropped with the index; written to disk only in the
// clean-stop marker (cleanstop.go).
//
// Invariants (the reader relies on them to skip):
//   - S1 len(blocks) == len(index): bitmap i describes block i.
//   - S2 a bitmap may claim more than its block holds (a record of a
//     batch recovery later dropped leaves its bit), never less: every
//     record in block i has its subject's id bit, or the unknown bit, set.
//   - S3 ids are stable for as long as the index is built: the dictionary
//     only grows, and a reader holds a reference on its segment, so the
//     index (and the summary with it) cannot be dropped and rebuilt under
//     it; a reader learns the ids afresh each time it enters a segment.
//
// A reader skips a block only when its bitmap has no id the filter matches
// and no unknown bit, and no hole (damage, skip frame) overlaps it: the
// records of such a block are exactly the offsets from its first record to
// the next block's first record, none of which can match.
const (
	summaryMaxSubjects = 127 // ids 0..126; bit 127 is the unknown bit
	summaryMaxBytes    = 4 << 10
	summarySlots       = 256 // open-addressing table, at most half full
)

// subjectMask is a set of dictionary ids, plus the unknown bit.
type subjectMask [2]uint64

var unknownSubject = subjectMask{0, 1 << 63}

func maskOf(id int) subjectMask {
	var m subjectMask
	m[id/64] = 1 << (id % 64)
	return m
}

func (m *subjectMask) add(other subjectMask) {
	m[0] |= other[0]
	m[1] |= other[1]
}

func (m subjectMask) intersects(other subjectMask) bool {
	return m[0]&other[0] != 0 || m[1]&other[1] != 0
}

// subjectDict is a segment's dictionary as readers see it: subject id i is
// slab[ends[i-1]:ends[i]]. Both slices only ever grow by appending, so a
// copy of the slice headers taken under the segment's lock stays valid
// while the appender adds subjects behind it.
type subjectDict struct {
	slab []byte
	ends []uint16
}

func (d subjectDict) subject(id int) []byte {
	start := uint16(0)
	if id > 0 {
		start = d.ends[id-1]
	}
	return d.slab[start:d.ends[id]:d.ends[id]]
}

// subjectSummary is what a segment holds (under segment.mu).
type subjectSummary struct {
	dict   subjectDict
	blocks []subjectMask // one per index entry (S1)
	spots  blockSpots    // where a block's sparse subjects are (spots.go)
}

// memoryBytes is what the summary keeps allocated.
func (s *subjectSummary) memoryBytes() int {
	return cap(s.dict.slab) + 2*cap(s.dict.ends) + 16*cap(s.blocks) + 4*cap(s.spots.spots) + 4*cap(s.spots.ends)
}

// dictBuilder assigns subject ids while a summary is built. It is owned by
// one goroutine: the appender for the active segment, or whoever scans or
// rebuilds a sealed one.
type dictBuilder struct {
	dict  subjectDict
	slots [summarySlots]uint8 // id+1 by hash; 0 is empty
	// last caches the previous lookup: clustered subjects repeat.
	last    []byte
	lastID  int
	lastSet bool
}

// reset starts a dictionary for a new segment. The slab and ends of the
// previous one stay with that segment: they are never reused.
func (b *dictBuilder) reset() { *b = dictBuilder{} }

// mask returns the mask of a record whose body is body.
func (b *dictBuilder) mask(body []byte) subjectMask {
	return idMask(b.id(body))
}

// unknownID is what id returns for a subject the dictionary has no room
// for.
const unknownID = summaryMaxSubjects

// id returns the dictionary id of the subject of a record whose body is
// body, assigning the next one to a new subject while there is room.
func (b *dictBuilder) id(body []byte) int {
	subject, _ := record.Subject(body)
	if b.lastSet && bytes.Equal(subject, b.last) {
		return b.lastID
	}
	slot := int(format.XXH3(subject) % summarySlots)
	for b.slots[slot] != 0 {
		id := int(b.slots[slot]) - 1
		if known := b.dict.subject(id); bytes.Equal(known, subject) {
			b.last, b.lastID, b.lastSet = known, id, true
			return id
		}
		slot = (slot + 1) % summarySlots
	}
	if len(b.dict.ends) >= summaryMaxSubjects || len(b.dict.slab)+len(subject) > summaryMaxBytes {
		return unknownID
	}
	id := len(b.dict.ends)
	b.dict.slab = append(b.dict.slab, subject...)
	b.dict.ends = append(b.dict.ends, uint16(len(b.dict.slab)))
	b.slots[slot] = uint8(id + 1)
	b.last, b.lastID, b.lastSet = b.dict.subject(id), id, true
	return id
}

// idMask is the mask of dictionary id id, or the unknown bit.
func idMask(id int) subjectMask {
	if id == unknownID {
		return unknownSubject
	}
	return maskOf(id)
}

// adopt continues a dictionary built by a recovery scan, so the appender
// gives the subjects already in the segment the ids the summary uses.
func (b *dictBuilder) adopt(scanned *dictBuilder) {
	*b = *scanned
	b.last, b.lastSet = nil, false
}

// blockBits accumulates the masks of blocks as records are met, aligned
// with a list of new index entries: carry collects the records before the
// first new entry (they belong to the last block already published), and
// fresh[i] the records from new entry i on.
type blockBits struct {
	carry subjectMask
	fresh []subjectMask
}

// add records the mask of a record; newEntry says the record opened a
// block.
func (bb *blockBits) add(mask subjectMask, newEntry bool) {
	switch {
	case newEntry:
		bb.fresh = append(bb.fresh, mask)
	case len(bb.fresh) > 0:
		bb.fresh[len(bb.fresh)-1].add(mask)
	default:
		bb.carry.add(mask)
	}
}

func (bb *blockBits) clear() {
	bb.carry = subjectMask{}
	bb.fresh = bb.fresh[:0]
}

// appendTo adds the accumulated bits to blocks, the bitmaps of the blocks
// already published: the carry joins the last of them (records before any
// block has none to join and are never skipped).
func (bb *blockBits) appendTo(blocks []subjectMask) []subjectMask {
	if n := len(blocks); n > 0 {
		blocks[n-1].add(bb.carry)
	}
	return append(blocks, bb.fresh...)
}

// exactBlocks returns a copy of blocks without spare capacity: a sealed
// segment's summary no longer grows.
func exactBlocks(blocks []subjectMask) []subjectMask {
	return append([]subjectMask(nil), blocks...)
}

// compactDict returns a copy of a built dictionary holding only its bytes:
// a sealed segment's summary no longer grows.
func compactDict(d subjectDict) subjectDict {
	return subjectDict{slab: append([]byte(nil), d.slab...), ends: append([]uint16(nil), d.ends...)}
}

// recordSubjectBody returns the body of the record frame at the start of
// frame, clipped to frame: the summary reads only the subject from it.
func recordSubjectBody(frame []byte) []byte {
	if len(frame) < record.FrameHeaderSize {
		return nil
	}
	end := min(record.FrameHeaderSize+int(le32(frame[24:28])), len(frame))
	return frame[record.FrameHeaderSize:end]
}

// skipBlocks moves a filtered reader standing at the start of a block past
// that block and every following one whose summary proves no record in it
// matches, extending the pending filtered stretch; it reports whether it
// moved. Either way it notes where the block the reader is in ends, so the
// summary is consulted once per block, not per record.
func (r *Reader) skipBlocks(committed *mark) bool {
	limit := r.limit(committed)
	s := r.seg
	s.mu.Lock()
	defer s.mu.Unlock()
	index, blocks := s.mu.index, s.mu.summary.blocks
	if len(blocks) != len(index) || len(index) == 0 {
		r.blockEnd = max(limit, r.pos+1)
		return false
	}
	r.learnSubjects(s.mu.summary.dict)
	i := sort.Search(len(index), func(i int) bool { return index[i].Position > r.pos }) - 1
	moved := false
	for ; i >= 0 && i < len(index) && index[i].Position == r.pos; i++ {
		end, next, whole := s.blockSpanLocked(i, limit, committed)
		if !whole || blocks[i].intersects(unknownSubject) || next < r.next || s.holeWithinLocked(r.pos, end) {
			break
		}
		if blocks[i].intersects(r.matching) {
			r.planSparse(i, end, next)
			break
		}
		if !r.skipping {
			r.skipping, r.skipFrom = true, r.next
		}
		r.pos, r.next, moved = end, next, true
	}
	switch {
	case i < 0:
		r.blockEnd = index[0].Position
	case i+1 < len(index):
		r.blockEnd = index[i+1].Position
	default:
		r.blockEnd = limit
	}
	r.blockEnd = max(r.blockEnd, r.pos+1)
	return moved
}

// learnSubjects asks the filter about the dictionary subjects it has not
// seen yet: once per subject per segment entered.
func (r *Reader) learnSubjects(dict subjectDict) {
	for ; r.learned < len(dict.ends); r.learned++ {
		if r.filter.Match(dict.subject(r.learned)) {
			r.matching.add(maskOf(r.learned))
		}
	}
}

// forgetSummary resets what the reader learned about a segment's summary:
// it entered another segment, or its filter changed.
func (r *Reader) forgetSummary() {
	r.matching, r.learned, r.blockEnd = subjectMask{}, 0, 0
	r.sparse.active = false
}

// blockSpanLocked returns where block i ends and the offset of the first
// record after it, as far as the readable data goes; whole is false when
// the readable data ends inside the block at a point whose next offset is
// unknown. REQUIRES: s.mu held.
func (s *segment) blockSpanLocked(i int, limit int64, committed *mark) (end int64, next uint64, whole bool) {
	index := s.mu.index
	if i+1 < len(index) && index[i+1].Position <= limit {
		return index[i+1].Position, index[i+1].Offset, true
	}
	switch {
	case limit <= index[i].Position:
		return 0, 0, false
	case committed.seg == s && limit == committed.pos:
		// The committed mark ends inside the block or is its end: it
		// names the next offset there.
		return limit, committed.next, true
	case i+1 == len(index) && s.sealed.Load() && limit == int64(s.mu.footer.DataEnd):
		return limit, s.mu.next, true
	}
	return 0, 0, false
}

// holeWithinLocked reports whether a hole overlaps bytes [start, end).
// REQUIRES: s.mu held.
func (s *segment) holeWithinLocked(start, end int64) bool {
	for _, h := range s.mu.holes {
		if h.Start < end && h.End > start {
			return true
		}
	}
	return false
}
