package segment

import (
	"container/list"
	"sync"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// openSealed bounds how many sealed segments of a log stay open (mapped,
// with a descriptor and an index) so that memory is a function of
// configuration, not of how much of the backlog readers have touched
// (invariant I8). The least recently opened segment without a reader is
// closed first; it reopens, and rebuilds its index, on its next read.
type openSealed struct {
	mu    sync.Mutex
	limit int
	order *list.List // of *segment, most recent at the front
	items map[*segment]*list.Element
}

func newOpenSealed(limit int) *openSealed {
	return &openSealed{limit: max(limit, 1), order: list.New(), items: map[*segment]*list.Element{}}
}

// touch records that seg was opened or read, and closes the least
// recently used segments beyond the limit that no reader holds.
func (o *openSealed) touch(seg *segment) {
	if seg.replaced.Load() {
		return
	}
	o.mu.Lock()
	if e, ok := o.items[seg]; ok {
		o.order.MoveToFront(e)
	} else {
		o.items[seg] = o.order.PushFront(seg)
	}
	var evict []*segment
	for e := o.order.Back(); e != nil && o.order.Len()-len(evict) > o.limit; e = e.Prev() {
		candidate := e.Value.(*segment)
		if candidate.refs.Load() <= 1 { // only the set's reference: no reader
			evict = append(evict, candidate)
		}
	}
	for _, s := range evict {
		o.order.Remove(o.items[s])
		delete(o.items, s)
	}
	o.mu.Unlock()
	for _, s := range evict {
		s.closeIdle()
	}
}

// forget drops seg (retention removed it).
func (o *openSealed) forget(seg *segment) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.items[seg]; ok {
		o.order.Remove(e)
		delete(o.items, seg)
	}
}

// closeIdle releases the mapping, descriptor and index of a sealed segment
// that stays validated: its holes are kept, so damage is not reported
// twice, and the index is rebuilt from frame lengths when needed.
func (s *segment) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sealed.Load() || s.refs.Load() > 1 || s.replaced.Load() {
		return
	}
	s.closeMappingsLocked()
	if s.mu.file != nil {
		_ = s.mu.file.Close()
		s.mu.file = nil
	}
	s.mu.index = nil
	s.mu.summary = subjectSummary{}
	s.mu.indexBuilt = false
}

// ensureIndexLocked rebuilds the sparse index and the subject summary of a
// validated sealed segment by walking frame lengths (its checksums were
// verified when it was first validated). REQUIRES: s.mu held.
func (s *segment) ensureIndexLocked() {
	if s.mu.indexBuilt || !s.sealed.Load() || !s.mu.validated {
		return
	}
	data, err := s.mappedLocked()
	if err != nil {
		return
	}
	end := int64(s.mu.footer.DataEnd)
	var index []indexEntry
	var dict dictBuilder
	var blocks []subjectMask
	var spots spotBuilder
	last := int64(-indexInterval)
	prior := int64(-1 << 63)
	for pos := int64(format.SegmentDataStart); pos+format.FramePrefixSize <= end; {
		length := int64(frameLength(data[pos:]))
		if length < format.FramePrefixSize || pos+length > end {
			break
		}
		if format.PeekKind(data[pos:]) == format.KindRecord && length >= record.FrameHeaderSize {
			header := data[pos:]
			id := dict.id(recordSubjectBody(data[pos : pos+length]))
			newEntry := pos-last >= indexInterval
			spots.add(id, pos, newEntry)
			if newEntry {
				index = append(index, indexEntry{Offset: le64(header[8:16]), Position: pos, PriorMaxTimestamp: prior})
				blocks = append(blocks, subjectMask{})
				last = pos
			}
			if n := len(blocks); n > 0 {
				blocks[n-1].add(idMask(id))
			}
			prior = max(prior, int64(le64(header[16:24])))
		}
		pos += length
	}
	s.mu.index = index
	spots.finish()
	s.mu.summary = subjectSummary{dict: compactDict(dict.dict), blocks: exactBlocks(blocks),
		spots: spots.truncated(len(index)).exact()}
	s.mu.indexBuilt = true
}
