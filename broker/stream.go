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

// streamPart is one piece of a streaming answer, in offset order: a run
// of frames or a gap.
type streamPart struct {
	run segment.Run
	gap *segment.Gap
}

// serveStream answers one streaming Consume with DeliverBatch frames,
// waiting for records like serveConsume does.
func (s *session) serveStream(r consumeRequest) {
	defer s.consumers.Done()
	for {
		var wake <-chan struct{}
		if r.wait {
			wake = r.served.wake.channel()
		}
		durable := r.served.log.Committed()
		parts, records, bytes, err := s.readRuns(r)
		if err != nil {
			releaseParts(parts)
			s.replyFromConsumer(r.id, streamError(err))
			return
		}
		if len(parts) > 0 || !r.wait || !time.Now().Before(r.deadline) {
			s.sendRuns(r, parts, records, bytes)
			return
		}
		if !s.waitForRecords(r, wake, durable) {
			s.out.frame(wire.Append(nil, r.id, &wire.ConsumeEnd{Reason: wire.EndWaited}))
			return
		}
	}
}

// readRuns reads runs from this connection's read position up to the
// request's limits, and moves the position past them. A single record
// too large for a frame the client accepts is an error the client must
// fix (its max_frame); the position stays before it.
func (s *session) readRuns(r consumeRequest) ([]streamPart, int, int, error) {
	from := s.readPosition(r.served)
	reader := r.served.log.NewReader(from)
	defer reader.Close()
	maxFrames := r.maxFrameBody + deliverFields - wire.DeliverBatchHeaderSize
	var parts []streamPart
	records, bytes := 0, 0
	next := from
	for records < r.max && (records == 0 || bytes < r.maxBytes) {
		run, err := reader.NextRun(r.max-records, min(r.maxBytes-bytes, maxFrames))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return parts, records, bytes, err
		}
		if run.Gap != nil {
			parts = append(parts, streamPart{gap: run.Gap})
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
		parts = append(parts, streamPart{run: run})
		records += run.Count
		bytes += len(run.Frames)
		next = run.Next
	}
	s.groupsMu.Lock()
	s.groups[r.served] = max(s.groups[r.served], next)
	s.groupsMu.Unlock()
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

// sendRuns queues the answer: each run as one DeliverBatch whose frames
// go to the connection straight from the segment (the run's reference
// keeps them mapped until the connection is done with them), Gap frames
// riding in front of the next header, then ConsumeEnd.
func (s *session) sendRuns(r consumeRequest, parts []streamPart, records, bytes int) {
	var pending []byte
	for _, part := range parts {
		if part.gap != nil {
			if r.gaps {
				pending = wire.Append(pending, r.id, gapFrame(r.partition, part.gap))
			}
			continue
		}
		run := part.run
		header := wire.AppendDeliverBatchHeader(pending, r.id, &wire.DeliverBatch{Partition: r.partition,
			First: run.First, Next: run.Next, Count: uint32(run.Count)}, len(run.Frames))
		pending = nil
		s.out.vectored(header, [][]byte{run.Frames}, run.Release)
	}
	reason := wire.EndCaughtUp
	switch {
	case records >= r.max || (records > 0 && bytes >= r.maxBytes):
		reason = wire.EndLimit
	case records == 0 && r.wait:
		reason = wire.EndWaited
	}
	s.out.frame(wire.Append(pending, r.id, &wire.ConsumeEnd{Delivered: uint32(records), Reason: reason}))
}

func gapFrame(partition uint32, gap *segment.Gap) *wire.Gap {
	code := wire.GapLost
	if gap.Reason == segment.GapRetention {
		code = wire.GapRetention
	}
	return &wire.Gap{Partition: partition, From: gap.From, To: gap.To, Reason: code, Detail: gap.Reason}
}

func releaseParts(parts []streamPart) {
	for i := range parts {
		parts[i].run.Release()
	}
}
