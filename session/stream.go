package session

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// The streaming tier on connections with CapDeliverBatch: a Consume is
// answered with runs of stored record frames, each one DeliverBatch sent
// from where the segment holds it (no decoding, no re-encoding, no
// lease), plus Gap frames for what is missing, then ConsumeEnd. The
// group's position moves only with the client's Commit.

// streamPart is one piece of a streaming answer, in offset order within
// its partition: a run of frames or a gap.
type streamPart struct {
	partition uint32
	run       segment.Run
	gap       *segment.Gap
}

// serveStream answers one streaming Consume with DeliverBatch frames,
// waiting for records like serveConsume does.
func (s *session) serveStream(r consumeRequest) {
	defer s.consumers.Done()
	for {
		wakes, durable := s.beforeFetch(&r)
		answer := &streamAnswer{session: s, request: r}
		if err := answer.readAll(); err != nil {
			s.replyFromConsumer(r.id, streamError(err))
			return
		}
		if answer.parts > 0 || !r.wait || !time.Now().Before(r.deadline) {
			answer.end()
			return
		}
		if !s.waitForRecords(r, wakes, durable) {
			s.out.frame(wire.Append(nil, r.id, &wire.ConsumeEnd{Reason: wire.EndWaited}))
			return
		}
	}
}

// Once this much of an answer is read it goes to the connection while the
// rest is read: the socket and the client work on the start of a long
// answer (a sparse filter's thousands of small runs, or megabytes of
// frames) instead of waiting for its end.
const (
	streamFlushParts = 256
	streamFlushBytes = 64 << 10
)

// streamAnswer is one streaming answer being read: the parts read and not
// yet queued, and the totals of all of it.
type streamAnswer struct {
	session *session
	request consumeRequest
	pending []streamPart // read, not yet queued, in offset order per partition
	// pendingBytes is the frames' bytes in pending.
	pendingBytes int
	parts        int // runs and gaps read, queued or not
	records      int
	bytes        int
	created      bool // every group read has its creation on disk
}

// full reports whether the answer has reached the request's limits.
func (a *streamAnswer) full() bool {
	return a.records >= a.request.max || (a.records > 0 && a.bytes >= a.request.maxBytes)
}

func (a *streamAnswer) addGap(partition uint32, gap *segment.Gap) {
	a.pending = append(a.pending, streamPart{partition: partition, gap: gap})
	a.parts++
	a.flushIfDue()
}

func (a *streamAnswer) addRun(partition uint32, run segment.Run) {
	a.pending = append(a.pending, streamPart{partition: partition, run: run})
	a.parts++
	a.records += run.Count
	a.bytes += len(run.Frames)
	a.pendingBytes += len(run.Frames)
	a.flushIfDue()
}

func (a *streamAnswer) flushIfDue() {
	if (len(a.pending) >= streamFlushParts || a.pendingBytes >= streamFlushBytes) && a.mayQueue() {
		a.send(nil)
		// The queued item keeps the old array until the connection is
		// done with it; the next parts go to a new one.
		a.pending, a.pendingBytes = make([]streamPart, 0, streamFlushParts), 0
	}
}

// end queues what is pending and the ConsumeEnd.
func (a *streamAnswer) end() {
	r := a.request
	reason := wire.EndCaughtUp
	switch {
	case a.full():
		reason = wire.EndLimit
	case a.records == 0 && r.wait:
		reason = wire.EndWaited
	}
	a.send(&wire.ConsumeEnd{Delivered: uint32(a.records), Reason: reason})
	a.pending = nil
}

// mayQueue reports whether parts may go out before the answer is read
// whole: not while a new group's creation is still being written. The
// read goes on beside that write, and the answer waits for it only at
// its end.
func (a *streamAnswer) mayQueue() bool {
	if !a.created {
		a.created = allCreated(a.request.parts)
	}
	return a.created
}

// send queues what is pending, and end when set, once the groups'
// creation is on disk.
func (a *streamAnswer) send(end *wire.ConsumeEnd) {
	if !a.created {
		awaitCreated(a.request.parts)
		a.created = true
	}
	a.session.sendRuns(a.request, a.pending, end)
}

// readAll reads runs from each partition read in turn (starting at a
// different one each time) up to the request's limits across them. An
// error ends the read; it is returned only when nothing was read before
// it, else the next Consume meets it.
func (a *streamAnswer) readAll() error {
	r := a.request
	n := len(r.parts)
	if n == 0 {
		return nil
	}
	start := 0
	if n > 1 {
		start = r.anchor.Rotation(n)
	}
	for i := range n {
		if a.full() {
			break
		}
		if err := a.read(r.parts[(start+i)%n]); err != nil {
			if a.parts == 0 {
				return err
			}
			break
		}
	}
	return nil
}

// read reads runs of one partition from this connection's read position
// there up to the request's limits, and moves the position past them. A
// single record too large for a frame the client accepts is an error the
// client must fix (its max_frame); the position stays before it.
func (a *streamAnswer) read(served *broker.Group) error {
	s, r := a.session, a.request
	from := s.readPosition(served)
	reader := served.Log().NewReader(from)
	defer reader.Close()
	if filter := served.Consumer().Matcher(r.filter); filter != nil {
		reader.SetFilter(filter) // only matching records in the runs; the rest come back as filtered gaps
	}
	partition := served.Partition()
	maxFrames := r.maxFrameBody + deliverFields - wire.DeliverBatchHeaderSize
	next := from
	defer func() {
		s.groupsMu.Lock()
		s.groups[served] = max(s.groups[served], next)
		s.groupsMu.Unlock()
	}()
	for !a.full() {
		run, err := reader.NextRun(r.max-a.records, min(r.maxBytes-a.bytes, maxFrames))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if run.Gap != nil {
			a.addGap(partition, run.Gap)
			next = max(next, run.Gap.To)
			continue
		}
		if len(run.Frames) > maxFrames {
			run.Release()
			if a.parts > 0 {
				break // deliver what fits; the next Consume meets the error
			}
			return errStreamFrameTooLarge{offset: run.First, size: len(run.Frames), limit: maxFrames}
		}
		a.addRun(partition, run)
		next = run.Next
	}
	return nil
}

// errStreamFrameTooLarge: one stored record does not fit a frame the
// client accepts.
type errStreamFrameTooLarge struct {
	offset      uint64
	size, limit int
}

func (e errStreamFrameTooLarge) Error() string {
	return fmt.Sprintf("the record at offset %d is a %d-byte frame; a DeliverBatch you accept holds at most %d: raise Hello max_frame",
		e.offset, e.size, e.limit)
}

func streamError(err error) *wire.Error {
	var tooLarge errStreamFrameTooLarge
	if errors.As(err, &tooLarge) {
		return wire.NewError(wire.CodeRecordTooLarge, "%v", tooLarge)
	}
	return wireError(broker.Classify(err))
}

// sendRuns queues parts of an answer, and end after them when set, as
// one vectored item: each run a DeliverBatch whose frames go to the
// connection straight from the segment (the runs' references keep them
// mapped until the connection is done with them), Gap frames riding in
// front of the next header. One item for many runs, not one per run: a
// sparse filter answers with a run per match, and an item per run cost
// each match a pass of the writer and a write of its own.
func (s *session) sendRuns(r consumeRequest, parts []streamPart, end *wire.ConsumeEnd) {
	// The encoded bytes (gaps, headers, the end) share one buffer, cut into
	// pieces only once it has stopped growing.
	var encoded []byte
	cuts := make([]int, 0, len(parts)) // where each run's header ends and its frames go
	runs := parts[:0]                  // the runs, kept for release; gaps are dropped
	for _, part := range parts {
		if part.gap != nil {
			if r.gaps {
				encoded = wire.Append(encoded, r.id, gapFrame(part.partition, part.gap.From, part.gap.To, part.gap.Reason))
			}
			continue
		}
		run := part.run
		encoded = wire.AppendDeliverBatchHeader(encoded, r.id, &wire.DeliverBatch{Partition: part.partition,
			First: run.First, Next: run.Next, Count: uint32(run.Count)}, len(run.Frames))
		cuts = append(cuts, len(encoded))
		runs = append(runs, part)
	}
	if end != nil {
		encoded = wire.Append(encoded, r.id, end)
	}
	if len(runs) == 0 {
		if len(encoded) > 0 {
			s.out.frame(encoded)
		}
		return
	}
	pieces := make([][]byte, 0, 2*len(runs))
	for i, part := range runs {
		pieces = append(pieces, part.run.Frames)
		until := len(encoded)
		if i+1 < len(cuts) {
			until = cuts[i+1]
		}
		if until > cuts[i] {
			pieces = append(pieces, encoded[cuts[i]:until])
		}
	}
	s.out.vectored(encoded[:cuts[0]], pieces, func() { releaseParts(runs) })
}

func releaseParts(parts []streamPart) {
	for i := range parts {
		parts[i].run.Release()
	}
}
