package segment

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// segment is one segment file of a log. The set that lists it holds one
// reference; readers and the committer take more, so retention can drop a
// segment from the set while a reader still uses it: the files close when
// the last reference goes.
//
// A sealed segment is immutable. On its first read it is mapped and scanned
// once (every record and batch checksum), which builds its index and finds
// any damage; recovery itself never scans sealed segments, so opening a log
// costs time proportional to its unsealed tail only.
type segment struct {
	name   string // file name
	path   string
	base   uint64
	header format.SegmentHeader
	fs     vfs.FS

	refs   atomic.Int64
	sealed atomic.Bool
	// replaced: compaction renamed a new file over this segment's path
	// and took it out of the set; its open descriptor is the only way to
	// its bytes, so it is never closed idle (it would reopen the new file).
	replaced atomic.Bool
	// trustPending: the bytes before mu.trustedEnd were installed from a
	// clean-stop marker, not scanned; the first read validates them.
	trustPending atomic.Bool

	mu struct {
		sync.Mutex
		file    vfs.File // read handle; also the write handle in buffered mode
		mapping vfs.Mapping
		// live says mapping is a live view of the file made while the
		// segment was active (liveViewLocked); it stays the segment's
		// mapping once sealed. noLive: making one failed, do not retry.
		// outgrown holds live mappings a sealed view had to replace
		// (shorter than the sealed file), closed with the segment.
		live, noLive bool
		outgrown     []vfs.Mapping
		// retired holds handles a cut replaced (RaftLog.TruncateFrom),
		// closed with the segment.
		retired     []vfs.File
		validated   bool   // sealed: scanned once after mapping
		trustedEnd  int64  // with trustPending: the marker's data end
		trustedNext uint64 // and next offset
		indexBuilt  bool   // index is current (false after closeIdle)
		footer      format.Footer
		index       []indexEntry
		summary     subjectSummary // subjects per index block (summary.go)
		holes       []hole         // offset ranges this segment does not hold
		next        uint64         // one past the last offset held (records or holes)
		records     uint64
		minTS       int64
		maxTS       int64
		size        int64 // bytes of frames (sealed: footer end)
	}
}

func newSegment(fsys vfs.FS, dir, name string, header format.SegmentHeader) *segment {
	s := &segment{name: name, path: dir + "/" + name, base: header.BaseOffset, header: header, fs: fsys}
	s.refs.Store(1)
	s.mu.next = header.BaseOffset
	s.mu.minTS, s.mu.maxTS = math.MaxInt64, math.MinInt64
	return s
}

// tryAcquire takes a reference unless the segment is already released.
func (s *segment) tryAcquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference and closes the files with the last one.
func (s *segment) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeMappingsLocked()
	if s.mu.file != nil {
		_ = s.mu.file.Close()
		s.mu.file = nil
	}
	for _, file := range s.mu.retired {
		_ = file.Close()
	}
	s.mu.retired = nil
}

// closeMappingsLocked unmaps the segment. REQUIRES: s.mu held, and no
// reader or run left using the bytes.
func (s *segment) closeMappingsLocked() {
	if s.mu.mapping != nil {
		_ = s.mu.mapping.Close()
	}
	for _, mapping := range s.mu.outgrown {
		_ = mapping.Close()
	}
	s.mu.mapping, s.mu.outgrown, s.mu.live = nil, nil, false
}

// liveViewLocked returns bytes [0, end) of an unsealed segment through a
// live mapping of its file (vfs.LiveMapper), made on first use: reads of
// the active segment then cost no system call and runs alias the page
// cache as they do for sealed segments. Only logs written through the page
// cache ask for it (Log.liveReads): after an O_DIRECT write a mapping
// could hold a page the write went around. false when there is no such
// view, or end lies past it (the file grew); the caller then reads with
// pread. Readers never look past the committed mark, which is inside the
// file however it is later cut at the seal. REQUIRES: s.mu held.
func (s *segment) liveViewLocked(end int64) ([]byte, bool) {
	if s.mu.mapping == nil && !s.mu.noLive {
		s.mu.noLive = true // until a mapping is made
		file, err := s.readHandleLocked()
		if err != nil {
			return nil, false
		}
		mapper, ok := file.(vfs.LiveMapper)
		size, sizeErr := file.Size()
		if !ok || sizeErr != nil || size <= 0 {
			return nil, false
		}
		mapping, err := mapper.MapLive(size)
		if err != nil {
			return nil, false
		}
		s.mu.mapping, s.mu.live, s.mu.noLive = mapping, true, false
	}
	if s.mu.mapping == nil || !s.mu.live {
		return nil, false
	}
	data := s.mu.mapping.Bytes()
	if end > int64(len(data)) {
		return nil, false
	}
	return data[:end], true
}

// setFile installs the read handle (recovery or roll).
func (s *segment) setFile(file vfs.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.file = file
}

// readHandle returns the read handle, opening it on first use.
// REQUIRES: s.mu held.
func (s *segment) readHandleLocked() (vfs.File, error) {
	if s.mu.file != nil {
		return s.mu.file, nil
	}
	file, err := s.fs.OpenFile(s.path, vfs.ReadOnly)
	if err != nil {
		return nil, err
	}
	s.mu.file = file
	return file, nil
}

// syncData syncs the segment's file through its read handle: fdatasync
// flushes the inode whichever descriptor it is called on.
func (s *segment) syncData() error {
	s.mu.Lock()
	file, err := s.readHandleLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return file.SyncData()
}

// seal records the footer of a segment that will never change again.
func (s *segment) seal(footer format.Footer) {
	s.mu.Lock()
	s.mu.footer = footer
	s.mu.size = int64(footer.DataEnd) + format.FooterFrameSize
	s.mu.next = footer.NextOffset
	s.mu.records = footer.Count
	if footer.Count > 0 {
		s.mu.minTS, s.mu.maxTS = footer.MinTimestamp, footer.MaxTimestamp
	}
	// The summary stops growing: keep only the bytes it uses.
	s.mu.summary = subjectSummary{dict: compactDict(s.mu.summary.dict), blocks: exactBlocks(s.mu.summary.blocks),
		spots: s.mu.summary.spots.exact()}
	s.mu.Unlock()
	s.sealed.Store(true)
}

// recordAppend extends the index and subject summary of the active segment
// after a write. The appender calls it; readers see the new entries at
// once but read no further than the committed mark.
func (s *segment) recordAppend(entries []indexEntry, bits *blockBits, dict subjectDict, spots blockSpots, next uint64, records uint64, minTS, maxTS int64, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.index = append(s.mu.index, entries...)
	s.mu.summary.blocks = bits.appendTo(s.mu.summary.blocks)
	s.mu.summary.dict = dict
	s.mu.summary.spots = spots
	s.mu.next = next
	s.mu.records += records
	s.mu.minTS = min(s.mu.minTS, minTS)
	s.mu.maxTS = max(s.mu.maxTS, maxTS)
	s.mu.size = size
}

// installScan adopts what a recovery scan of this segment found.
func (s *segment) installScan(r *scanResult, holes []hole) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.index = r.Index
	s.mu.summary = subjectSummary{dict: r.Dict.dict, blocks: r.Blocks, spots: r.Spots}
	s.mu.holes = holes
	s.mu.next = r.NextOffset
	s.mu.records = r.Records
	s.mu.minTS, s.mu.maxTS = r.MinTimestamp, r.MaxTimestamp
	s.mu.size = r.End
	s.mu.validated = true // a scanned segment needs no first-read scan
	s.mu.indexBuilt = true
}

// next returns one past the last offset this segment holds.
func (s *segment) next() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.next
}

// ensureValidated maps a sealed segment and scans it once. The scan's
// damage comes back so the log can report (and, when writable, repair) it;
// the caller turns damage into holes with addHoles.
func (s *segment) ensureValidated(maxBody uint32) ([]damage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.validated {
		return nil, nil
	}
	data, err := s.mappedLocked()
	if err != nil {
		return nil, err
	}
	footer := s.mu.footer
	limits := scanLimits{End: int64(footer.DataEnd), Sealed: true, SealedNext: footerNext(footer)}
	result := scanSegment(data, s.header.Token, s.base, maxBody, limits)
	if result.TooNew != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTooNew, s.name, result.TooNew)
	}
	s.mu.index = result.Index
	s.mu.summary = subjectSummary{dict: compactDict(result.Dict.dict), blocks: exactBlocks(result.Blocks),
		spots: result.Spots.exact()}
	s.mu.holes = result.Holes
	s.mu.records = result.Records
	s.mu.validated = true
	s.mu.indexBuilt = true
	return result.Damage, nil
}

// footerNext is one past the last offset a sealed segment covers.
func footerNext(f format.Footer) uint64 { return f.NextOffset }

// mappedLocked returns the bytes of a sealed segment, mapping it on first
// use. REQUIRES: s.mu held; the segment is sealed.
func (s *segment) mappedLocked() ([]byte, error) {
	if s.mu.mapping != nil && s.mu.live {
		// The live view made while the segment was active serves the
		// sealed bytes too: the file was cut after them, never before.
		if data := s.mu.mapping.Bytes(); int64(len(data)) >= s.mu.size {
			return data[:s.mu.size], nil
		}
		// Mapped before the file grew: keep it for the runs that alias
		// it, and map the sealed file anew.
		s.mu.outgrown = append(s.mu.outgrown, s.mu.mapping)
		s.mu.mapping, s.mu.live = nil, false
	}
	if s.mu.mapping != nil {
		return s.mu.mapping.Bytes(), nil
	}
	file, err := s.readHandleLocked()
	if err != nil {
		return nil, err
	}
	size := s.mu.size
	var mapping vfs.Mapping
	if mapper, ok := file.(vfs.Mapper); ok {
		mapping, err = mapper.Map(size)
	} else {
		err = vfs.ErrNotSupported
	}
	if errors.Is(err, vfs.ErrNotSupported) {
		mapping, err = readMapping(file, size)
	}
	if err != nil {
		return nil, fmt.Errorf("segment: mapping %s: %w", s.path, err)
	}
	s.mu.mapping = mapping
	return mapping.Bytes(), nil
}

type bytesMapping struct{ data []byte }

func (m *bytesMapping) Bytes() []byte { return m.data }
func (m *bytesMapping) Close() error  { m.data = nil; return nil }

func readMapping(file vfs.File, size int64) (vfs.Mapping, error) {
	data := make([]byte, size)
	if _, err := file.ReadAt(data, 0); err != nil && int64(len(data)) != size {
		return nil, err
	}
	return &bytesMapping{data: data}, nil
}

// addHoles records offset ranges that damage removed from a validated
// segment, keeping the list ordered.
func (s *segment) addHoles(holes []hole) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.holes = append(s.mu.holes, holes...)
	sort.Slice(s.mu.holes, func(i, j int) bool { return s.mu.holes[i].First < s.mu.holes[j].First })
}

// locate returns where the first record at or after offset starts, as a
// position to begin walking frames from.
func (s *segment) locate(offset uint64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureIndexLocked()
	index := s.mu.index
	i := sort.Search(len(index), func(i int) bool { return index[i].Offset > offset })
	if i == 0 {
		return format.SegmentDataStart
	}
	return index[i-1].Position
}

// locateTime returns a position from which the first record with a
// timestamp at or after ts can be found by walking forward.
func (s *segment) locateTime(ts int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureIndexLocked()
	index := s.mu.index
	// PriorMaxTimestamp is non-decreasing: the first entry whose prior
	// maximum reaches ts starts just after the block holding the answer.
	i := sort.Search(len(index), func(i int) bool { return index[i].PriorMaxTimestamp >= ts })
	if i <= 1 {
		return format.SegmentDataStart
	}
	return index[i-1].Position
}

// holeAt returns the hole containing offset, if any.
func (s *segment) holeAt(offset uint64) (hole, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.mu.holes {
		if offset >= h.First && offset-h.First < h.Count {
			return h, true
		}
	}
	return hole{}, false
}

// stats returns a consistent snapshot for reports.
func (s *segment) stats() segmentStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	stats := segmentStats{Name: s.name, Base: s.base, Next: s.mu.next, Records: s.mu.records,
		Sealed: s.sealed.Load(), Bytes: s.mu.size, MinTimestamp: s.mu.minTS, MaxTimestamp: s.mu.maxTS}
	for _, h := range s.mu.holes {
		if h.Known && h.Reason != ReasonCompacted { // compaction is not damage
			stats.KnownGaps += h.Count
		}
	}
	return stats
}

type segmentStats struct {
	KnownGaps    uint64 // records in gaps found as skip frames (damage)
	Name         string
	Base, Next   uint64
	Records      uint64
	Sealed       bool
	Bytes        int64
	MinTimestamp int64
	MaxTimestamp int64
}

// segmentSet is an immutable, ordered list of a log's segments. Writers
// publish a new set; readers load one and take references.
type segmentSet struct {
	segments []*segment
}

// find returns the segment that holds offset: the last one whose base is at
// or below it.
func (set *segmentSet) find(offset uint64) (*segment, int) {
	segs := set.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	if i == 0 {
		return nil, -1
	}
	return segs[i-1], i - 1
}

func (set *segmentSet) with(seg *segment) *segmentSet {
	segs := make([]*segment, 0, len(set.segments)+1)
	segs = append(segs, set.segments...)
	segs = append(segs, seg)
	return &segmentSet{segments: segs}
}

func (set *segmentSet) without(seg *segment) *segmentSet {
	segs := make([]*segment, 0, len(set.segments))
	for _, s := range set.segments {
		if s != seg {
			segs = append(segs, s)
		}
	}
	return &segmentSet{segments: segs}
}
