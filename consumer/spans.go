package consumer

import "sort"

// Span is a half-open range of offsets [From, To).
type Span struct {
	From, To uint64
}

// spanSet is a sorted set of disjoint, non-adjacent spans: the offsets
// done ahead of the cursor (acked, terminated, dead-lettered, or skipped
// as a gap). Ranges instead of a per-offset set keep its size a function
// of the holes between them, which are the unsettled records (bounded by
// MaxUnsettled), not of how far consumers ran ahead.
type spanSet struct {
	spans []Span
}

// add inserts [from, to), merging with neighbours.
func (s *spanSet) add(from, to uint64) {
	if from >= to {
		return
	}
	// first span whose end reaches from (it may touch or overlap)
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].To >= from })
	j := i
	for j < len(s.spans) && s.spans[j].From <= to {
		from = min(from, s.spans[j].From)
		to = max(to, s.spans[j].To)
		j++
	}
	if i == j {
		s.spans = append(s.spans, Span{})
		copy(s.spans[i+1:], s.spans[i:])
		s.spans[i] = Span{From: from, To: to}
		return
	}
	s.spans[i] = Span{From: from, To: to}
	s.spans = append(s.spans[:i+1], s.spans[j:]...)
}

// contains reports whether offset is in the set and, if so, where its
// span ends.
func (s *spanSet) contains(offset uint64) (uint64, bool) {
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].To > offset })
	if i < len(s.spans) && s.spans[i].From <= offset {
		return s.spans[i].To, true
	}
	return 0, false
}

// advance moves cursor over every span that starts at or below it and
// drops those spans; it returns the new cursor.
func (s *spanSet) advance(cursor uint64) uint64 {
	n := 0
	for n < len(s.spans) && s.spans[n].From <= cursor {
		cursor = max(cursor, s.spans[n].To)
		n++
	}
	if n > 0 {
		s.spans = append(s.spans[:0], s.spans[n:]...)
	}
	return cursor
}

func (s *spanSet) len() int { return len(s.spans) }
