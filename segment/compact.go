package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"

	"github.com/zeebo/xxh3"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Key compaction keeps, in sealed segments, only the latest record of each
// key. A compacted segment keeps its name, base and next offset: its
// records keep their offsets, and every removed run of offsets is covered
// by a skip frame with reason ReasonCompacted, so the offsets of a segment
// stay accounted for exactly as the scanner, the reader and recovery
// expect (a batch is still dense; the gaps are between batches), and a
// binary that predates compaction reads a compacted segment as one with
// known gaps.
//
//   - K1 the active segment is never rewritten; records without a key and
//     records at or above CompactPolicy.Floor are always kept.
//   - K2 a keyed record goes only when a later record of its key exists,
//     or it is that key's latest record, a tombstone, and its delete
//     retention has passed.
//   - K3 a rewrite is a new file written beside the old one under a
//     ".prepare" name (which a writable open deletes), synced, then renamed
//     over the old file and the directory synced: a crash leaves the old
//     segment or the new one under the segment's name, never both or
//     neither.
//
// The key map of a pass is bounded (CompactPolicy.MaxKeys): it is built
// from the oldest record forward until it is full, the sealed segments up
// to where it stopped are rewritten with it, and the next pass starts
// there. A key is known by the 128-bit xxh3 of its bytes.

// DefaultCompactKeys bounds the key map of one compaction pass (about
// 64 bytes of memory a key, so 1 MiB): small enough for an edge device's
// RAM budget; a partition with more keys takes more passes.
const DefaultCompactKeys = 1 << 14

// compactSuffix names a compacted segment before it replaces the old one.
const compactSuffix = ".compact" + prepareSuffix

// CompactBatchBytes closes a batch of kept records at this size (the
// memory a rewrite holds), and a damaged byte costs at most one batch.
const CompactBatchBytes = 256 << 10

// CompactPolicy says what a compaction may remove.
type CompactPolicy struct {
	// Floor: only records below it may go; it is the lowest position a
	// consumer group has not committed. math.MaxUint64 when nothing pins.
	Floor uint64
	// TombstoneExpired reports whether the tombstone stamped timestamp in
	// the sealed segment starting at base is past its delete retention;
	// nil keeps every tombstone that is its key's latest record.
	TombstoneExpired func(base uint64, timestamp int64) bool
	// MaxKeys bounds the key map of one pass; zero is DefaultCompactKeys.
	MaxKeys int
}

// CompactResult says what a compaction did.
type CompactResult struct {
	Passes            int
	SegmentsRewritten int
	RecordsRemoved    uint64 // tombstones included
	TombstonesRemoved uint64
	// TombstonesPending: a tombstone stays that its delete retention (or
	// a group) kept, so a later compaction may remove it. A hint: it may
	// be set when a later pass removed that tombstone after all.
	TombstonesPending bool
	// BytesBefore is the size of the sealed segments when the compaction
	// started, BytesAfter that less what it reclaimed (segments sealed
	// meanwhile are not counted); RecordsKept is the records of the
	// sealed segments after.
	RecordsKept uint64
	BytesBefore int64
	BytesAfter  int64
}

type keyHash [16]byte

func hashKey(key []byte) keyHash { return xxh3.Hash128(key).Bytes() }

// Compact rewrites the log's sealed segments keeping the latest record of
// each key (see K1-K3 above). One compaction runs per log at a time; reads
// and appends go on meanwhile.
func (l *Log) Compact(ctx context.Context, policy CompactPolicy) (CompactResult, error) {
	if l.opts.ReadOnly {
		return CompactResult{}, ErrReadOnly
	}
	if policy.MaxKeys <= 0 {
		policy.MaxKeys = DefaultCompactKeys
	}
	l.compactMu.Lock()
	defer l.compactMu.Unlock()
	var result CompactResult
	result.BytesBefore, _ = l.sealedTotals()
	result.BytesAfter = result.BytesBefore
	end := l.Committed()
	if l.sealedEnd() == 0 {
		return result, nil
	}
	// Passes run up to the committed end: a record in the active segment
	// supersedes the sealed records of its key too.
	for from := l.FirstOffset(); from < end; {
		keys, upTo, err := l.latestKeys(ctx, from, end, policy.MaxKeys)
		if err != nil {
			return result, err
		}
		result.Passes++
		for _, seg := range l.segments.Load().segments {
			if seg.base >= upTo || !seg.sealed.Load() {
				break
			}
			if err := l.compactSegment(ctx, seg, keys, policy, &result); err != nil {
				return result, err
			}
		}
		from = upTo
	}
	_, result.RecordsKept = l.sealedTotals()
	return result, nil
}

// sealedTotals sums the bytes and records of the sealed segments.
func (l *Log) sealedTotals() (int64, uint64) {
	var bytes int64
	var records uint64
	for _, seg := range l.segments.Load().segments {
		if stats := seg.stats(); stats.Sealed {
			bytes += stats.Bytes
			records += stats.Records
		}
	}
	return bytes, records
}

// latestKeys maps each key of the records in [from, end) to its latest
// offset, stopping before the first record whose key does not fit; upTo
// is where it stopped.
func (l *Log) latestKeys(ctx context.Context, from, end uint64, maxKeys int) (map[keyHash]uint64, uint64, error) {
	keys := make(map[keyHash]uint64, min(maxKeys, 1<<12))
	r := l.NewReader(from)
	defer r.Close()
	for count := 0; ; count++ {
		if count%4096 == 0 && ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		entry, err := r.Next()
		if errors.Is(err, io.EOF) {
			return keys, end, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if entry.Gap != nil {
			continue
		}
		if entry.Offset >= end {
			return keys, end, nil
		}
		key, _, ok := record.Key(entry.Body)
		if !ok || len(key) == 0 {
			continue
		}
		h := hashKey(key)
		if _, known := keys[h]; !known && len(keys) >= maxKeys {
			return keys, entry.Offset, nil
		}
		keys[h] = entry.Offset
	}
}

// compactSegment rewrites one sealed segment when the key map removes at
// least one of its records.
func (l *Log) compactSegment(ctx context.Context, seg *segment, keys map[keyHash]uint64, policy CompactPolicy, result *CompactResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if !seg.tryAcquire() {
		return nil // retention removed it
	}
	defer seg.release()
	if err := l.validateSealed(seg); err != nil {
		return err
	}
	plan, err := l.planSegment(seg, keys, policy)
	result.TombstonesPending = result.TombstonesPending || plan.tombstonesKept > 0
	if err != nil || plan.removed == 0 {
		return err
	}
	replacement, err := l.writeCompacted(seg, plan)
	if err != nil {
		return err
	}
	swapped, err := l.replaceSegment(seg, replacement)
	if swapped {
		result.SegmentsRewritten++
		result.RecordsRemoved += plan.removed
		result.TombstonesRemoved += plan.tombstones
		result.BytesAfter -= seg.stats().Bytes - replacement.stats().Bytes
	}
	return err
}

// segmentPlan is which records of a segment go.
type segmentPlan struct {
	base           uint64
	gone           []uint64 // bit per offset from base: removed
	removed        uint64
	tombstones     uint64
	tombstonesKept uint64 // its key's latest record, kept
}

func (p *segmentPlan) remove(offset uint64) {
	i := offset - p.base
	p.gone[i/64] |= 1 << (i % 64)
	p.removed++
}

// removes reports whether the record at offset goes; an offset outside
// the segment (none in a validated one) stays.
func (p *segmentPlan) removes(offset uint64) bool {
	i := offset - p.base
	if offset < p.base || i/64 >= uint64(len(p.gone)) {
		return false
	}
	return p.gone[i/64]&(1<<(i%64)) != 0
}

// planSegment reads the segment's records (opened, when encrypted) and
// decides each by K1 and K2.
func (l *Log) planSegment(seg *segment, keys map[keyHash]uint64, policy CompactPolicy) (segmentPlan, error) {
	next := seg.next()
	plan := segmentPlan{base: seg.base, gone: make([]uint64, (next-seg.base+63)/64)}
	r := l.NewReader(seg.base)
	defer r.Close()
	for {
		entry, err := r.Next()
		if errors.Is(err, io.EOF) {
			return plan, nil
		}
		if err != nil {
			return plan, err
		}
		if entry.Gap != nil {
			if entry.Gap.To >= next {
				return plan, nil
			}
			continue
		}
		if entry.Offset >= next {
			return plan, nil
		}
		key, tombstone, ok := record.Key(entry.Body)
		if !ok || len(key) == 0 {
			continue
		}
		latest, known := keys[hashKey(key)]
		switch {
		case entry.Offset >= policy.Floor:
			if tombstone && known && latest == entry.Offset {
				plan.tombstonesKept++
			}
		case known && latest > entry.Offset:
			plan.remove(entry.Offset)
			if tombstone {
				plan.tombstones++
			}
		case known && latest == entry.Offset && tombstone && policy.TombstoneExpired != nil &&
			policy.TombstoneExpired(seg.base, entry.Timestamp):
			plan.remove(entry.Offset)
			plan.tombstones++
		case known && latest == entry.Offset && tombstone:
			plan.tombstonesKept++
		}
	}
}

// compactWriter builds the image of a compacted segment in a file.
type compactWriter struct {
	file    vfs.File
	token   uint64
	durable uint64 // DurableNext of every commit frame: the segment's end
	pos     int64
	expect  uint64 // the next offset the new segment must account for

	batch      []byte
	batchFirst uint64
	batchCount uint32

	kept         uint64
	minTS, maxTS int64
}

// writeCompacted writes the compacted image of seg under a temporary name
// and syncs it; it returns the new segment, not yet in the set.
func (l *Log) writeCompacted(seg *segment, plan segmentPlan) (*segment, error) {
	token, err := l.opts.newToken()
	if err != nil {
		return nil, err
	}
	seg.mu.Lock()
	footer := seg.mu.footer
	holes := append([]hole(nil), seg.mu.holes...)
	data, err := seg.mappedLocked()
	seg.mu.Unlock()
	if err != nil {
		return nil, err
	}
	tmp := path.Join(l.path, seg.name+compactSuffix)
	_ = l.fs.Remove(tmp) // left by a compaction that failed
	file, err := l.fs.OpenFile(tmp, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("compaction: creating %s: %w", tmp, err)
	}
	w := &compactWriter{file: file, token: token, durable: footer.NextOffset, pos: format.SegmentDataStart,
		expect: seg.base, minTS: math.MaxInt64, maxTS: math.MinInt64}
	header := seg.header
	header.Token = token
	newFooter, err := w.write(data[:footer.DataEnd], holes, plan, footer, header)
	if err == nil {
		err = file.Sync()
	}
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = l.fs.Remove(tmp)
		return nil, fmt.Errorf("compaction: writing %s: %w", tmp, err)
	}
	replacement := newSegment(l.fs, l.path, seg.name, header)
	replacement.seal(newFooter)
	return replacement, nil
}

// write copies the kept frames of data (a sealed segment's frames) and
// covers every other offset with a skip frame, then writes the header
// and the footer.
func (w *compactWriter) write(data []byte, holes []hole, plan segmentPlan, old format.Footer, header format.SegmentHeader) (format.Footer, error) {
	for pos := int64(format.SegmentDataStart); pos+format.FramePrefixSize <= int64(len(data)); {
		if h, ok := holeAt(holes, pos); ok {
			if err := w.skip(h.First, h.Count, h.Reason); err != nil {
				return format.Footer{}, err
			}
			pos = h.End
			continue
		}
		var err error
		switch format.PeekKind(data[pos:]) {
		case format.KindRecord:
			var h record.FrameHeader
			if h, err = record.ParseFrameHeader(data[pos:], math.MaxUint32); err != nil {
				return format.Footer{}, err
			}
			frame := data[pos : pos+int64(h.FrameLength)]
			pos += int64(h.FrameLength)
			if h.Offset >= w.expect && !plan.removes(h.Offset) {
				err = w.keep(h, frame)
			}
		case format.KindCommit:
			pos += format.CommitFrameSize
		case format.KindSkip:
			var k format.Skip
			if k, err = format.DecodeSkip(data[pos:]); err == nil {
				err = w.skip(k.FirstLost, k.LostCount, Reason(k.ReasonCode))
				pos += int64(k.Length)
			}
		default:
			err = fmt.Errorf("unexpected bytes at %d of a validated segment", pos)
		}
		if err != nil {
			return format.Footer{}, err
		}
	}
	if err := w.skip(old.NextOffset, 0, ReasonCompacted); err != nil {
		return format.Footer{}, err
	}
	footer := format.Footer{Token: w.token, BaseOffset: old.BaseOffset, NextOffset: old.NextOffset,
		Count: w.kept, DataEnd: uint64(w.pos)}
	if w.kept > 0 {
		footer.MinTimestamp, footer.MaxTimestamp = w.minTS, w.maxTS
	}
	if _, err := w.file.WriteAt(format.AppendFooter(nil, footer), w.pos); err != nil {
		return footer, err
	}
	block := make([]byte, format.SegmentDataStart)
	format.AppendSegmentHeader(block[:0], header)
	_, err := w.file.WriteAt(block, 0)
	return footer, err
}

func holeAt(holes []hole, pos int64) (hole, bool) {
	for _, h := range holes {
		if h.Start == pos && h.End > pos {
			return h, true
		}
	}
	return hole{}, false
}

// keep adds a record frame to the batch, after a skip frame for the
// offsets removed before it.
func (w *compactWriter) keep(h record.FrameHeader, frame []byte) error {
	if h.Offset > w.expect {
		if err := w.skip(h.Offset, 0, ReasonCompacted); err != nil {
			return err
		}
	}
	if w.batchCount == 0 {
		w.batchFirst = h.Offset
	}
	w.batch = append(w.batch, frame...)
	w.batchCount++
	w.expect = h.Offset + 1
	w.kept++
	w.minTS, w.maxTS = min(w.minTS, h.Timestamp), max(w.maxTS, h.Timestamp)
	if len(w.batch) >= CompactBatchBytes {
		return w.flush()
	}
	return nil
}

// skip closes the batch and covers [w.expect, first) with a compacted
// skip frame, then, when count is not zero, [first, first+count) with one
// of reason (a gap the old segment already had).
func (w *compactWriter) skip(first, count uint64, reason Reason) error {
	if err := w.flush(); err != nil {
		return err
	}
	if first > w.expect {
		if err := w.writeSkip(w.expect, first-w.expect, ReasonCompacted); err != nil {
			return err
		}
	}
	if count == 0 {
		return nil
	}
	w.expect = max(w.expect, first+count)
	return w.writeSkip(first, count, reason)
}

func (w *compactWriter) writeSkip(first, count uint64, reason Reason) error {
	frame := format.AppendSkip(nil, format.Skip{Token: w.token, Length: format.SkipFrameSize,
		FirstLost: first, LostCount: count, ReasonCode: uint32(reason)})
	if _, err := w.file.WriteAt(frame, w.pos); err != nil {
		return err
	}
	w.pos += int64(len(frame))
	w.expect = max(w.expect, first+count)
	return nil
}

// flush writes the batch of kept records and its commit frame.
func (w *compactWriter) flush() error {
	if w.batchCount == 0 {
		return nil
	}
	commit := format.Commit{Token: w.token, FirstOffset: w.batchFirst, LastOffset: w.batchFirst + uint64(w.batchCount) - 1,
		Count: w.batchCount, BatchLength: uint32(len(w.batch)), BatchCRC: format.CRC(w.batch), DurableNext: w.durable}
	out := format.AppendCommit(w.batch, commit)
	if _, err := w.file.WriteAt(out, w.pos); err != nil {
		return err
	}
	w.pos += int64(len(out))
	w.batch, w.batchCount = w.batch[:0], 0
	return nil
}

// replaceSegment renames the compacted file over old's and swaps the new
// segment into the set, under the set's lock so retention cannot remove
// old meanwhile. false: old left the set first, and the new file is gone.
func (l *Log) replaceSegment(old, replacement *segment) (bool, error) {
	tmp := path.Join(l.path, old.name+compactSuffix)
	// old keeps serving readers that hold it through its open descriptor
	// and mapping: make sure it has them before its name points elsewhere.
	old.mu.Lock()
	_, err := old.mappedLocked()
	old.mu.Unlock()
	if err != nil {
		_ = l.fs.Remove(tmp)
		return false, err
	}
	l.setMu.Lock()
	defer l.setMu.Unlock()
	set := l.segments.Load()
	if _, i := set.find(old.base); i < 0 || set.segments[i] != old {
		_ = l.fs.Remove(tmp)
		return false, nil
	}
	old.replaced.Store(true)
	if err := l.fs.Rename(tmp, old.path); err != nil {
		old.replaced.Store(false)
		_ = l.fs.Remove(tmp)
		return false, fmt.Errorf("compaction: renaming %s: %w", tmp, err)
	}
	if err := l.fs.SyncDir(l.path); err != nil {
		// The rename may or may not be durable: after a crash the name
		// holds the old file or the new one, each a valid image of the
		// segment. The name holds the new one now: serve it.
		err = fmt.Errorf("compaction: syncing %s: %w", l.path, err)
	}
	segs := append([]*segment(nil), set.segments...)
	for i := range segs {
		if segs[i] == old {
			segs[i] = replacement
		}
	}
	l.segments.Store(&segmentSet{segments: segs})
	l.open.forget(old)
	old.release()
	return true, err
}
