package segment

import (
	"fmt"
	"path"
	"sort"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// classify turns scans and chain checks into report events and planned
// changes (phase 4).
func (r *recovery) classify() {
	for i, sf := range r.files {
		last := i == len(r.files)-1
		var successor *segmentFile
		if !last {
			successor = r.files[i+1]
		}
		switch {
		case sf.headerErr != nil:
			r.classifyUnreadable(sf, successor)
		case sf.scan != nil:
			r.classifyScanned(sf, successor)
		}
		if successor != nil && sf.nextKnown && successor.base > sf.next {
			r.plan(plannedChange{kind: changeStub, first: sf.next, count: successor.base - sf.next,
				reason: ReasonMissingSegment},
				newEvent(ReasonMissingSegment, segmentFileName(sf.next), 0, r.l.opts.SegmentSize, sf.next,
					successor.base-sf.next, fmt.Sprintf("no segment file holds offsets %d..%d", sf.next, successor.base-1)))
		}
	}
}

// classifyUnreadable handles a segment whose header cannot be trusted: the
// whole file goes to quarantine and a stub takes its place.
func (r *recovery) classifyUnreadable(sf *segmentFile, successor *segmentFile) {
	next := sf.base
	if successor != nil {
		next = successor.base
	} else {
		next = max(next, salvageNext(r, sf))
	}
	r.plan(plannedChange{file: sf, kind: changeStub, first: sf.base, count: next - sf.base,
		reason: ReasonCorruptSegmentHdr},
		newEvent(ReasonCorruptSegmentHdr, sf.name, 0, sf.size, sf.base, next-sf.base, sf.headerErr.Error()))
	sf.next, sf.nextKnown = next, true
}

// salvageNext walks the records of a segment whose header is unreadable
// to learn the highest offset it held, so offsets are never reused.
func salvageNext(r *recovery, sf *segmentFile) uint64 {
	data, err := r.mapFile(sf)
	if err != nil {
		return sf.base
	}
	next := sf.base
	for pos := int64(format.SegmentDataStart); pos < int64(len(data)); {
		switch format.PeekKind(data[pos:]) {
		case format.KindRecord:
			h, body, err := record.ParseFrame(data[pos:], r.l.opts.MaxRecordBytes)
			if err != nil || body == nil {
				return next
			}
			next = max(next, h.Offset+1)
			pos += int64(h.FrameLength)
		case format.KindCommit:
			pos += format.CommitFrameSize
		case format.KindControl:
			if pos+format.FramePrefixSize > int64(len(data)) {
				return next
			}
			length := int64(frameLength(data[pos:]))
			if length < format.ControlHeaderSize {
				return next
			}
			pos += length
		default:
			return next
		}
	}
	return next
}

// classifyScanned reports what the scan of an unsealed segment found.
func (r *recovery) classifyScanned(sf *segmentFile, successor *segmentFile) {
	scan := sf.scan
	for _, d := range scan.Damage {
		ev := newEvent(d.Reason, sf.name, d.Start, d.End, d.FirstLost, d.LostCount, d.Detail)
		ev.MaybeUnacknowledged = d.MaybeUnacked
		r.plan(plannedChange{file: sf, kind: changeSkip, start: d.Start, end: d.End,
			first: d.FirstLost, count: d.LostCount, reason: d.Reason}, ev)
	}
	if successor == nil {
		if t := scan.Torn; t != nil {
			r.plan(plannedChange{file: sf, kind: changeTruncate, start: scan.End, end: t.End},
				newEvent(ReasonTornTail, sf.name, scan.End, t.End, 0, 0, t.Detail))
		}
		return
	}
	if sf.footer != nil {
		return
	}
	// A non-final segment lost its footer: the data after its last intact
	// frame was synced once, so it is damage, up to the successor's base.
	end := sf.size
	if t := scan.Torn; t != nil {
		end = max(t.End, scan.End)
	}
	lost := successor.base - min(scan.NextOffset, successor.base)
	detail := "segment footer missing or damaged"
	if t := scan.Torn; t != nil {
		detail += ": " + t.Detail
	}
	reason := ReasonCorruptFrame
	if lost == 0 {
		reason = ReasonCorruptFooter
	}
	r.plan(plannedChange{file: sf, kind: changeSkip, start: scan.End, end: end,
		first: scan.NextOffset, count: lost, reason: reason},
		newEvent(reason, sf.name, scan.End, end, scan.NextOffset, lost, detail))
	sf.next = successor.base
}

func (r *recovery) plan(change plannedChange, ev LossEvent) {
	if ev.Bytes == 0 && ev.Records == 0 && change.kind != changeTruncate {
		return
	}
	change.event = len(r.report.Events)
	r.report.add(ev)
	r.planned = append(r.planned, change)
}

// checkCaps freezes the log when this recovery would lose more than
// max(LossCapFraction of the log's bytes, one segment) (phase 5).
func (r *recovery) checkCaps() {
	if r.l.opts.AcceptLoss || r.report.LossBytes == 0 {
		return
	}
	var total int64
	for _, sf := range r.files {
		total += sf.size
	}
	r.lossCap = max(int64(float64(total)*r.l.opts.LossCapFraction), r.l.opts.SegmentSize)
	if r.report.LossBytes > r.lossCap {
		r.freeze(fmt.Errorf("%w: %d bytes (%d records) damaged, cap %d bytes", ErrLossCapExceeded,
			r.report.LossBytes, r.report.LossRecords, r.lossCap))
	}
}

func (r *recovery) markUnapplied() {
	for i := range r.report.Events {
		r.report.Events[i].Applied = false
	}
}

// apply makes the planned changes (phase 6). Each is crash-safe on its own:
// evidence is copied to quarantine and synced before anything is
// overwritten, and files are replaced by rename.
func (r *recovery) apply() error {
	defer r.unmapAll()
	var stubs []*segmentFile
	for _, change := range r.planned {
		ev := &r.report.Events[change.event]
		var err error
		switch change.kind {
		case changeSkip:
			err = r.applySkip(change, ev)
		case changeTruncate:
			err = r.applyTruncate(change)
		case changeStub:
			var stub *segmentFile
			stub, err = r.applyStub(change, ev)
			stubs = append(stubs, stub)
		}
		if err != nil {
			return fmt.Errorf("recovery of %s: %w", r.l.id, err)
		}
		ev.Applied = true
	}
	if err := r.finishSegments(); err != nil {
		return err
	}
	r.files = mergeStubs(r.files, stubs)
	return nil
}

// applySkip copies a damaged region to quarantine, then covers it with a
// skip frame. In a segment that must be resealed, the skip frame goes at
// the reseal point and the footer follows it.
func (r *recovery) applySkip(change plannedChange, ev *LossEvent) error {
	sf := change.file
	data := sf.mapping.Bytes()
	quarantined, err := r.l.dir.quarantine(r.l.id, fmt.Sprintf("%s.%d-%d", sf.name, change.start, change.end),
		data[change.start:min(change.end, int64(len(data)))])
	if err != nil {
		return err
	}
	ev.Quarantine = quarantined
	length := change.end - change.start
	if sf.resealAt > 0 && change.start == sf.resealAt {
		length = format.SkipFrameSize
		sf.resealAt += format.SkipFrameSize
	}
	if length < format.SkipFrameSize {
		return nil // too small to cover; reported, and skipped again by later scans
	}
	skip := format.AppendSkip(nil, format.Skip{Token: sf.header.Token, Length: uint32(length),
		FirstLost: change.first, LostCount: change.count, ReasonCode: uint32(change.reason)})
	if _, err := sf.file.WriteAt(skip, change.start); err != nil {
		return err
	}
	sf.scan.Holes = append(sf.scan.Holes, hole{First: change.first, Count: change.count,
		Start: change.start, End: change.start + length, Reason: change.reason})
	if sf.resealAt == 0 {
		sf.scan.End = max(sf.scan.End, change.start+length)
		sf.scan.NextOffset = max(sf.scan.NextOffset, change.first+change.count)
	}
	return sf.file.SyncData()
}

// applyTruncate cuts the torn tail of the last segment and preallocates the
// space again, so later fdatasyncs still carry no size change. The torn
// bytes were never acknowledged; they are not copied anywhere.
func (r *recovery) applyTruncate(change plannedChange) error {
	sf := change.file
	_ = sf.mapping.Close()
	sf.mapping = nil
	if err := sf.file.Truncate(change.start); err != nil {
		return err
	}
	if err := sf.file.Sync(); err != nil {
		return err
	}
	if err := r.l.preallocate(sf.file, change.start, sf.size-change.start); err != nil {
		return err
	}
	return sf.file.Sync()
}

// applyStub replaces an unreadable segment (or fills a gap in the chain)
// with a sealed stub segment whose skip frame records the lost offsets.
func (r *recovery) applyStub(change plannedChange, ev *LossEvent) (*segmentFile, error) {
	l := r.l
	if sf := change.file; sf != nil {
		quarantined, err := r.quarantineWhole(sf)
		if err != nil {
			return nil, err
		}
		ev.Quarantine = quarantined
		sf.dropped = true
	}
	return l.writeStub(change.first, change.count, change.reason)
}

func (r *recovery) quarantineWhole(sf *segmentFile) (string, error) {
	data, err := r.mapFile(sf)
	if err != nil {
		return "", err
	}
	return r.l.dir.quarantine(r.l.id, sf.name, data)
}

// finishSegments reseals segments that lost their footer, completes seals
// a crash interrupted, and syncs the last segment: data recovered from the
// page cache after a process crash is not durable until synced, and must
// not be served before it is.
func (r *recovery) finishSegments() error {
	for i, sf := range r.files {
		switch {
		case sf.dropped:
			continue
		case sf.resealAt > 0:
			if err := r.reseal(sf); err != nil {
				return err
			}
		case sf.cutAt > 0:
			if err := cutAndSync(sf.file, sf.cutAt); err != nil {
				return err
			}
			sf.size = sf.cutAt
		case i == len(r.files)-1 && !sf.trusted:
			// A segment a clean-stop marker vouched for was synced before
			// the marker was, and nothing wrote to it since (C1, C2).
			if err := sf.file.SyncData(); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSynced creates (or replaces) name with data and syncs it; the
// caller renames it into place and syncs the directory.
func writeSynced(fsys vfs.FS, name string, data []byte) error {
	file, err := fsys.OpenFile(name, vfs.ReadWrite|vfs.Create)
	if err != nil {
		return err
	}
	err = file.Truncate(0)
	if err == nil {
		_, err = file.WriteAt(data, 0)
	}
	if err == nil {
		err = file.Sync()
	}
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	return err
}

func cutAndSync(file vfs.File, size int64) error {
	if err := file.Truncate(size); err != nil {
		return err
	}
	return file.Sync()
}

func (r *recovery) reseal(sf *segmentFile) error {
	scan := sf.scan
	// The records may have come from the page cache; make them durable
	// before a footer vouches for them.
	if err := sf.file.SyncData(); err != nil {
		return err
	}
	footer := format.Footer{Token: sf.header.Token, BaseOffset: sf.base, NextOffset: sf.next,
		Count: scan.Records, DataEnd: uint64(sf.resealAt), MinTimestamp: scan.MinTimestamp, MaxTimestamp: scan.MaxTimestamp}
	if scan.Records == 0 {
		footer.MinTimestamp, footer.MaxTimestamp = 0, 0
	}
	if _, err := sf.file.WriteAt(format.AppendFooter(nil, footer), sf.resealAt); err != nil {
		return err
	}
	end := sf.resealAt + format.FooterFrameSize
	if err := cutAndSync(sf.file, end); err != nil {
		return err
	}
	sf.footer, sf.size = &footer, end
	scan.End = sf.resealAt
	return nil
}

// mergeStubs inserts stub segments into the file list in offset order.
func mergeStubs(files, stubs []*segmentFile) []*segmentFile {
	var out []*segmentFile
	for _, sf := range files {
		if !sf.dropped {
			out = append(out, sf)
		} else if sf.file != nil {
			_ = sf.file.Close()
		}
	}
	out = append(out, stubs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].base < out[j].base })
	return out
}

// writeStub creates a sealed segment at base holding only a skip frame for
// count lost offsets.
func (l *Log) writeStub(base, count uint64, reason Reason) (*segmentFile, error) {
	token, err := l.opts.newToken()
	if err != nil {
		return nil, err
	}
	header := format.SegmentHeader{StreamHash: l.streamHash, Partition: l.id.Partition, BaseOffset: base,
		CreatedUnix: l.opts.Clock.Now().UnixNano(), Token: token}
	image := make([]byte, format.SegmentDataStart)
	format.AppendSegmentHeader(image[:0], header)
	image = format.AppendSkip(image, format.Skip{Token: token, Length: format.SkipFrameSize,
		FirstLost: base, LostCount: count, ReasonCode: uint32(reason)})
	footer := format.Footer{Token: token, BaseOffset: base, NextOffset: base + count, DataEnd: uint64(len(image))}
	image = format.AppendFooter(image, footer)
	name := segmentFileName(base)
	final := path.Join(l.path, name)
	tmp := final + prepareSuffix
	if err := writeSynced(l.fs, tmp, image); err != nil {
		return nil, err
	}
	if err := l.fs.Rename(tmp, final); err != nil {
		return nil, err
	}
	if err := l.fs.SyncDir(l.path); err != nil {
		return nil, err
	}
	file, err := l.fs.OpenFile(final, vfs.ReadOnly)
	if err != nil {
		return nil, err
	}
	stub := &segmentFile{name: name, path: final, base: base, file: file, size: int64(len(image)),
		header: header, footer: &footer, next: base + count, nextKnown: true}
	return stub, nil
}
