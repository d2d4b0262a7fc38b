package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"slices"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// A clean stop leaves a marker beside a log's segments that vouches for
// the end of its active segment: where the last commit frame ends, the
// next offset, the footer statistics so far, and the sparse index and
// subject summary the appender built. The next writable open that finds
// it intact and matching the active segment installs that state instead
// of scanning the segment, so a clean restart reads a few kilobytes per
// log whatever the segment size. See docs/RECOVERY.md and docs/FORMAT.md.
//
// The protocol (C1-C4 in doc.go):
//
//   - Close writes the marker only once every written byte is synced and
//     committed, nothing is staged or in flight and the log is not frozen:
//     the marker's end is then both the written and the durable end. It
//     is written to a temporary file, synced, renamed and the directory
//     synced.
//   - A writable open reads the marker; once it knows the log will be
//     written (not frozen), it removes the marker and syncs the directory
//     before anything writes to the log (recovery's repairs and the
//     appender both come later). A marker that exists at open therefore
//     proves that nothing was written after it.
//   - Both file names end in ".prepare": a binary that predates the
//     marker removes them at open as leftovers of an interrupted roll,
//     before it appends, so a marker outliving an older binary's writes
//     is never seen by a newer one.
//   - What the marker vouches for is checked in full on the segment's
//     first read, as a sealed segment is.
//
// Read-only opens (tools, verify) and repairs ignore the marker and scan.
//
// Layout (version 1), little-endian:
//
//	[0,4)   magic "IBCS"
//	[4,6)   version
//	[6,14)  stream hash      [14,18) partition
//	[18,26) segment base     [26,34) segment token   [34,42) file size
//	[42,50) data end         [50,58) next offset     [58,66) first offset
//	[66,74) records          [74,82) min timestamp   [82,90) max timestamp
//	u32 n, then n × (offset u64, position i64, prior max timestamp i64,
//	    subject mask 2×u64): the sparse index and its block masks
//	u32 n, then n × u16: dictionary subject ends; u32 n, then n bytes: slab
//	u32 n, then n × u32: spot block ends; u32 n, then n × u32: spots
//	u32 CRC32C of everything before it
const (
	cleanStopName     = "clean-stop" + prepareSuffix
	cleanStopTempName = "clean-stop-next" + prepareSuffix
	cleanStopVersion  = 1
	cleanStopFixed    = 90
	// cleanStopMaxBytes bounds the marker file read at open: the largest
	// segment's (MaxSegmentSize) index, masks, dictionary and spots take
	// under 1 MiB.
	cleanStopMaxBytes = 64 << 20
)

var cleanStopMagic = [4]byte{'I', 'B', 'C', 'S'}

// ErrCorruptCleanStop reports a clean-stop marker that fails its checks.
var ErrCorruptCleanStop = errors.New("segment: clean-stop marker is corrupt")

// cleanStop is the state a clean stop leaves for the active segment.
type cleanStop struct {
	streamHash   uint64
	partition    uint32
	base         uint64
	token        uint64
	fileSize     int64
	end          int64
	next         uint64
	first        uint64
	records      uint64
	minTS, maxTS int64
	index        []indexEntry
	blocks       []subjectMask
	dict         subjectDict
	spots        blockSpots
}

func (m *cleanStop) encode() []byte {
	size := cleanStopFixed + 4 + 40*len(m.index) + 4 + 2*len(m.dict.ends) + 4 + len(m.dict.slab) +
		4 + 4*len(m.spots.ends) + 4 + 4*len(m.spots.spots) + 4
	b := make([]byte, 0, size)
	le := binary.LittleEndian
	b = append(b, cleanStopMagic[:]...)
	b = le.AppendUint16(b, cleanStopVersion)
	b = le.AppendUint64(b, m.streamHash)
	b = le.AppendUint32(b, m.partition)
	for _, v := range []uint64{m.base, m.token, uint64(m.fileSize), uint64(m.end), m.next, m.first,
		m.records, uint64(m.minTS), uint64(m.maxTS)} {
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint32(b, uint32(len(m.index)))
	for i, e := range m.index {
		b = le.AppendUint64(b, e.Offset)
		b = le.AppendUint64(b, uint64(e.Position))
		b = le.AppendUint64(b, uint64(e.PriorMaxTimestamp))
		b = le.AppendUint64(b, m.blocks[i][0])
		b = le.AppendUint64(b, m.blocks[i][1])
	}
	b = le.AppendUint32(b, uint32(len(m.dict.ends)))
	for _, end := range m.dict.ends {
		b = le.AppendUint16(b, end)
	}
	b = le.AppendUint32(b, uint32(len(m.dict.slab)))
	b = append(b, m.dict.slab...)
	for _, list := range [][]uint32{m.spots.ends, m.spots.spots} {
		b = le.AppendUint32(b, uint32(len(list)))
		for _, v := range list {
			b = le.AppendUint32(b, v)
		}
	}
	return le.AppendUint32(b, format.CRC(b))
}

// cleanStopReader walks a marker image; the first short read sticks.
type cleanStopReader struct {
	b   []byte
	at  int
	bad bool
}

func (r *cleanStopReader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b)-r.at < n {
		r.bad = true
		return nil
	}
	out := r.b[r.at : r.at+n]
	r.at += n
	return out
}

func (r *cleanStopReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *cleanStopReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *cleanStopReader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a length whose items take width bytes each, refusing one
// the rest of the image cannot hold.
func (r *cleanStopReader) count(width int) int {
	n := int(r.u32())
	if r.bad || n > (len(r.b)-r.at)/width {
		r.bad = true
		return 0
	}
	return n
}

// decodeCleanStop checks the magic, the version and the CRC, then decodes.
// A newer version is ErrTooNew: its meaning is unknown here, so it is never
// trusted.
func decodeCleanStop(image []byte) (*cleanStop, error) {
	if len(image) < cleanStopFixed+4 || [4]byte(image[:4]) != cleanStopMagic {
		return nil, fmt.Errorf("%w: bad magic or too short (%d bytes)", ErrCorruptCleanStop, len(image))
	}
	if v := binary.LittleEndian.Uint16(image[4:6]); v > cleanStopVersion {
		return nil, fmt.Errorf("%w: clean-stop marker version %d (this binary reads up to %d)", ErrTooNew, v, cleanStopVersion)
	} else if v == 0 {
		return nil, fmt.Errorf("%w: version 0", ErrCorruptCleanStop)
	}
	body := image[:len(image)-4]
	if format.CRC(body) != binary.LittleEndian.Uint32(image[len(image)-4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorruptCleanStop)
	}
	r := &cleanStopReader{b: body, at: 6}
	m := &cleanStop{streamHash: r.u64(), partition: r.u32(), base: r.u64(), token: r.u64(),
		fileSize: int64(r.u64()), end: int64(r.u64()), next: r.u64(), first: r.u64(), records: r.u64(),
		minTS: int64(r.u64()), maxTS: int64(r.u64())}
	n := r.count(40)
	m.index, m.blocks = make([]indexEntry, n), make([]subjectMask, n)
	for i := range n {
		m.index[i] = indexEntry{Offset: r.u64(), Position: int64(r.u64()), PriorMaxTimestamp: int64(r.u64())}
		m.blocks[i] = subjectMask{r.u64(), r.u64()}
	}
	m.dict.ends = make([]uint16, r.count(2))
	for i := range m.dict.ends {
		m.dict.ends[i] = r.u16()
	}
	m.dict.slab = append([]byte(nil), r.take(r.count(1))...)
	m.spots.ends = make([]uint32, r.count(4))
	for i := range m.spots.ends {
		m.spots.ends[i] = r.u32()
	}
	m.spots.spots = make([]uint32, r.count(4))
	for i := range m.spots.spots {
		m.spots.spots[i] = r.u32()
	}
	if r.bad || r.at != len(body) {
		return nil, fmt.Errorf("%w: lengths do not match the image", ErrCorruptCleanStop)
	}
	if err := m.checkShape(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkShape checks what the marker says about itself, so a marker that
// passes its CRC but was written wrong can never index out of range.
func (m *cleanStop) checkShape() error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrCorruptCleanStop, what) }
	switch {
	case m.end < format.SegmentDataStart || m.end > m.fileSize:
		return bad("data end outside the file")
	case m.next < m.base || m.records > m.next-m.base:
		return bad("offsets out of range")
	case m.records == 0 && (m.end != format.SegmentDataStart || len(m.index) != 0):
		return bad("an empty segment with data")
	case len(m.dict.ends) > summaryMaxSubjects || len(m.dict.slab) > summaryMaxBytes:
		return bad("subject dictionary too large")
	case len(m.spots.ends) > len(m.index):
		return bad("more spot blocks than index entries")
	}
	previous := uint16(0)
	for _, end := range m.dict.ends {
		if end < previous || int(end) > len(m.dict.slab) {
			return bad("subject dictionary out of order")
		}
		previous = end
	}
	position := int64(format.SegmentDataStart - 1)
	for _, e := range m.index {
		if e.Position <= position || e.Position >= m.end || e.Offset < m.base || e.Offset >= m.next {
			return bad("index entry out of range")
		}
		position = e.Position
	}
	spotEnd := uint32(0)
	for _, end := range m.spots.ends {
		if end < spotEnd || int(end) > len(m.spots.spots) {
			return bad("spots out of order")
		}
		spotEnd = end
	}
	return nil
}

// scanResult is what a scan of the segment would have found, by C1-C2.
func (m *cleanStop) scanResult() *scanResult {
	result := &scanResult{End: m.end, NextOffset: m.next, FirstOffset: m.first, Records: m.records,
		MinTimestamp: m.minTS, MaxTimestamp: m.maxTS, Index: m.index, Blocks: m.blocks,
		Dict: dictBuilderOf(m.dict), Spots: m.spots.truncated(len(m.index) - 1)}
	if m.records == 0 {
		// As a scan leaves them for a segment without records.
		result.FirstOffset, result.MinTimestamp, result.MaxTimestamp = 0, math.MaxInt64, math.MinInt64
	}
	return result
}

// dictBuilderOf continues a dictionary from its published form.
func dictBuilderOf(d subjectDict) dictBuilder {
	b := dictBuilder{dict: d}
	for id := range d.ends {
		slot := int(format.XXH3(d.subject(id)) % summarySlots)
		for b.slots[slot] != 0 {
			slot = (slot + 1) % summarySlots
		}
		b.slots[slot] = uint8(id + 1)
	}
	return b
}

// readCleanStop reads the marker of a writable open. A missing one is
// nil; a damaged or newer one is logged and never trusted.
func (r *recovery) readCleanStop() *cleanStop {
	l := r.l
	file := path.Join(l.path, cleanStopName)
	var image []byte
	info, err := l.fs.Stat(file)
	switch {
	case err == nil && info.Size > cleanStopMaxBytes:
		err = fmt.Errorf("%w: %d bytes", ErrCorruptCleanStop, info.Size)
	case err == nil:
		image, err = vfs.ReadFile(l.fs, file)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		l.opts.Logger.Warn("clean-stop marker unreadable: scanning the active segment", "log", l.id.String(), "error", err.Error())
		return nil
	}
	marker, err := decodeCleanStop(image)
	if err != nil {
		l.opts.Logger.Warn("clean-stop marker not trusted: scanning the active segment", "log", l.id.String(), "error", err.Error())
	}
	return marker
}

// removeCleanStop removes the marker and its temporary name and syncs the
// directory (C2). Recovery calls it once it knows the log will be
// written, before its repairs and before the appender starts; a log that
// opens frozen is left untouched, marker included.
func (r *recovery) removeCleanStop() error {
	if !r.markers {
		return nil
	}
	l := r.l
	for _, name := range []string{cleanStopName, cleanStopTempName} {
		if err := l.fs.Remove(path.Join(l.path, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the clean-stop marker %s: %w", name, err)
		}
	}
	return l.fs.SyncDir(l.path)
}

// trustCleanStop installs the marker's state as the scan of sf, the last
// segment, when the marker matches it: same log, same file (base, token,
// size), unsealed, and its end closed by a commit frame of this segment
// carrying the marker's last offset, with zeros after it.
func (r *recovery) trustCleanStop(sf *segmentFile, m *cleanStop) (bool, error) {
	l := r.l
	if m.streamHash != l.streamHash || m.partition != l.id.Partition || m.base != sf.base ||
		sf.headerErr != nil || sf.footer != nil || m.token != sf.header.Token || m.fileSize != sf.size {
		return false, nil
	}
	// Mapped, as a scan would: only the pages around the end are touched
	// (where files cannot be mapped, mapFile reads the file whole, as the
	// scan would have).
	data, err := r.mapFile(sf)
	if err != nil {
		return false, err
	}
	from := max(m.end-format.CommitFrameSize, format.SegmentDataStart)
	buf := data[from : m.end+min(vfs.DirectAlignment, sf.size-m.end)]
	if !format.IsZero(buf[m.end-from:]) {
		return false, nil
	}
	if m.records > 0 {
		c, err := format.DecodeCommit(buf)
		if err != nil || c.Token != m.token || c.LastOffset+1 != m.next {
			return false, nil
		}
	}
	sf.scan = m.scanResult()
	sf.next, sf.nextKnown = m.next, true
	r.report.CleanStop = true
	return true, nil
}

// writeCleanStop leaves the marker at a clean close (C1). REQUIRES: the
// write token held, the appender stopped and the log synced.
func (l *Log) writeCleanStop() error {
	m, ok := l.cleanStopState()
	if !ok {
		return nil
	}
	return vfs.WriteFileAtomicVia(l.fs, path.Join(l.path, cleanStopName), path.Join(l.path, cleanStopTempName), m.encode())
}

// cleanStopState returns the marker for the log as it stands, or false
// when it may not have one: frozen, something unsynced, staged or in
// flight, no active segment, or gaps in it (skip frames stay the scan's).
func (l *Log) cleanStopState() (*cleanStop, bool) {
	a := &l.app
	seg := a.active
	if seg == nil || seg.sealed.Load() || a.write == nil {
		return nil, false
	}
	l.mu.Lock()
	committed := l.committed.Load()
	idle := l.mu.failure == nil && l.mu.staging.count == 0 && len(l.mu.inflight) == 0 &&
		(l.mu.written.seg == nil || l.mu.written.next == committed.next) && l.mu.nextOffset == committed.next
	l.mu.Unlock()
	if !idle || committed.seg != seg || committed.pos != a.pos || committed.next != a.next {
		return nil, false
	}
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if len(seg.mu.holes) > 0 || seg.mu.next != a.next || seg.mu.records != a.count ||
		len(seg.mu.summary.blocks) != len(seg.mu.index) {
		return nil, false
	}
	return &cleanStop{streamHash: l.streamHash, partition: l.id.Partition, base: seg.base,
		token: seg.header.Token, fileSize: a.size, end: a.pos, next: a.next, first: a.first,
		records: a.count, minTS: a.minTS, maxTS: a.maxTS, index: seg.mu.index,
		blocks: seg.mu.summary.blocks, dict: seg.mu.summary.dict, spots: seg.mu.summary.spots}, true
}

// trustPrefix marks the bytes before end as installed from a clean-stop
// marker: like a sealed segment's, they are checked in full on the first
// read (C4).
func (s *segment) trustPrefix(end int64, next uint64) {
	s.mu.Lock()
	s.mu.validated = false
	s.mu.trustedEnd, s.mu.trustedNext = end, next
	s.mu.Unlock()
	s.trustPending.Store(true)
}

// validateTrusted runs the first-read check of an active segment's trusted
// prefix (C4). Damage is reported as a runtime loss event, becomes holes
// readers skip, and, when the log is writable, is quarantined and covered
// with a skip frame as in a sealed segment. The repair holds the write
// token, so the appender is not writing meanwhile and Close, which writes
// no marker for a segment with holes, comes before or after it whole.
func (l *Log) validateTrusted(seg *segment) error {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	damages, err := seg.validatePrefix(l.opts.MaxRecordBytes)
	if err != nil || len(damages) == 0 {
		return err
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	repairable := !l.mu.closed && l.mu.failure == nil && !l.opts.ReadOnly
	l.mu.Unlock()
	var repair func(*segment, damage, *LossEvent) error
	if repairable {
		repair = l.repairTrusted
	}
	seg.addHoles(l.recordDamage(seg, damages, "damage found reading the active segment", repair))
	seg.forgetDamaged(damages)
	if a := &l.app; a.active == seg {
		a.spots.blockSpots = seg.publishedSpots()
	}
	l.dir.reportRuntimeDamage(l)
	return nil
}

// forgetDamaged keeps the marker's index and summary true to a prefix in
// which damage was found: an index entry inside a damaged region moves to
// its start (a walk from there meets the hole first and jumps it), and a
// block touching damage lists no spots (its positions may lie in the
// hole, or be relative to a start that moved). Masks stay supersets of
// their blocks (S2) because blocks only lose records. REQUIRES: the write
// token held, so the appender does not publish meanwhile.
func (s *segment) forgetDamaged(damages []damage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	index := slices.Clone(s.mu.index)
	touched := make([]bool, len(index))
	for i := range index {
		blockEnd := int64(math.MaxInt64)
		if i+1 < len(index) {
			blockEnd = index[i+1].Position
		}
		for _, d := range damages {
			if index[i].Position > d.Start && index[i].Position < d.End {
				index[i].Position = d.Start
			}
			if index[i].Position < d.End && d.Start < blockEnd {
				touched[i] = true
			}
		}
	}
	old := s.mu.summary.spots
	var spots blockSpots
	for i := range old.ends {
		if !touched[i] {
			spots.spots = append(spots.spots, old.of(i)...)
		}
		spots.ends = append(spots.ends, uint32(len(spots.spots)))
	}
	s.mu.index, s.mu.summary.spots = index, spots
}

// publishedSpots returns the spots readers see. REQUIRES: not s.mu.
func (s *segment) publishedSpots() blockSpots {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.summary.spots
}

// repairTrusted quarantines a damaged region of the active segment's
// trusted prefix and writes a skip frame over its start. In direct mode
// the appender rewrites the partial block it writes into from its copy of
// it, so a skip frame landing in that block is copied there too.
// REQUIRES: the write token held.
func (l *Log) repairTrusted(seg *segment, d damage, ev *LossEvent) error {
	damaged := make([]byte, d.End-d.Start)
	if err := seg.readAt(damaged, d.Start); err != nil {
		return err
	}
	if err := l.coverDamage(seg, d, damaged, ev); err != nil {
		return err
	}
	a := &l.app
	if !ev.Applied || a.active != seg || len(a.tail) == 0 {
		return nil
	}
	skip := format.AppendSkip(nil, format.Skip{Token: seg.header.Token, Length: uint32(d.End - d.Start),
		FirstLost: d.FirstLost, LostCount: d.LostCount, ReasonCode: uint32(d.Reason)})
	blockStart := a.pos - int64(len(a.tail))
	for i, b := range skip {
		if at := d.Start + int64(i) - blockStart; at >= 0 && at < int64(len(a.tail)) {
			a.tail[at] = b
		}
	}
	return nil
}

// readAt reads len(buf) bytes at off through the read handle.
func (s *segment) readAt(buf []byte, off int64) error {
	s.mu.Lock()
	file, err := s.readHandleLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := file.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// validatePrefix scans the trusted prefix as a sealed region (every byte
// of it was synced before the marker was written). The appender may write
// after the prefix meanwhile: the scan holds no lock on the segment and
// never looks past the prefix. REQUIRES: the log's maintMu held.
func (s *segment) validatePrefix(maxBody uint32) ([]damage, error) {
	if !s.trustPending.Load() {
		return nil, nil
	}
	s.mu.Lock()
	end, next := s.mu.trustedEnd, s.mu.trustedNext
	file, err := s.readHandleLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var mapping vfs.Mapping
	if mapper, ok := file.(vfs.Mapper); ok {
		mapping, err = mapper.Map(end)
	} else {
		err = vfs.ErrNotSupported
	}
	if errors.Is(err, vfs.ErrNotSupported) {
		mapping, err = readMapping(file, end)
	}
	if err != nil {
		return nil, fmt.Errorf("segment: reading %s: %w", s.path, err)
	}
	defer mapping.Close()
	result := scanSegment(mapping.Bytes(), s.header.Token, s.base, maxBody,
		scanLimits{End: end, Sealed: true, SealedNext: next})
	if result.TooNew != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTooNew, s.name, result.TooNew)
	}
	s.mu.Lock()
	s.mu.validated = true
	s.mu.Unlock()
	s.trustPending.Store(false)
	return result.Damage, nil
}
