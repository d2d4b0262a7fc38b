package consumer

import (
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
)

// Subject filters. A filtered group settles the offsets of records its
// pattern does not match exactly as it settles a retention gap: they are
// done, the cursor moves over them, and the consumer hears of them once,
// as a Gap with reason GapFiltered, coalesced with its neighbours. So a
// filtered group's position always advances and its accounting (delivered
// + acked + gaps) covers every offset.

// GapFiltered is the reason of a gap of records the filter skipped.
const GapFiltered = "filtered"

// Matcher decides whether a record's subject is wanted
// (*subject.Pattern satisfies it).
type Matcher interface {
	Match(subject []byte) bool
}

// skipped returns the one-offset gap standing for a record m does not
// want, or nil. A body that does not decode has no subject, so a filter
// never matches it.
func skipped(m Matcher, entry segment.Entry) *segment.Gap {
	if m == nil {
		return nil
	}
	view, err := format.DecodeBody(entry.Body)
	if err == nil && m.Match(view.Subject) {
		return nil
	}
	return &segment.Gap{From: entry.Offset, To: entry.Offset + 1, Reason: GapFiltered}
}

// matcher returns the group's filter as a Matcher, or the request's when
// the group has none: a group's own filter wins.
func (g *Group) matcher(request Matcher) Matcher {
	if g.filter != nil {
		return g.filter
	}
	return request
}
