package segment

import (
	"errors"
	"fmt"
	"path"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Segment lifecycle. A segment file is born as "<random>.prepare":
// preallocated and synced off the hot path. A roll writes its header,
// syncs it, renames it to "<base offset>.seg" and syncs the directory; only
// then does any record go into it. The previous segment is sealed first:
// footer written, file cut to size, fsync. So a segment that has a
// successor always has a durable footer, and the chain never has a hole
// that recovery must guess about.

// segmentSizeFor is the preallocated size of a segment that must hold a
// frame of frameLen bytes.
func (a *appender) segmentSizeFor(frameLen int) int64 {
	need := int64(format.SegmentDataStart + frameLen + format.CommitFrameSize + format.FooterFrameSize)
	size := max(a.log.opts.SegmentSize, need)
	return (size + vfs.DirectAlignment - 1) &^ (vfs.DirectAlignment - 1)
}

// roll seals the active segment and activates a new one whose first piece
// needs frameLen bytes (a frame, or a whole atomic batch). An empty active
// segment is grown instead.
func (a *appender) roll(frameLen int) error {
	size := a.segmentSizeFor(frameLen)
	if a.active != nil && a.pos == format.SegmentDataStart {
		return a.grow(size)
	}
	prepared, err := a.takePrepared(size)
	if err != nil {
		return err
	}
	if a.active != nil {
		if err := a.seal(); err != nil {
			a.discard(prepared)
			return err
		}
	}
	if err := a.activate(prepared); err != nil {
		a.discard(prepared)
		return err
	}
	a.startPreparing()
	return nil
}

// grow extends an empty active segment so a large first frame fits.
func (a *appender) grow(size int64) error {
	if err := a.log.preallocate(a.write, a.size, size-a.size); err != nil {
		return err
	}
	if err := a.write.Sync(); err != nil {
		return err
	}
	a.size = size
	return nil
}

// activate turns a prepared file into the active segment starting at a.next.
func (a *appender) activate(p *preparedFile) error {
	l := a.log
	token, err := l.opts.newToken()
	if err != nil {
		return err
	}
	header := format.SegmentHeader{StreamHash: l.streamHash, Partition: l.id.Partition,
		BaseOffset: a.next, CreatedUnix: l.opts.Clock.Now().UnixNano(), Token: token}
	block := vfs.AlignedBuffer(format.SegmentDataStart)
	format.AppendSegmentHeader(block[:0], header)
	if _, err := p.file.WriteAt(block, 0); err != nil {
		return err
	}
	if err := p.file.SyncData(); err != nil {
		return err
	}
	name := segmentFileName(a.next)
	final := path.Join(l.path, name)
	if err := l.fs.Rename(p.tmp, final); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.path); err != nil {
		return err
	}
	seg := newSegment(l.fs, l.path, name, header)
	seg.setFile(p.file)
	write := p.file
	if a.mode == IODirect {
		if write, err = l.fs.OpenFile(final, vfs.ReadWrite|vfs.Direct); err != nil {
			return err
		}
	}
	l.addSegment(seg)
	a.active, a.write, a.pos, a.size = seg, write, format.SegmentDataStart, p.size
	a.resetActiveStats()
	return nil
}

// seal makes the active segment's records durable, then writes its footer,
// cuts the file right after it and fsyncs (the size shrank, so fdatasync is
// not enough). The data sync comes first so that a durable footer always
// vouches for durable records: a power cut could otherwise keep the footer
// and the cut while dropping unsynced records before them.
func (a *appender) seal() error {
	seg := a.active
	if err := a.write.SyncData(); err != nil {
		return fmt.Errorf("syncing %s before sealing it: %w", seg.path, err)
	}
	footer := format.Footer{Token: seg.header.Token, BaseOffset: seg.base, NextOffset: a.next,
		Count: a.count, DataEnd: uint64(a.pos), MinTimestamp: a.minTS, MaxTimestamp: a.maxTS}
	if a.count == 0 {
		footer.MinTimestamp, footer.MaxTimestamp = 0, 0
	}
	var err error
	if a.mode == IODirect {
		err = a.writeDirect(nil, format.FooterFrameSize, func(dst []byte) []byte { return format.AppendFooter(dst, footer) })
	} else {
		_, err = a.write.WriteAt(format.AppendFooter(nil, footer), a.pos)
	}
	end := a.pos + format.FooterFrameSize
	if err == nil {
		err = a.write.Truncate(end)
	}
	if err == nil {
		err = a.write.Sync()
	}
	if err != nil {
		return fmt.Errorf("sealing %s: %w", seg.path, err)
	}
	if a.mode == IODirect {
		_ = a.write.Close()
	}
	seg.seal(footer)
	// The sealed segment joins the bound on open sealed segments now: it
	// keeps the descriptor (and a reader's live mapping) it had while
	// active, and a reader that tailed it never enters it again to
	// register it, so without this each sealed segment kept both until
	// retention removed it.
	a.log.open.touch(seg)
	a.active, a.write = nil, nil
	a.log.advanceCommitted(mark{next: a.next, seg: seg, pos: end})
	if a.log.opts.OnSeal != nil {
		a.log.opts.OnSeal(a.log.id)
	}
	return nil
}

// takePrepared returns a prepared file of at least size bytes: the one
// prepared in the background if it is ready or being made, else a new one.
func (a *appender) takePrepared(size int64) (*preparedFile, error) {
	if a.ready == nil && a.preparing {
		p := <-a.prepared
		a.preparing = false
		a.ready = &p
	}
	if p := a.ready; p != nil {
		a.ready = nil
		if p.err == nil && p.size >= size {
			return p, nil
		}
		a.discard(p)
	}
	p := a.log.prepareFile(size)
	return &p, p.err
}

// startPreparing prepares the next segment in the background, so the next
// roll costs a header write and a rename instead of an allocation.
func (a *appender) startPreparing() {
	if a.preparing || a.ready != nil {
		return
	}
	a.preparing = true
	size := a.log.opts.SegmentSize
	go func() { a.prepared <- a.log.prepareFile(size) }()
}

func (a *appender) discard(p *preparedFile) {
	if p == nil || p.file == nil {
		return
	}
	_ = p.file.Close()
	_ = a.log.fs.Remove(p.tmp)
}

// discardPrepared removes a prepared file nobody will use (on close).
func (a *appender) discardPrepared() {
	if a.preparing {
		p := <-a.prepared
		a.preparing = false
		a.discard(&p)
	}
	a.discard(a.ready)
	a.ready = nil
}

// closeFiles releases the direct write handle; the read handles belong to
// the segments.
func (a *appender) closeFiles() {
	if a.mode == IODirect && a.write != nil {
		_ = a.write.Close()
	}
	a.write = nil
}

// prepareFile creates a preallocated, synced segment file under a temporary
// name. Recovery removes any left behind by a crash.
func (l *Log) prepareFile(size int64) preparedFile {
	token, err := l.opts.newToken()
	if err != nil {
		return preparedFile{err: err}
	}
	tmp := path.Join(l.path, fmt.Sprintf("%016x%s", token, prepareSuffix))
	file, err := l.fs.OpenFile(tmp, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return preparedFile{err: err}
	}
	err = l.preallocate(file, 0, size)
	if err == nil {
		err = file.Sync()
	}
	if err != nil {
		_ = file.Close()
		_ = l.fs.Remove(tmp)
		return preparedFile{err: fmt.Errorf("preparing a segment of %d bytes: %w", size, err)}
	}
	return preparedFile{tmp: tmp, file: file, size: size}
}

// preallocate reserves [offset, offset+length) of file as configured.
func (l *Log) preallocate(file vfs.File, offset, length int64) error {
	switch l.opts.Preallocation {
	case PreallocateAllocate:
		err := file.Allocate(offset, length)
		if !errors.Is(err, vfs.ErrNotSupported) {
			return err
		}
		l.zeroFilled.Store(true) // no unwritten extents: nothing to write zeros ahead for
		return writeZeros(file, offset, length)
	case PreallocateZero:
		return writeZeros(file, offset, length)
	default:
		return file.Truncate(offset + length)
	}
}

func writeZeros(file vfs.File, offset, length int64) error {
	const chunk = 1 << 20
	zeros := vfs.AlignedBuffer(int(min(chunk, length)))
	for length > 0 {
		n := min(int64(len(zeros)), length)
		if _, err := file.WriteAt(zeros[:n], offset); err != nil {
			return err
		}
		offset += n
		length -= n
	}
	return nil
}

// addSegment publishes a set with seg appended.
func (l *Log) addSegment(seg *segment) {
	l.setMu.Lock()
	defer l.setMu.Unlock()
	l.segments.Store(l.segments.Load().with(seg))
}

// publishWritten records what the appender wrote. Under DurabilitySync the
// log is queued at the committer; otherwise the write is committed at once.
func (l *Log) publishWritten(m mark) {
	if l.opts.Durability != DurabilitySync {
		l.advanceCommitted(m)
	}
	l.mu.Lock()
	l.mu.written = m
	queue := !l.mu.dirty && l.opts.Durability != DurabilityNone
	l.mu.dirty = l.mu.dirty || queue
	if l.dir.committer.linger > 0 {
		l.noteWrittenLocked(m, queue)
	}
	l.mu.Unlock()
	if queue {
		l.dir.committer.enqueue(l)
	}
}
