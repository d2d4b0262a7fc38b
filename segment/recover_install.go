package segment

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// install hands the recovered segments to the log and sets up the
// appender (phase 7). A frozen or read-only log gets no appender; its
// intact records stay readable.
func (r *recovery) install() error {
	l := r.l
	defer r.unmapAll()
	set := &segmentSet{}
	var last *segment
	var lastFile *segmentFile
	for _, sf := range r.files {
		if sf.dropped || sf.headerErr != nil {
			// Unreadable and not replaced (read-only or frozen): readers
			// see its offsets as a gap.
			closeQuietly(sf.file)
			continue
		}
		seg := newSegment(l.fs, l.path, sf.name, sf.header)
		if sf.scan != nil {
			seg.installScan(sf.scan, r.holesOf(sf))
		}
		if sf.trusted {
			seg.trustPrefix(sf.scan.End, sf.scan.NextOffset)
		}
		if sf.footer != nil {
			seg.seal(*sf.footer)
			closeQuietly(sf.file)
		} else {
			seg.setFile(sf.file)
		}
		set = set.with(seg)
		last, lastFile = seg, sf
	}
	l.segments.Store(set)
	next := uint64(0)
	committedPos := int64(0)
	if last != nil {
		next = last.next()
		committedPos = last.stats().Bytes
	}
	l.mu.nextOffset = next
	l.mu.replicated = r.replicated
	l.committed.Store(&mark{next: next, seg: last, pos: committedPos})
	l.syncedNext.Store(next)
	r.fillReport(set, next)
	if r.frozen != nil {
		l.mu.failure = freezeError(r.frozen)
		return nil
	}
	if !r.writable {
		return nil
	}
	return r.startAppender(last, lastFile, next)
}

// holesOf lists the offset ranges a scanned segment does not hold: skip
// frames found or written, plus damage left in place (read-only, frozen).
func (r *recovery) holesOf(sf *segmentFile) []hole {
	holes := append([]hole(nil), sf.scan.Holes...)
	for _, ev := range r.report.Events {
		if ev.Segment != sf.name || ev.Applied || ev.Reason == ReasonTornTail {
			continue
		}
		holes = append(holes, hole{First: ev.FirstOffset, Count: ev.Records, Start: ev.ByteStart,
			End: ev.ByteEnd, Reason: ev.Reason})
	}
	return holes
}

func (r *recovery) fillReport(set *segmentSet, next uint64) {
	r.report.Segments = len(set.segments)
	r.report.NextOffset = next
	if len(set.segments) > 0 {
		r.report.FirstOffset = set.segments[0].base
	}
	for _, sf := range r.files {
		if !sf.dropped {
			r.report.Bytes += sf.size
		}
	}
}

// startAppender resumes appending after the last intact frame of an
// unsealed last segment, or rolls a new segment on the first append.
func (r *recovery) startAppender(last *segment, lastFile *segmentFile, next uint64) error {
	l := r.l
	a := &l.app
	a.log, a.mode, a.next = l, l.dir.ioMode, next
	// Readers map the active segment when the page cache carries every
	// write, and the address space has room for a mapping per active
	// segment (not on 32-bit builds).
	l.liveReads = a.mode == IOBuffered && strconv.IntSize == 64
	a.prepared = make(chan preparedFile, 1)
	a.resetActiveStats()
	if last != nil && !last.sealed.Load() {
		a.adoptActive(last, lastFile.scan, lastFile.size)
		if err := a.openActiveForWrite(lastFile); err != nil {
			return err
		}
	}
	l.takeStagingBuffers()
	l.wake = make(chan struct{}, 1)
	l.seals = make(chan chan error)
	l.stop = make(chan struct{})
	l.finished = make(chan struct{})
	go a.run(l.stop)
	return nil
}

// openActiveForWrite sets the write handle of the active segment; in
// direct mode it also loads the partial block the next write rewrites.
func (a *appender) openActiveForWrite(sf *segmentFile) error {
	if a.mode != IODirect {
		a.write = sf.file
		return nil
	}
	write, err := a.log.fs.OpenFile(sf.path, vfs.ReadWrite|vfs.Direct)
	if err != nil {
		return fmt.Errorf("opening %s for direct I/O: %w", sf.path, err)
	}
	a.write = write
	return a.loadTail(sf.file)
}

// adoptActive makes seg, whose frames a scan found to end at scan.End in
// a file of size bytes, the active segment, continuing its statistics,
// index and subject summary.
func (a *appender) adoptActive(seg *segment, scan *scanResult, size int64) {
	a.active, a.pos, a.size, a.next = seg, scan.End, size, scan.NextOffset
	a.resetActiveStats()
	a.count, a.first = scan.Records, scan.FirstOffset
	if scan.Records > 0 {
		a.minTS, a.maxTS = scan.MinTimestamp, scan.MaxTimestamp
	}
	if n := len(scan.Index); n > 0 {
		a.lastIndexed = scan.Index[n-1].Position
	}
	a.dict.adopt(&scan.Dict)
	a.spots.continueFrom(scan.Spots, scan.Index)
}

// loadTail loads, for direct I/O, the partial block the next write
// rewrites, read through file.
func (a *appender) loadTail(file vfs.File) error {
	blockStart := a.pos &^ (vfs.DirectAlignment - 1)
	a.tail = make([]byte, a.pos-blockStart)
	if _, err := file.ReadAt(a.tail, blockStart); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func closeQuietly(file vfs.File) {
	if file != nil {
		_ = file.Close()
	}
}

var _ = format.SegmentDataStart
