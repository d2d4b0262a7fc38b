package segment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// FuzzScanSegment builds a valid segment image from a layout word, damages
// it with the fuzzer's bytes and checks that scanSegment classifies every
// byte consistently: it never panics, every record it accepts is intact and
// in offset order, and the regions it reports tile the data it walked.
//
// The image comes from a generator rather than from raw fuzz bytes because
// every frame is checksummed: a mutation fuzzer alone never forms an intact
// commit frame, so it would never get past the first batch. The generator
// also writes CRC-valid frames that are semantically wrong (a record with
// the wrong offset, a commit frame with another token, batches written out
// of order), which only a broken writer or a torn, reordered write
// produces, and which no amount of bit flipping reaches.
//
// Identifiers here start with fuzzScan so they cannot collide with helpers
// in the package's other test files.

// fuzzScanToken is the segment token of every generated image. It is fixed,
// not random, so corpus entries that carry whole images stay meaningful
// from run to run.
const fuzzScanToken uint64 = 0x5ca77e57c0ffee01

// Layout word bit fields.
const (
	fuzzScanBatchBits   = 0      // bits 0-2: number of batches (0-7)
	fuzzScanBaseBits    = 3      // bits 3-5: base offset, an index into fuzzScanBases
	fuzzScanFooterBit   = 1 << 6 // seal the image with a footer
	fuzzScanLargeBit    = 1 << 7 // one record has a body of BodyHashThreshold or more
	fuzzScanFaultBits   = 8      // bits 8-19: one bit per fuzzScanFault
	fuzzScanMaxBodyBits = 20     // bits 20-21: index into fuzzScanMaxBodies
	fuzzScanTailBits    = 22     // bits 22-23: zero padding after the data
	fuzzScanSeedShift   = 24     // bits 24-63: seed for sizes, bodies and timestamps
)

// fuzzScanBases are the base offsets an image can have. MaxUint64-40 leaves
// room for every offset a generated image writes, so offsets never wrap.
var fuzzScanBases = [8]uint64{0, 1, 7, 1000, 1 << 32, 1 << 62, math.MaxUint64 - 40, 500}

var fuzzScanMaxBodies = [4]uint32{record.DefaultMaxBody, 64, record.BodyHashThreshold, 1}

// Faults the generator can write. Each is CRC-valid, so only the scanner's
// semantic checks can catch it.
const (
	fuzzScanFaultRecordOffset = iota // a record carries the next offset plus one
	fuzzScanFaultCommitToken         // a commit frame carries another segment's token
	fuzzScanFaultBatchCRC            // a commit frame's batch CRC is wrong
	fuzzScanFaultCommitCount         // a commit frame claims one record more than its batch holds
	fuzzScanFaultReorder             // two batches are written in swapped order
	fuzzScanFaultZeroGap             // a run of zeros between two batches
	fuzzScanFaultNoCommit            // the last batch has no commit frame (torn tail)
	fuzzScanFaultSkip                // a skip frame from an earlier recovery before a batch
	fuzzScanFaultDuplicate           // a batch is written twice
	fuzzScanFaultEmptyCommit         // a commit frame closing zero bytes
	fuzzScanFaultDurableHint         // commit frames claim later offsets durable
	fuzzScanFaultSkipMismatch        // a skip frame starting at the wrong offset
	fuzzScanFaultCount
)

// fuzzScanImage is a generated segment image and what its writer knew.
type fuzzScanImage struct {
	data     []byte
	base     uint64
	next     uint64 // one past the last offset written (records and skip frames)
	footerAt int    // position of the footer frame, or -1
	maxBody  uint32
}

// fuzzScanLayout is the layout word that drives buildFuzzScanImage.
type fuzzScanLayout uint64

// has reports whether the layout asks for a fault.
func (layout fuzzScanLayout) has(fault int) bool {
	return uint64(layout)>>(fuzzScanFaultBits+fault)&1 != 0
}

// buildFuzzScanImage writes the image a layout word describes.
func buildFuzzScanImage(word uint64) fuzzScanImage {
	layout := fuzzScanLayout(word)
	rng := rand.New(rand.NewPCG(word>>fuzzScanSeedShift, 0x5eed))
	img := fuzzScanImage{
		base:     fuzzScanBases[word>>fuzzScanBaseBits&7],
		footerAt: -1,
		maxBody:  fuzzScanMaxBodies[word>>fuzzScanMaxBodyBits&3],
	}
	data := format.AppendSegmentHeader(nil, format.SegmentHeader{Version: format.SegmentFormatVersion,
		StreamHash: format.StreamHash("fuzz"), BaseOffset: img.base, Token: fuzzScanToken})
	data = append(data, make([]byte, format.SegmentDataStart-len(data))...)

	next := img.base
	timestamp := int64(1_800_000_000_000_000_000)
	var batches [][]byte // each batch's records and commit frame, written at the end
	batchCount := int(word >> fuzzScanBatchBits & 7)
	faultBatch := rng.IntN(max(batchCount, 1)) // the batch the faults hit
	var records uint64
	for batch := range batchCount {
		faulty := batch == faultBatch
		var out []byte
		if layout.has(fuzzScanFaultSkip) && faulty || layout.has(fuzzScanFaultSkipMismatch) && faulty {
			garbage := rng.IntN(100)
			lost := uint64(rng.IntN(5))
			first := next
			if layout.has(fuzzScanFaultSkipMismatch) {
				first++
			}
			out = format.AppendSkip(out, format.Skip{Token: fuzzScanToken, Length: uint32(format.SkipFrameSize + garbage),
				FirstLost: first, LostCount: lost, ReasonCode: uint32(ReasonCorruptRecordBody)})
			for range garbage {
				out = append(out, byte(rng.Uint32()))
			}
			next += lost
		}
		first := next
		start := len(out)
		count := 1 + rng.IntN(4)
		for i := range count {
			size := rng.IntN(100)
			if layout&fuzzScanLargeBit != 0 && faulty && i == 0 {
				size = record.BodyHashThreshold + rng.IntN(64)
			}
			body := make([]byte, size)
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			offset := next
			if layout.has(fuzzScanFaultRecordOffset) && faulty && i == count-1 {
				offset++
			}
			// Wall time may step back: the index must still be exact.
			timestamp += int64(rng.IntN(2000)) - 500
			out = record.AppendFrame(out, offset, timestamp, body, record.Checksum(body), record.BodyHash(body))
			next++
		}
		records += uint64(count)
		recordBytes := out[start:]
		commit := format.Commit{Token: fuzzScanToken, FirstOffset: first, LastOffset: next - 1, Count: uint32(count),
			BatchLength: uint32(len(recordBytes)), BatchCRC: format.CRC(recordBytes), DurableNext: first}
		if faulty {
			switch {
			case layout.has(fuzzScanFaultCommitToken):
				commit.Token ^= 1
			case layout.has(fuzzScanFaultBatchCRC):
				commit.BatchCRC ^= 1
			case layout.has(fuzzScanFaultCommitCount):
				commit.Count++
				commit.LastOffset++
			case layout.has(fuzzScanFaultEmptyCommit):
				commit.BatchLength, commit.BatchCRC = 0, 0
			}
		}
		if layout.has(fuzzScanFaultDurableHint) {
			commit.DurableNext = next + uint64(rng.IntN(3))
		}
		if !(layout.has(fuzzScanFaultNoCommit) && batch == batchCount-1) {
			out = format.AppendCommit(out, commit)
		}
		if layout.has(fuzzScanFaultZeroGap) && faulty {
			out = append(out, make([]byte, 1+rng.IntN(200))...)
		}
		batches = append(batches, out)
		if layout.has(fuzzScanFaultDuplicate) && faulty {
			batches = append(batches, out)
		}
	}
	if layout.has(fuzzScanFaultReorder) && len(batches) >= 2 {
		i := rng.IntN(len(batches) - 1)
		batches[i], batches[i+1] = batches[i+1], batches[i]
	}
	for _, batch := range batches {
		data = append(data, batch...)
	}
	img.next = next
	if layout&fuzzScanFooterBit != 0 {
		img.footerAt = len(data)
		data = format.AppendFooter(data, format.Footer{Token: fuzzScanToken, BaseOffset: img.base,
			NextOffset: next, Count: records, DataEnd: uint64(len(data))})
	}
	tails := [4]int{0, 16, 512, 4096}
	img.data = append(data, make([]byte, tails[word>>fuzzScanTailBits&3])...)
	return img
}

// Ways the fuzzer's bytes damage the image.
const (
	fuzzScanModeNone     = iota // scan the image as written
	fuzzScanModeXOR             // XOR the patch onto the image
	fuzzScanModeOverlay         // overwrite the image with the patch (a misdirected write)
	fuzzScanModeInsert          // insert the patch (everything after shifts)
	fuzzScanModeTruncate        // cut the image (a torn write), then pad the header block
	fuzzScanModeData            // the patch is the data region after a valid header block
	fuzzScanModeImage           // the patch is the whole image
	fuzzScanModeCount
)

func fuzzScanMutate(img fuzzScanImage, patch []byte, at uint32, mode uint32) []byte {
	data := slices.Clone(img.data)
	// Only bytes from SegmentDataStart on are scanned; aim there.
	pos := format.SegmentDataStart + int(at%uint32(len(data)-format.SegmentDataStart+1))
	switch mode % fuzzScanModeCount {
	case fuzzScanModeXOR:
		for i := 0; i < len(patch) && pos+i < len(data); i++ {
			data[pos+i] ^= patch[i]
		}
	case fuzzScanModeOverlay:
		data = append(data[:pos], append(patch, data[min(pos+len(patch), len(data)):]...)...)
	case fuzzScanModeInsert:
		data = slices.Insert(data, pos, patch...)
	case fuzzScanModeTruncate:
		data = data[:pos]
	case fuzzScanModeData:
		data = append(data[:format.SegmentDataStart], patch...)
	case fuzzScanModeImage:
		data = slices.Clone(patch)
	}
	// scanSegment expects at least the header block: recovery never scans
	// a file shorter than that (it fails the header check first).
	if len(data) < format.SegmentDataStart {
		data = append(data, make([]byte, format.SegmentDataStart-len(data))...)
	}
	return data
}

func FuzzScanSegment(f *testing.F) {
	// Seeds: a clean image of each shape, each fault alone, and each
	// mutation mode, so the fuzzer starts from every path.
	const seedBits = 5 << fuzzScanSeedShift
	clean := uint64(4 | 1<<fuzzScanBaseBits | seedBits)
	f.Add(uint64(seedBits), []byte{}, uint32(0), uint32(fuzzScanModeNone))
	f.Add(clean, []byte{}, uint32(0), uint32(fuzzScanModeNone))
	f.Add(clean|fuzzScanFooterBit, []byte{}, uint32(0), uint32(fuzzScanModeNone))
	f.Add(clean|fuzzScanLargeBit|fuzzScanFooterBit, []byte{}, uint32(0), uint32(fuzzScanModeNone))
	f.Add(uint64(7|3<<fuzzScanBaseBits|1<<fuzzScanTailBits|seedBits), []byte{}, uint32(0), uint32(fuzzScanModeNone))
	for fault := range fuzzScanFaultCount {
		f.Add(clean|1<<(fuzzScanFaultBits+fault), []byte{}, uint32(0), uint32(fuzzScanModeNone))
		f.Add(clean|fuzzScanFooterBit|1<<(fuzzScanFaultBits+fault), []byte{}, uint32(0), uint32(fuzzScanModeNone))
	}
	f.Add(clean|1<<fuzzScanMaxBodyBits, []byte{}, uint32(0), uint32(fuzzScanModeNone)) // records over maxBody
	f.Add(clean, []byte{0x01}, uint32(40), uint32(fuzzScanModeXOR))
	f.Add(clean, []byte{0x80}, uint32(300), uint32(fuzzScanModeXOR))
	f.Add(clean|fuzzScanFooterBit, []byte("IR\x01\x00"), uint32(0), uint32(fuzzScanModeOverlay))
	f.Add(clean, []byte{0, 0, 0, 0}, uint32(100), uint32(fuzzScanModeInsert))
	f.Add(clean, []byte{}, uint32(150), uint32(fuzzScanModeTruncate))
	f.Add(clean, []byte("ICIRISIF"), uint32(0), uint32(fuzzScanModeData))
	f.Add(clean, []byte("IRONBSEG"), uint32(0), uint32(fuzzScanModeImage))
	f.Fuzz(func(t *testing.T, layout uint64, patch []byte, at uint32, mode uint32) {
		img := buildFuzzScanImage(layout)
		data := fuzzScanMutate(img, patch, at, mode)
		end := int64(len(data))
		fuzzScanCheck(t, "last segment", data, img, scanLimits{End: end, TornAllowed: true})
		fuzzScanCheck(t, "middle segment", data, img, scanLimits{End: end})
		sealedEnd := end
		if img.footerAt >= 0 && img.footerAt <= len(data) {
			sealedEnd = int64(img.footerAt)
		}
		fuzzScanCheck(t, "sealed", data, img, scanLimits{Sealed: true, End: sealedEnd, SealedNext: img.next})
	})
}

// fuzzScanRegion is a byte range a scan reports as not holding records: a
// damaged region or a hole left by a skip frame.
type fuzzScanRegion struct {
	start, end  int64
	first, lost uint64
	what        string
}

// fuzzScanCheck scans data and checks the result against the bytes.
func fuzzScanCheck(t *testing.T, label string, data []byte, img fuzzScanImage, limits scanLimits) {
	t.Helper()
	result := scanSegment(data, fuzzScanToken, img.base, img.maxBody, limits)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s scan (limits %+v, %d bytes, base %d): %s", label, limits, len(data), img.base, fmt.Sprintf(format, args...))
	}
	limit := min(limits.End, int64(len(data)))

	switch {
	case result.End < format.SegmentDataStart || result.End > limit:
		fail("End %d outside [%d, %d]", result.End, format.SegmentDataStart, limit)
	case result.NextOffset < img.base:
		fail("NextOffset %d below the base", result.NextOffset)
	case result.Records > result.NextOffset-img.base:
		fail("%d records in %d offsets", result.Records, result.NextOffset-img.base)
	case result.TooNew != nil && !errors.Is(result.TooNew, format.ErrTooNew) && !errors.Is(result.TooNew, record.ErrTooNew):
		fail("TooNew holds %v", result.TooNew)
	}

	regions := make([]fuzzScanRegion, 0, len(result.Damage)+len(result.Holes))
	for _, d := range result.Damage {
		// A sealed segment may lose offsets without bytes: its footer
		// promises offsets the intact data ends before.
		empty := limits.Sealed && d.Start == d.End && d.LostCount > 0
		if d.Start < format.SegmentDataStart || d.End > limit || (d.Start >= d.End && !empty) {
			fail("damage [%d, %d) outside the data or empty", d.Start, d.End)
		}
		regions = append(regions, fuzzScanRegion{d.Start, d.End, d.FirstLost, d.LostCount, "damage"})
	}
	for _, h := range result.Holes {
		if h.Start < format.SegmentDataStart || h.End > limit || h.End-h.Start < format.SkipFrameSize {
			fail("hole [%d, %d) outside the data or shorter than a skip frame", h.Start, h.End)
		}
		regions = append(regions, fuzzScanRegion{h.Start, h.End, h.First, h.Count, "hole"})
	}
	slices.SortFunc(regions, func(a, b fuzzScanRegion) int {
		if a.start != b.start {
			return int(a.start - b.start)
		}
		return int(a.end - b.end)
	})

	if torn := result.Torn; torn != nil {
		if limits.Sealed {
			fail("a sealed segment reported a torn tail")
		}
		if torn.Start < result.End || torn.Start >= torn.End || torn.End > limit {
			fail("torn tail [%d, %d) with End %d", torn.Start, torn.End, result.End)
		}
	}
	if footer := result.Footer; footer != nil {
		at := int64(footer.DataEnd)
		if footer.Token != fuzzScanToken || at < format.SegmentDataStart || at > int64(len(data))-format.FooterFrameSize {
			fail("footer %+v accepted", footer)
		}
		if decoded, err := format.DecodeFooter(data[at:]); err != nil || decoded != *footer {
			fail("the footer reported does not decode at its data end %d: %v", at, err)
		}
		// A footer is written only after the records before it were
		// synced, so in an unsealed scan it vouches for them: the intact
		// data must end exactly at it, and nothing before it can be a
		// torn tail. (A sealed scan stops at its limit, the real
		// footer, so any footer it meets is out of place and the bytes
		// after it are damage.)
		if !limits.Sealed && (at != result.End || result.Torn != nil) {
			fail("footer at %d accepted, but End = %d and torn tail = %+v", at, result.End, result.Torn)
		}
	}

	for i, entry := range result.Index {
		if entry.Position < format.SegmentDataStart || entry.Position >= result.End {
			fail("index entry %d at %d outside the accepted data", i, entry.Position)
		}
		if i > 0 && (entry.Offset <= result.Index[i-1].Offset || entry.Position <= result.Index[i-1].Position) {
			fail("index entries %d and %d out of order: %+v, %+v", i-1, i, result.Index[i-1], entry)
		}
	}

	// Walk the accepted bytes again with the plain decoders: every frame
	// in [SegmentDataStart, End) outside the reported regions must be an
	// intact record or commit frame, in offset order, and the totals must
	// match what the scan reported.
	pos := int64(format.SegmentDataStart)
	expect := img.base
	var records uint64
	var firstOffset uint64
	minTimestamp, maxTimestamp := int64(math.MaxInt64), int64(math.MinInt64)
	priorMax := int64(math.MinInt64)
	nextRegion, nextIndex := 0, 0
	for {
		for nextRegion < len(regions) && regions[nextRegion].start == pos {
			region := regions[nextRegion]
			if region.first != expect {
				fail("%s [%d, %d) starts at offset %d, the walk expects %d", region.what, region.start, region.end, region.first, expect)
			}
			expect = region.first + region.lost
			pos = region.end
			nextRegion++
		}
		if nextRegion < len(regions) && regions[nextRegion].start < pos {
			fail("%s [%d, %d) overlaps what precedes it (at %d)", regions[nextRegion].what, regions[nextRegion].start, regions[nextRegion].end, pos)
		}
		if pos >= result.End {
			break
		}
		switch kind := format.PeekKind(data[pos:result.End]); kind {
		case format.KindRecord:
			header, _, err := record.ParseFrame(data[pos:result.End], img.maxBody)
			if err != nil {
				fail("accepted record at %d does not decode: %v", pos, err)
			}
			if header.Offset != expect {
				fail("accepted record at %d carries offset %d, expected %d", pos, header.Offset, expect)
			}
			if nextIndex < len(result.Index) && result.Index[nextIndex].Position == pos {
				entry := result.Index[nextIndex]
				if entry.Offset != header.Offset || entry.PriorMaxTimestamp != priorMax {
					fail("index entry %+v for record %d whose prior maximum timestamp is %d", entry, header.Offset, priorMax)
				}
				nextIndex++
			}
			if records == 0 {
				firstOffset = header.Offset
			}
			records++
			minTimestamp = min(minTimestamp, header.Timestamp)
			maxTimestamp = max(maxTimestamp, header.Timestamp)
			priorMax = max(priorMax, header.Timestamp)
			expect++
			pos += int64(header.FrameLength)
		case format.KindCommit:
			commit, err := format.DecodeCommit(data[pos:result.End])
			if err != nil || commit.Token != fuzzScanToken {
				fail("accepted commit frame at %d: %+v, %v", pos, commit, err)
			}
			pos += format.CommitFrameSize
		case format.KindControl:
			control, err := format.DecodeControl(data[pos:result.End], img.maxBody)
			if err != nil || control.Token != fuzzScanToken {
				fail("accepted control frame at %d: %v", pos, err)
			}
			pos += int64(format.ControlFrameSize(len(control.Payload)))
		default:
			fail("accepted data at %d holds a %v frame", pos, kind)
		}
		if nextIndex < len(result.Index) && result.Index[nextIndex].Position < pos {
			fail("index entry %+v does not point at an accepted record", result.Index[nextIndex])
		}
	}
	switch {
	case pos != result.End:
		fail("the accepted frames end at %d, past End %d", pos, result.End)
	case nextRegion != len(regions):
		fail("%s [%d, %d) lies past End %d", regions[nextRegion].what, regions[nextRegion].start, regions[nextRegion].end, result.End)
	case nextIndex != len(result.Index):
		fail("index entry %+v does not point at an accepted record", result.Index[nextIndex])
	case records != result.Records:
		fail("the walk finds %d records, the scan reports %d", records, result.Records)
	case expect != result.NextOffset:
		fail("the walk ends at offset %d, the scan reports NextOffset %d", expect, result.NextOffset)
	case records > 0 && (firstOffset != result.FirstOffset || minTimestamp != result.MinTimestamp || maxTimestamp != result.MaxTimestamp):
		fail("first offset %d, timestamps [%d, %d]; the scan reports %d, [%d, %d]",
			firstOffset, minTimestamp, maxTimestamp, result.FirstOffset, result.MinTimestamp, result.MaxTimestamp)
	}
}

// TestScanFormatFooterVouchesForDataBeforeIt is the minimal form of a
// FuzzScanSegment failure (seed 7dfd77297e6fce23). A segment whose footer
// was written but whose cut to size did not finish is scanned as the last
// segment of a log (TornAllowed). Its first batch is damaged and the second
// batch's DurableNext hint does not prove the first durable, so finish
// reclassifies the damage as a torn tail and rolls End back to the damage,
// but keeps the footer. The result then says "sealed at DataEnd" and "intact
// data ends at End" at once: recovery (scanFile) takes the footer, sets
// cutAt = End + FooterFrameSize and cuts the file inside the data, and the
// second batch, which the footer vouches was synced, is dropped as an
// unacknowledged torn tail rather than reported as kept or lost.
func TestScanFormatFooterVouchesForDataBeforeIt(t *testing.T) {
	data := format.AppendSegmentHeader(nil, format.SegmentHeader{Version: format.SegmentFormatVersion, Token: fuzzScanToken})
	data = append(data, make([]byte, format.SegmentDataStart-len(data))...)
	writeBatch := func(offset, durableNext uint64) {
		start := len(data)
		body := []byte("body")
		data = record.AppendFrame(data, offset, 1, body, record.Checksum(body), 0)
		batch := data[start:]
		data = format.AppendCommit(data, format.Commit{Token: fuzzScanToken, FirstOffset: offset, LastOffset: offset,
			Count: 1, BatchLength: uint32(len(batch)), BatchCRC: format.CRC(batch), DurableNext: durableNext})
	}
	writeBatch(0, 0)
	writeBatch(1, 0) // written before the first batch's sync finished: the hint proves nothing
	footerAt := len(data)
	data = format.AppendFooter(data, format.Footer{Token: fuzzScanToken, BaseOffset: 0, NextOffset: 2, Count: 2,
		DataEnd: uint64(footerAt)})
	data = append(data, make([]byte, format.SegmentDataStart)...) // preallocated space the cut did not remove
	data[format.SegmentDataStart+record.FrameHeaderSize] ^= 0xff  // bit rot in the first record's body

	result := scanSegment(data, fuzzScanToken, 0, record.DefaultMaxBody, scanLimits{End: int64(len(data)), TornAllowed: true})
	if result.Footer == nil {
		t.Fatal("the footer was not found")
	}
	if result.End != int64(result.Footer.DataEnd) || result.Torn != nil {
		t.Fatalf("footer at %d accepted, but End = %d and torn tail = %+v: the footer proves the bytes before it were synced, so damage there is loss, not a torn tail",
			result.Footer.DataEnd, result.End, result.Torn)
	}
}
