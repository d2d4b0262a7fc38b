package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// The scanner walks the frames of one segment image and classifies every
// byte: intact batches, skip frames left by an earlier recovery, damage
// inside committed data, a torn tail and the footer. It never trusts a
// record until the commit frame closing its batch has verified, and it
// never resynchronises on anything weaker than an intact commit frame that
// carries this segment's random token.

// indexEntry is one point of the sparse offset and time index: the record
// with Offset starts at Position, and every record before it in the segment
// has a timestamp of at most PriorMaxTimestamp (an exclusive prefix
// maximum, so a seek by time is exact even when wall time steps back).
type indexEntry struct {
	Offset            uint64
	Position          int64
	PriorMaxTimestamp int64
}

// hole is a range of offsets a segment does not hold, with the reason.
type hole struct {
	First  uint64 // inclusive
	Count  uint64
	Start  int64 // byte range of the region in the segment
	End    int64
	Reason Reason
	// Known marks a gap found as a skip frame: reported when an earlier
	// recovery or read found it, not now.
	Known bool
}

// damage is a damaged region found by a scan: the batch starting at Start
// failed and the next intact batch starts at End.
type damage struct {
	Start, End   int64
	FirstLost    uint64
	LostCount    uint64
	Reason       Reason
	Detail       string
	MaybeUnacked bool
}

// tornTail is the unacknowledged region after the last intact frame.
type tornTail struct {
	Start, End int64 // End is one past the last non-zero byte
	Reason     Reason
	Detail     string
}

type scanResult struct {
	End          int64  // position after the last intact frame: appends resume here
	NextOffset   uint64 // one past the last intact record (or hole)
	FirstOffset  uint64 // first intact record; valid when Records > 0
	Records      uint64
	MinTimestamp int64
	MaxTimestamp int64
	Footer       *format.Footer
	Holes        []hole
	Damage       []damage
	Torn         *tornTail
	Index        []indexEntry
	Blocks       []subjectMask // subject mask per entry of Index (summary.go)
	Dict         dictBuilder   // the subject ids Blocks uses
	// Spots of the finished blocks of Index: all of a sealed segment's,
	// all but the last of another (its appender goes on filling it).
	Spots  blockSpots
	TooNew error // the scan stopped at data from a newer format
}

// scanLimits tell the scanner where the frames of a segment end.
type scanLimits struct {
	// End bounds the frames: the footer position of a sealed segment, or
	// the image length.
	End int64
	// Sealed says every byte before End was synced when the segment was
	// sealed: nothing in it can be torn, so any damage is data loss, and
	// SealedNext (one past the footer's last offset) tells which offsets a
	// damaged tail held.
	Sealed     bool
	SealedNext uint64
	// TornAllowed marks the last segment of a log: the only place writes
	// the last sync did not cover can be. Damage there that no later
	// commit frame proves acknowledged is classified as a torn tail (see
	// finish).
	TornAllowed bool
}

type scanner struct {
	data    []byte
	base    uint64
	limits  scanLimits
	limit   int64
	token   uint64
	maxBody uint32
	result  scanResult

	pos          int64
	batchStart   int64
	batchExpect  uint64 // offset the current batch must start at
	expect       uint64 // offset the next record must carry
	pending      []indexEntry
	pendingBits  blockBits // subject bitmaps of the pending records
	pendingSpots []pendingSpot
	spots        spotBuilder // fed at each commit frame (spots.go P3)
	pendingMin   int64
	pendingMax   int64
	pendingN     uint64
	// pendingControl: the batch being read holds a control frame, which
	// a commit frame of no records must close next.
	pendingControl bool
	runningMax     int64 // max timestamp of accepted and pending records
	acceptedMax    int64 // max timestamp of accepted records
	lastIndexed    int64
	reachedZeros   bool
	checkpoints    []scanCheckpoint // one per entry of result.Damage
}

// scanCheckpoint is the result as it stood when a damage was found, so a
// damage later reclassified as a torn tail can drop everything after it.
type scanCheckpoint struct {
	end          int64
	next         uint64
	records      uint64
	minTS, maxTS int64
	index, holes int
	proven       bool // a later commit frame says the lost offsets were durable
}

// scanSegment classifies data, the image of a segment whose header gave
// token and base.
func scanSegment(data []byte, token, base uint64, maxBody uint32, limits scanLimits) scanResult {
	s := &scanner{data: data, base: base, limits: limits, limit: min(limits.End, int64(len(data))), token: token,
		maxBody: maxBody, pos: format.SegmentDataStart, batchStart: format.SegmentDataStart,
		batchExpect: base, expect: base, lastIndexed: -indexInterval,
		runningMax: math.MinInt64, acceptedMax: math.MinInt64}
	s.result = scanResult{End: format.SegmentDataStart, NextOffset: base,
		MinTimestamp: math.MaxInt64, MaxTimestamp: math.MinInt64}
	s.run()
	s.finish()
	finished := len(s.result.Index) - 1
	if limits.Sealed {
		s.spots.finish()
		finished = len(s.result.Index)
	}
	s.result.Spots = s.spots.truncated(finished)
	return s.result
}

func (s *scanner) run() {
	for s.pos < s.limit {
		var err error
		var reason Reason
		switch format.PeekKind(s.data[s.pos:s.limit]) {
		case format.KindRecord:
			reason, err = s.record()
		case format.KindCommit:
			reason, err = ReasonCorruptCommit, s.commit()
		case format.KindSkip:
			reason, err = ReasonCorruptFrame, s.skip()
		case format.KindControl:
			reason, err = ReasonCorruptFrame, s.control()
		case format.KindFooter:
			// A sealed region ends before its footer, so a footer inside
			// one is out of place.
			if !s.limits.Sealed && s.footer() {
				return
			}
			reason, err = ReasonCorruptFrame, errors.New("footer frame out of place")
		case format.KindNone:
			if format.IsZero(s.data[s.pos:s.limit]) {
				s.reachedZeros = true
				return
			}
			reason, err = ReasonCorruptFrame, errors.New("zero bytes followed by data")
		default:
			reason, err = ReasonCorruptFrame, fmt.Errorf("unknown frame magic %q", s.data[s.pos:s.pos+2])
		}
		if err != nil {
			// Storage frames and record frames are versioned apart.
			if errors.Is(err, format.ErrTooNew) || errors.Is(err, record.ErrTooNew) {
				s.result.TooNew = err
				return
			}
			if !s.damaged(reason, err) {
				return
			}
		}
	}
}

func (s *scanner) record() (Reason, error) {
	if s.pendingControl {
		return ReasonCorruptRecordHeader, errors.New("record after a control frame in one batch")
	}
	h, err := record.ParseFrameHeader(s.data[s.pos:s.limit], s.maxBody)
	if err != nil {
		return ReasonCorruptRecordHeader, err
	}
	if s.pos+int64(h.FrameLength) > s.limit {
		return ReasonCorruptRecordHeader, fmt.Errorf("%w: record of %d bytes runs past the data", record.ErrShort, h.FrameLength)
	}
	body, err := record.VerifyFrame(s.data[s.pos:s.limit], h)
	if err != nil {
		return ReasonCorruptRecordBody, err
	}
	if h.Offset != s.expect {
		return ReasonOffsetMismatch, fmt.Errorf("record carries offset %d, expected %d", h.Offset, s.expect)
	}
	newEntry := s.pos-s.lastIndexed >= indexInterval
	if newEntry {
		s.pending = append(s.pending, indexEntry{Offset: h.Offset, Position: s.pos, PriorMaxTimestamp: s.runningMax})
		s.lastIndexed = s.pos
	}
	id := s.result.Dict.id(body)
	s.pendingBits.add(idMask(id), newEntry)
	s.pendingSpots = append(s.pendingSpots, pendingSpot{pos: s.pos, id: id, newEntry: newEntry})
	s.runningMax = max(s.runningMax, h.Timestamp)
	if s.pendingN == 0 {
		s.pendingMin, s.pendingMax = h.Timestamp, h.Timestamp
	}
	s.pendingMin = min(s.pendingMin, h.Timestamp)
	s.pendingMax = max(s.pendingMax, h.Timestamp)
	s.pendingN++
	s.expect++
	s.pos += int64(h.FrameLength)
	return 0, nil
}

func (s *scanner) commit() error {
	c, err := format.DecodeCommit(s.data[s.pos:s.limit])
	if err != nil {
		return err
	}
	batch := s.data[s.batchStart:s.pos]
	switch {
	case c.Token != s.token:
		return fmt.Errorf("commit frame token %016x, segment token %016x", c.Token, s.token)
	case s.pendingControl != (c.Count == 0):
		return fmt.Errorf("commit frame of %d records closes a batch of %d records", c.Count, s.pendingN)
	case (s.pendingN == 0 && !s.pendingControl) || uint64(c.Count) != s.pendingN || c.FirstOffset != s.batchExpect:
		return fmt.Errorf("commit frame closes %d records from %d, batch holds %d from %d", c.Count, c.FirstOffset, s.pendingN, s.batchExpect)
	case int64(c.BatchLength) != s.pos-s.batchStart:
		return fmt.Errorf("commit frame covers %d bytes, batch has %d", c.BatchLength, s.pos-s.batchStart)
	case format.CRC(batch) != c.BatchCRC:
		return fmt.Errorf("batch checksum %08x, commit frame says %08x", format.CRC(batch), c.BatchCRC)
	}
	r := &s.result
	if s.pendingControl {
		s.pos += format.CommitFrameSize
		s.acceptUpTo(s.pos, s.expect)
		return nil
	}
	if r.Records == 0 {
		r.FirstOffset = c.FirstOffset
	}
	r.Records += s.pendingN
	r.MinTimestamp = min(r.MinTimestamp, s.pendingMin)
	r.MaxTimestamp = max(r.MaxTimestamp, s.pendingMax)
	r.Index = append(r.Index, s.pending...)
	r.Blocks = s.pendingBits.appendTo(r.Blocks)
	s.spots.addPending(s.pendingSpots)
	for i := range s.checkpoints {
		if c.DurableNext > r.Damage[i].FirstLost {
			s.checkpoints[i].proven = true
		}
	}
	s.acceptedMax = s.runningMax
	s.pos += format.CommitFrameSize
	s.acceptUpTo(s.pos, s.expect)
	return nil
}

// acceptUpTo records that everything before pos is intact and the next
// batch starts there with offset next.
func (s *scanner) acceptUpTo(pos int64, next uint64) {
	s.result.End = pos
	s.result.NextOffset = next
	s.batchStart = pos
	s.batchExpect = next
	s.expect = next
	s.pending = s.pending[:0]
	s.pendingBits.clear()
	s.pendingSpots = s.pendingSpots[:0]
	s.pendingN = 0
	s.pendingControl = false
	s.runningMax = s.acceptedMax
}

// control reads a control frame: it owns no offsets and stands alone in
// its batch, closed by a commit frame of no records.
func (s *scanner) control() error {
	c, err := format.DecodeControl(s.data[s.pos:s.limit], s.maxBody)
	switch {
	case err != nil:
		return err
	case c.Token != s.token:
		return fmt.Errorf("control frame token %016x, segment token %016x", c.Token, s.token)
	case s.pendingN != 0 || s.pendingControl || s.pos != s.batchStart:
		return errors.New("control frame inside a batch")
	}
	s.pendingControl = true
	s.pos += int64(format.ControlFrameSize(len(c.Payload)))
	return nil
}

func (s *scanner) skip() error {
	k, err := format.DecodeSkip(s.data[s.pos:s.limit])
	switch {
	case err != nil:
		return err
	case k.Token != s.token:
		return fmt.Errorf("skip frame token %016x, segment token %016x", k.Token, s.token)
	case s.pendingN != 0 || s.pos != s.batchStart:
		return errors.New("skip frame inside a batch")
	case s.pos+int64(k.Length) > s.limit:
		return fmt.Errorf("skip frame of %d bytes runs past the data", k.Length)
	case k.FirstLost != s.expect || k.LostCount > math.MaxUint64-k.FirstLost:
		return fmt.Errorf("skip frame starts at offset %d, expected %d", k.FirstLost, s.expect)
	}
	end := s.pos + int64(k.Length)
	s.result.Holes = append(s.result.Holes, hole{First: k.FirstLost, Count: k.LostCount,
		Start: s.pos, End: end, Reason: Reason(k.ReasonCode), Known: true})
	s.pos = end
	s.acceptUpTo(end, k.FirstLost+k.LostCount)
	return nil
}

// footer accepts a footer frame at the current position; false means the
// bytes only looked like one.
func (s *scanner) footer() bool {
	f, err := format.DecodeFooter(s.data[s.pos:s.limit])
	if err != nil || f.Token != s.token || f.BaseOffset != s.base || s.pendingN != 0 || s.pendingControl ||
		int64(f.DataEnd) != s.pos || f.NextOffset < s.result.NextOffset {
		return false
	}
	s.result.Footer = &f
	return true
}

// finish classifies what follows the last intact frame. In a sealed region
// every byte up to the footer was synced, so anything short of it is damage;
// elsewhere records without their commit frame are a torn tail.
func (s *scanner) finish() {
	r := &s.result
	if s.limits.Sealed {
		if r.End < s.limit || r.NextOffset < s.limits.SealedNext {
			s.damageTo(s.limit, ReasonCorruptCommit, "intact data ends before the footer")
		}
		return
	}
	if s.reachedZeros && s.pos > s.batchStart && r.Torn == nil {
		r.Torn = &tornTail{Start: s.batchStart, End: s.pos, Reason: ReasonTornTail,
			Detail: fmt.Sprintf("%d records without a commit frame", s.pendingN)}
	}
	s.reclassifyUnproven()
}

// reclassifyUnproven turns the first damage that no later commit frame
// proves acknowledged into a torn tail, when torn writes are possible here.
// A power cut that reorders unsynced writes leaves exactly that: a batch
// torn, a later (equally unacknowledged) batch intact. Everything from the
// damage on is dropped as unacknowledged. Proof is the DurableNext hint: a
// batch written after the lost offsets were synced says so, and then the
// damage is real loss.
func (s *scanner) reclassifyUnproven() {
	r := &s.result
	for i := range s.checkpoints {
		if s.checkpoints[i].proven {
			r.Damage[i].MaybeUnacked = false
		}
	}
	if r.Footer != nil {
		// A footer is written only after everything before it was synced:
		// nothing before it is torn, and every damage is loss.
		for i := range r.Damage {
			r.Damage[i].MaybeUnacked = false
		}
		return
	}
	if !s.limits.TornAllowed {
		return
	}
	for i, cp := range s.checkpoints {
		if cp.proven {
			continue
		}
		d := r.Damage[i]
		end := lastNonZero(s.data, d.Start, s.limit)
		r.End, r.NextOffset, r.Records = cp.end, cp.next, cp.records
		r.MinTimestamp, r.MaxTimestamp = cp.minTS, cp.maxTS
		r.Index, r.Blocks, r.Holes = r.Index[:cp.index], r.Blocks[:cp.index], r.Holes[:cp.holes]
		r.Damage = r.Damage[:i]
		r.Torn = &tornTail{Start: d.Start, End: end, Reason: ReasonTornTail,
			Detail: "unacknowledged batches after a torn write: " + d.Detail}
		return
	}
}

// damaged handles a frame that failed at s.pos inside the batch starting at
// s.batchStart. It resumes at the next intact batch and reports true, or
// ends the scan (torn tail, or damage up to the footer) and reports false.
func (s *scanner) damaged(reason Reason, cause error) bool {
	resume, commit, ok := s.findResync(s.batchStart + 1)
	if !ok {
		if s.limits.Sealed {
			s.damageTo(s.limit, reason, cause.Error())
			return false
		}
		s.result.Torn = &tornTail{Start: s.batchStart, End: lastNonZero(s.data, s.batchStart, s.limit),
			Reason: ReasonTornTail, Detail: cause.Error()}
		return false
	}
	r := &s.result
	s.checkpoints = append(s.checkpoints, scanCheckpoint{end: r.End, next: r.NextOffset, records: r.Records,
		minTS: r.MinTimestamp, maxTS: r.MaxTimestamp, index: len(r.Index), holes: len(r.Holes)})
	r.Damage = append(r.Damage, damage{Start: s.batchStart, End: resume,
		FirstLost: s.batchExpect, LostCount: commit.FirstOffset - s.batchExpect, Reason: reason,
		Detail: cause.Error(), MaybeUnacked: true})
	s.pos = resume
	s.acceptUpTo(resume, commit.FirstOffset)
	return true
}

// damageTo records damage from the batch start up to end, with no intact
// batch after it; only a sealed region gets here, and its footer says which
// offsets it held.
func (s *scanner) damageTo(end int64, reason Reason, detail string) {
	lost := uint64(0)
	if s.limits.SealedNext > s.batchExpect {
		lost = s.limits.SealedNext - s.batchExpect
	}
	s.result.Damage = append(s.result.Damage, damage{Start: s.result.End, End: end,
		FirstLost: s.batchExpect, LostCount: lost, Reason: reason, Detail: detail})
	s.pos = end
	s.acceptUpTo(end, s.batchExpect+lost)
}

// findResync looks from position from for the next intact commit frame of
// this segment whose batch also verifies. It returns the batch start and
// the commit frame. A commit frame is only believed when its checksum, its
// token (random per segment), its offsets and its batch checksum all agree.
func (s *scanner) findResync(from int64) (int64, format.Commit, bool) {
	var needle [8]byte
	binary.LittleEndian.PutUint64(needle[:], s.token)
	for at := from; at < s.limit; {
		idx := bytes.Index(s.data[at:s.limit], needle[:])
		if idx < 0 {
			return 0, format.Commit{}, false
		}
		tokenAt := at + int64(idx)
		at = tokenAt + 1
		framePos := tokenAt - 8
		if framePos < from {
			continue
		}
		c, err := format.DecodeCommit(s.data[framePos:s.limit])
		if err != nil || c.Token != s.token || c.FirstOffset < s.batchExpect {
			continue
		}
		start := framePos - int64(c.BatchLength)
		if start < from || format.CRC(s.data[start:framePos]) != c.BatchCRC {
			continue
		}
		return start, c, true
	}
	return 0, format.Commit{}, false
}

// lastNonZero returns one past the last non-zero byte in data[from:limit],
// or from when the range is all zeros.
func lastNonZero(data []byte, from, limit int64) int64 {
	for end := limit; end > from; end-- {
		if data[end-1] != 0 {
			return end
		}
	}
	return from
}
