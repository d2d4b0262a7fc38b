package segment

import (
	"math/rand/v2"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// Layout word of a replicated segment image: batches of records and
// control batches (a control frame closed by a commit frame of no
// records), with CRC-valid faults only the scanner's semantic checks
// catch.
const (
	fuzzRaftBatchBits = 0      // bits 0-2: batches (1-8)
	fuzzRaftFaultBits = 3      // bits 3-8: one bit per fuzzRaftFault
	fuzzRaftFooterBit = 1 << 9 // seal the image with a footer
	fuzzRaftBaseBits  = 10     // bits 10-12: index into fuzzScanBases
	fuzzRaftSeedShift = 16     // bits 16-63: seed for kinds, sizes and bodies
)

// Faults of a replicated segment image.
const (
	fuzzRaftFaultRecord   = iota // a record between a control frame and its commit frame
	fuzzRaftFaultCount1          // a control frame's commit frame claims a record
	fuzzRaftFaultToken           // a control frame carries another segment's token
	fuzzRaftFaultPayload         // a control frame's payload checksum is wrong
	fuzzRaftFaultNoCommit        // the last batch has no commit frame
	fuzzRaftFaultReorder         // two batches are written in swapped order
)

func (layout fuzzScanLayout) hasRaft(fault int) bool {
	return uint64(layout)>>(fuzzRaftFaultBits+fault)&1 != 0
}

// buildFuzzRaftImage writes the replicated segment image a layout word
// describes.
func buildFuzzRaftImage(word uint64) fuzzScanImage {
	layout := fuzzScanLayout(word)
	rng := rand.New(rand.NewPCG(word>>fuzzRaftSeedShift, 0xc0))
	img := fuzzScanImage{base: fuzzScanBases[word>>fuzzRaftBaseBits&7], footerAt: -1, maxBody: record.DefaultMaxBody}
	data := format.AppendSegmentHeader(nil, format.SegmentHeader{Version: format.SegmentFormatVersion,
		StreamHash: format.StreamHash("fuzz"), BaseOffset: img.base, Token: fuzzScanToken})
	data = append(data, make([]byte, format.SegmentDataStart-len(data))...)
	next, index := img.base, uint64(1)
	var batches [][]byte
	var records uint64
	count := 1 + int(word>>fuzzRaftBatchBits&7)
	faulty := rng.IntN(count)
	for batch := range count {
		var out []byte
		commit := format.Commit{Token: fuzzScanToken, FirstOffset: next, LastOffset: next, Term: 1 + index/3, Index: index,
			DurableNext: next}
		if rng.IntN(3) == 0 {
			payload := make([]byte, rng.IntN(200))
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			token := fuzzScanToken
			if layout.hasRaft(fuzzRaftFaultToken) && batch == faulty {
				token ^= 1
			}
			out = format.AppendControl(out, format.Control{Token: token, Type: uint8(rng.IntN(2)), Payload: payload})
			if layout.hasRaft(fuzzRaftFaultPayload) && batch == faulty && len(payload) > 0 {
				out[len(out)-1] ^= 1
			}
			if layout.hasRaft(fuzzRaftFaultRecord) && batch == faulty {
				body := []byte("stray")
				out = record.AppendFrame(out, next, 1, body, record.Checksum(body), 0)
			}
			if layout.hasRaft(fuzzRaftFaultCount1) && batch == faulty {
				commit.Count = 1
			}
		} else {
			n := 1 + rng.IntN(3)
			for range n {
				body := make([]byte, rng.IntN(100))
				for i := range body {
					body[i] = byte(rng.Uint32())
				}
				out = record.AppendFrame(out, next, int64(next), body, record.Checksum(body), 0)
				next++
			}
			records += uint64(n)
			commit.LastOffset, commit.Count = next-1, uint32(n)
		}
		commit.BatchLength, commit.BatchCRC = uint32(len(out)), format.CRC(out)
		if !(layout.hasRaft(fuzzRaftFaultNoCommit) && batch == count-1) {
			out = format.AppendCommit(out, commit)
		}
		batches = append(batches, out)
		index++
	}
	if layout.hasRaft(fuzzRaftFaultReorder) && len(batches) >= 2 {
		i := rng.IntN(len(batches) - 1)
		batches[i], batches[i+1] = batches[i+1], batches[i]
	}
	for _, batch := range batches {
		data = append(data, batch...)
	}
	img.next = next
	if layout&fuzzRaftFooterBit != 0 {
		img.footerAt = len(data)
		data = format.AppendFooter(data, format.Footer{Token: fuzzScanToken, BaseOffset: img.base,
			NextOffset: next, Count: records, DataEnd: uint64(len(data))})
	}
	img.data = append(data, make([]byte, 64)...)
	return img
}

// FuzzScanRaftSegment is FuzzScanSegment over replicated segment images:
// control batches among the record batches. The scanner keeps what it
// accepts walkable with the plain decoders, control frames included.
func FuzzScanRaftSegment(f *testing.F) {
	for _, word := range []uint64{7, 7 | fuzzRaftFooterBit, 5 | 1<<40} {
		f.Add(word, []byte{}, uint32(0), uint32(fuzzScanModeNone))
		for fault := range fuzzRaftFaultReorder + 1 {
			f.Add(word|1<<(fuzzRaftFaultBits+fault), []byte{}, uint32(0), uint32(fuzzScanModeNone))
		}
	}
	f.Add(uint64(7), []byte{0x01}, uint32(40), uint32(fuzzScanModeXOR))
	f.Add(uint64(7), []byte("IK\x01\x00"), uint32(0), uint32(fuzzScanModeOverlay))
	f.Add(uint64(7), []byte{}, uint32(120), uint32(fuzzScanModeTruncate))
	f.Fuzz(func(t *testing.T, layout uint64, patch []byte, at uint32, mode uint32) {
		img := buildFuzzRaftImage(layout)
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
