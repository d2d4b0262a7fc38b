package segment

import (
	"errors"
	"io"

	"github.com/ironbus/ironbus/record"
)

// Matcher decides whether a record subject passes a reader's filter. It
// must be a pure function of the subject (the summary asks it once per
// distinct subject of a segment and trusts the answer for every record
// carrying it), must not keep the slice, and is called from the reader's
// goroutine only. *subject.Pattern satisfies it.
type Matcher interface {
	Match(subject []byte) bool
}

// GapFiltered is the reason of a gap of records a reader's filter skipped:
// they exist, but their subjects do not match.
const GapFiltered = "filtered"

// SetFilter makes the reader return only records whose subject m matches;
// nil reads every record. The records skipped come back as gaps with
// reason GapFiltered, one per stretch of consecutive non-matching records
// (never merged with a retention or missing gap), and a stretch reaching
// the committed end comes back as a gap up to it, so the reader's position
// always advances and every offset is accounted for exactly once. A body
// this format cannot parse has the empty subject. Call it before reading
// or between reads. A per-block subject summary (summary.go) lets the
// reader skip blocks holding no matching subject without reading them.
func (r *Reader) SetFilter(m Matcher) {
	r.filter = m
	r.forgetSummary()
}

// filterState is the part of a Reader that filtering adds.
type filterState struct {
	filter Matcher
	// skipping marks a stretch of filtered records [skipFrom, next) that
	// the reader passed but has not reported yet.
	skipping bool
	skipFrom uint64
	// held is a gap found right after a filtered stretch, returned by the
	// next call: the stretch's gap goes out first.
	held *Gap
	// What the reader learned from the current segment's subject summary:
	// the dictionary ids its filter matches (of the first learned), and
	// where the block it is in ends.
	matching subjectMask
	learned  int
	blockEnd int64
	// sparse is the plan through the block the reader is in when its
	// matching subjects are sparse there (spots.go).
	sparse sparseBlock
}

// matches reports whether the record with this body passes the filter.
func (r *Reader) matches(body []byte) bool {
	if r.filter == nil {
		return true
	}
	subject, _ := record.Subject(body)
	return r.filter.Match(subject)
}

// skipRecord passes over one filtered record of frameLength bytes,
// extending the pending stretch.
func (r *Reader) skipRecord(frameLength uint32) {
	if !r.skipping {
		r.skipping, r.skipFrom = true, r.next
	}
	r.pos += int64(frameLength)
	r.next++
}

// runVerdict is what a run walk does with a record, filter permitting.
type runVerdict int

const (
	keepRecord runVerdict = iota // add it to the run
	stopRun                      // end the run before it
	passRecord                   // pass over it: a filtered record, before any of the run
)

// judge decides about the record with this body, met count records into
// a run: a run holds consecutive matching records only, and a matching
// record after a filtered stretch waits until the stretch's gap is out.
func (r *Reader) judge(body []byte, count int) runVerdict {
	matched := r.matches(body)
	switch {
	case !matched && count == 0:
		return passRecord
	case !matched || r.skipping:
		return stopRun
	}
	return keepRecord
}

// passInRun passes over the filtered record at pos, of frameLength bytes,
// in a run walk that holds no record yet, and returns the position after
// it. It moves r.pos too; the walk sets it when it returns.
func (r *Reader) passInRun(run *Run, pos int64, frameLength uint32) int64 {
	r.next = run.Next
	r.skipRecord(frameLength)
	run.First, run.Next = r.next, r.next
	return pos + int64(frameLength)
}

// takeFiltered ends the pending stretch at end and returns its gap.
func (r *Reader) takeFiltered(end uint64) *Gap {
	r.skipping = false
	return &Gap{From: r.skipFrom, To: end, Reason: GapFiltered}
}

// takeHeld returns the gap held back by the last call, if any.
func (r *Reader) takeHeld() *Gap {
	held := r.held
	r.held = nil
	return held
}

// settle is what a read returns for a gap or an error from the walk when
// a filtered stretch may be pending: the stretch's gap first (holding the
// other gap for the next call), so filtered gaps stay coalesced and never
// absorb a gap with another reason. A stretch survives an error other
// than the end of the data, so a retried read still reports it.
func (r *Reader) settle(gap *Gap, err error) (*Gap, error) {
	if !r.skipping {
		return gap, err
	}
	switch {
	case gap != nil:
		r.held = gap
		return r.takeFiltered(gap.From), nil
	case err == nil || errors.Is(err, io.EOF):
		return r.takeFiltered(r.next), nil
	}
	return nil, err
}

// position is where the next entry a caller will see starts: the start of
// a pending or held gap, or the next offset.
func (r *Reader) position() uint64 {
	switch {
	case r.skipping:
		return r.skipFrom
	case r.held != nil:
		return r.held.From
	}
	return r.next
}
