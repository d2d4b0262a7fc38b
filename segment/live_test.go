package segment

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Readers of a buffered log on a real file system read the active
// segment through a live mapping. A tailing reader, entry by entry and
// run by run, sees every record byte for byte while the log rolls over
// small segments; runs held across the seals and across retention stay
// readable until released; and the mapping serves the sealed segment
// afterwards.
func TestLiveReadsOfTheActiveSegment(t *testing.T) {
	opts := testOptions(3)
	opts.IOMode = IOBuffered
	d, err := Open(vfs.OS{}, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l := openLog(t, d)
	if !l.liveReads {
		t.Skip("live reads are off on this platform (32-bit)")
	}
	const total = 3000
	produced := make(chan error, 1)
	go func() {
		var last Ticket
		for i := range uint64(total) {
			b := body(i, bodySize(i))
			ticket, err := l.Append(context.Background(), b, crc(b))
			if err != nil {
				produced <- err
				return
			}
			last = ticket
		}
		produced <- last.Wait(context.Background())
	}()

	var held []Run
	sawLive := false
	reader := l.NewReader(0)
	defer reader.Close()
	for next := uint64(0); next < total; {
		if next%7 == 0 {
			run, err := reader.NextRun(8, 64<<10)
			if caughtUp(t, l, next, err) {
				continue
			}
			if run.Gap != nil {
				t.Fatalf("gap %+v", run.Gap)
			}
			checkRunFrames(t, run)
			sawLive = sawLive || (run.seg != nil && run.seg.isLive())
			next = run.Next
			if len(held) < 64 {
				held = append(held, run) // kept across seals and retention
			} else {
				run.Release()
			}
			continue
		}
		entry, err := reader.Next()
		if caughtUp(t, l, next, err) {
			continue
		}
		if entry.Gap != nil {
			t.Fatalf("gap %+v", entry.Gap)
		}
		if index := payloadIndex(t, entry.Body); index != entry.Offset || string(entry.Body) != string(body(index, bodySize(index))) {
			t.Fatalf("offset %d: wrong record", entry.Offset)
		}
		next = entry.Offset + 1
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if !sawLive {
		t.Fatal("no run aliased a live mapping of the active segment")
	}
	if segments := l.segments.Load().segments; len(segments) < 3 {
		t.Fatalf("%d segments: the test wants rolls", len(segments))
	}
	if _, err := l.DeleteBefore(l.Committed() / 2); err != nil {
		t.Fatal(err)
	}
	for _, run := range held {
		checkRunFrames(t, run) // still mapped: the run's reference holds the segment
		run.Release()
	}
	entries, gaps := readAll(t, l)
	if len(entries) == 0 || len(gaps) > 1 {
		t.Fatalf("after retention: %d entries, %d gaps", len(entries), len(gaps))
	}
	for _, e := range entries {
		if index := payloadIndex(t, e.Body); string(e.Body) != string(body(index, bodySize(index))) {
			t.Fatalf("offset %d: wrong record after the seals", e.Offset)
		}
	}
}

// checkRunFrames decodes every record frame of a run and checks its body.
func checkRunFrames(t *testing.T, run Run) {
	t.Helper()
	offset := run.First
	for frames := run.Frames; len(frames) > 0; {
		if format.PeekKind(frames) == format.KindCommit {
			frames = frames[format.CommitFrameSize:]
			continue
		}
		header, recordBody, err := record.ParseFrame(frames, record.DefaultMaxBody)
		if err != nil {
			t.Fatalf("run [%d, %d) at offset %d: %v", run.First, run.Next, offset, err)
		}
		index := payloadIndex(t, recordBody)
		if header.Offset != offset || string(recordBody) != string(body(index, bodySize(index))) {
			t.Fatalf("run [%d, %d): offset %d holds the wrong record", run.First, run.Next, offset)
		}
		offset++
		frames = frames[header.FrameLength:]
	}
	if offset != run.Next {
		t.Fatalf("run [%d, %d) holds %d records", run.First, run.Next, offset-run.First)
	}
}

// A reader tailing the log enters each segment while it is active and
// never again once it is sealed, so the seal itself puts the segment
// under the bound on open sealed segments: only that many keep a
// descriptor or a mapping, however many the log rolled through.
func TestTailedSegmentsStayUnderTheOpenBound(t *testing.T) {
	opts := testOptions(3)
	opts.IOMode = IOBuffered
	opts.MaxOpenSegments = 4
	d, err := Open(vfs.OS{}, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l := openLog(t, d)
	reader := l.NewReader(0)
	defer reader.Close()
	for i := range uint64(6000) {
		waitTicket(t, appendBody(t, l, body(i, 300)))
		for {
			if _, err := reader.Next(); err != nil {
				break
			}
		}
	}
	segments := l.segments.Load().segments
	open := 0
	for _, seg := range segments {
		seg.mu.Lock()
		if seg.mu.file != nil || seg.mu.mapping != nil {
			open++
		}
		seg.mu.Unlock()
	}
	// The bound, plus the active segment and the one the reader is in.
	if len(segments) < 20 || open > opts.MaxOpenSegments+2 {
		t.Fatalf("%d of %d segments keep a descriptor or a mapping, bound %d", open, len(segments), opts.MaxOpenSegments)
	}
}

// isLive reports whether the segment is mapped through a live view.
func (s *segment) isLive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.live
}

// caughtUp reports whether a read met the end of what is committed, after
// waiting until next is; any other error fails the test.
func caughtUp(t *testing.T, l *Log, next uint64, err error) bool {
	t.Helper()
	if errors.Is(err, io.EOF) {
		if _, err := l.WaitCommitted(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
