package consumer

import (
	"github.com/ironbus/ironbus/segment"
)

// Subject filters. A filtered group settles the offsets of records its
// pattern does not match exactly as it settles a retention gap: they are
// done, the cursor moves over them, and the consumer hears of them once,
// as a Gap with reason GapFiltered, coalesced with its neighbours. So a
// filtered group's position always advances and its accounting (delivered
// + acked + gaps) covers every offset.

// GapFiltered is the reason of a gap of records the filter skipped.
const GapFiltered = segment.GapFiltered

// Matcher decides whether a record's subject is wanted
// (*subject.Pattern satisfies it).
type Matcher = segment.Matcher

// filteredReader returns a reader of log from offset that skips what m
// does not match (nil reads everything). A nil *subject.Pattern must not
// become a non-nil Matcher, so the check is on the interface.
func filteredReader(log *segment.Log, from uint64, m Matcher) *segment.Reader {
	reader := log.NewReader(from)
	if m != nil {
		reader.SetFilter(m)
	}
	return reader
}

// matcher returns the group's filter as a Matcher, or the request's when
// the group has none: a group's own filter wins.
func (g *Group) matcher(request Matcher) Matcher {
	if g.filter != nil {
		return g.filter
	}
	return request
}

// Matcher returns the filter a read of this group applies: the group's
// own, or else request (nil: none). The streaming tier, which reads the
// log itself, uses it to filter the same way Read does.
func (g *Group) Matcher(request Matcher) Matcher { return g.matcher(request) }
