package broker

import (
	"errors"
	"fmt"
	"io"
	"time"

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
		parts, records, bytes, err := s.readAllRuns(r)
		if err != nil {
			releaseParts(parts)
			s.replyFromConsumer(r.id, streamError(err))
			return
		}
		if len(parts) > 0 || !r.wait || !time.Now().Before(r.deadline) {
			s.sendRuns(r, parts, records, bytes)
			return
		}
		if !s.waitForRecords(r, wakes, durable) {
			s.out.frame(wire.Append(nil, r.id, &wire.ConsumeEnd{Reason: wire.EndWaited}))
			return
		}
	}
}

// readAllRuns reads runs from each partition read in turn (starting at a
// different one each time) up to the request's limits across them. An
// error ends the read; it is returned only when nothing was read before
// it, else the next Consume meets it.
func (s *session) readAllRuns(r consumeRequest) ([]streamPart, int, int, error) {
	n := len(r.parts)
	if n == 0 {
		return nil, 0, 0, nil
	}
	start := 0
	if n > 1 {
		start = r.anchor.span.start(n)
	}
	var parts []streamPart
	records, bytes := 0, 0
	for i := range n {
		if records >= r.max || (records > 0 && bytes >= r.maxBytes) {
			break
		}
		var err error
		parts, records, bytes, err = s.readRuns(r, r.parts[(start+i)%n], parts, records, bytes)
		if err != nil {
			if len(parts) == 0 {
				return nil, 0, 0, err
			}
			break
		}
	}
	return parts, records, bytes, nil
}

// readRuns reads runs of one partition from this connection's read
// position there up to the request's limits, appending them to parts,
// and moves the position past them. A single record too large for a
// frame the client accepts is an error the client must fix (its
// max_frame); the position stays before it.
func (s *session) readRuns(r consumeRequest, served *servedGroup, parts []streamPart, records, bytes int) ([]streamPart, int, int, error) {
	from := s.readPosition(served)
	reader := served.log.NewReader(from)
	defer reader.Close()
	if filter := served.group.Matcher(r.filter); filter != nil {
		reader.SetFilter(filter) // only matching records in the runs; the rest come back as filtered gaps
	}
	partition := served.key.partition
	maxFrames := r.maxFrameBody + deliverFields - wire.DeliverBatchHeaderSize
	next := from
	defer func() {
		s.groupsMu.Lock()
		s.groups[served] = max(s.groups[served], next)
		s.groupsMu.Unlock()
	}()
	for records < r.max && (records == 0 || bytes < r.maxBytes) {
		run, err := reader.NextRun(r.max-records, min(r.maxBytes-bytes, maxFrames))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return parts, records, bytes, err
		}
		if run.Gap != nil {
			parts = append(parts, streamPart{partition: partition, gap: run.Gap})
			next = max(next, run.Gap.To)
			continue
		}
		if len(run.Frames) > maxFrames {
			run.Release()
			if len(parts) > 0 {
				break // deliver what fits; the next Consume meets the error
			}
			return nil, 0, 0, errStreamFrameTooLarge{offset: run.First, size: len(run.Frames), limit: maxFrames}
		}
		parts = append(parts, streamPart{partition: partition, run: run})
		records += run.Count
		bytes += len(run.Frames)
		next = run.Next
	}
	return parts, records, bytes, nil
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
	return storageError(err)
}

// sendRuns queues the answer as one vectored item: each run a DeliverBatch
// whose frames go to the connection straight from the segment (the runs'
// references keep them mapped until the connection is done with them),
// Gap frames riding in front of the next header, then ConsumeEnd. One item
// for the whole answer, not one per run: a sparse filter answers with a
// run per match, and an item per run cost each match a pass of the writer
// and a write of its own.
func (s *session) sendRuns(r consumeRequest, parts []streamPart, records, bytes int) {
	reason := wire.EndCaughtUp
	switch {
	case records >= r.max || (records > 0 && bytes >= r.maxBytes):
		reason = wire.EndLimit
	case records == 0 && r.wait:
		reason = wire.EndWaited
	}
	// The encoded bytes (gaps, headers, the end) share one buffer, cut into
	// pieces only once it has stopped growing.
	var encoded []byte
	cuts := make([]int, 0, 2*len(parts)+1) // where each run's header ends and its frames go
	runs := parts[:0]                      // the runs, kept for release; gaps are dropped
	for _, part := range parts {
		if part.gap != nil {
			if r.gaps {
				encoded = wire.Append(encoded, r.id, gapFrame(part.partition, part.gap))
			}
			continue
		}
		run := part.run
		encoded = wire.AppendDeliverBatchHeader(encoded, r.id, &wire.DeliverBatch{Partition: part.partition,
			First: run.First, Next: run.Next, Count: uint32(run.Count)}, len(run.Frames))
		cuts = append(cuts, len(encoded))
		runs = append(runs, part)
	}
	encoded = wire.Append(encoded, r.id, &wire.ConsumeEnd{Delivered: uint32(records), Reason: reason})
	if len(runs) == 0 {
		s.out.frame(encoded)
		return
	}
	pieces := make([][]byte, 0, 2*len(runs))
	for i, part := range runs {
		pieces = append(pieces, part.run.Frames)
		until := len(encoded)
		if i+1 < len(cuts) {
			until = cuts[i+1]
		}
		pieces = append(pieces, encoded[cuts[i]:until])
	}
	s.out.vectored(encoded[:cuts[0]], pieces, func() { releaseParts(runs) })
}

func gapFrame(partition uint32, gap *segment.Gap) *wire.Gap {
	return &wire.Gap{Partition: partition, From: gap.From, To: gap.To, Reason: gapCode(gap.Reason), Detail: gap.Reason}
}

func releaseParts(parts []streamPart) {
	for i := range parts {
		parts[i].run.Release()
	}
}
