package format_test

import (
	"math"
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/segment/format"
)

// Property tests: random values from a fixed seed must survive encode and
// decode unchanged. The values lean towards the edges (zero, one, the
// maximum) where off-by-one and sign bugs live. A fixed seed keeps failures
// replayable; the fuzz targets cover the search for new inputs.

const propertyRounds = 300

func TestRoundTripFixedFramesProperty(t *testing.T) {
	rng := codectest.NewRand(102)
	for round := range propertyRounds {
		first := codectest.EdgyUint64(rng)
		count := max(1, codectest.EdgyUint32(rng))
		if first > math.MaxUint64-uint64(count-1) {
			first = math.MaxUint64 - uint64(count-1) // keep the range from wrapping
		}
		commit := format.Commit{Token: codectest.EdgyUint64(rng), FirstOffset: first, LastOffset: first + uint64(count-1), Count: count,
			BatchLength: codectest.EdgyUint32(rng), BatchCRC: rng.Uint32(), DurableNext: codectest.EdgyUint64(rng),
			Term: codectest.EdgyUint64(rng), Index: codectest.EdgyUint64(rng)}
		if got, err := format.DecodeCommit(format.AppendCommit(nil, commit)); err != nil || got != commit {
			t.Fatalf("round %d: commit %+v: %+v, %v", round, commit, got, err)
		}

		base := codectest.EdgyUint64(rng)
		span := min(codectest.EdgyUint64(rng), math.MaxUint64-base) // keep NextOffset from wrapping
		records := codectest.EdgyUint64(rng)
		if span < math.MaxUint64 {
			records %= span + 1 // a footer never holds more records than offsets
		}
		footer := format.Footer{Token: codectest.EdgyUint64(rng), BaseOffset: base, NextOffset: base + span, Count: records,
			DataEnd:      max(format.SegmentDataStart, codectest.EdgyUint64(rng)),
			MinTimestamp: int64(codectest.EdgyUint64(rng)), MaxTimestamp: int64(codectest.EdgyUint64(rng))}
		if got, err := format.DecodeFooter(format.AppendFooter(nil, footer)); err != nil || got != footer {
			t.Fatalf("round %d: footer %+v: %+v, %v", round, footer, got, err)
		}

		skip := format.Skip{Token: codectest.EdgyUint64(rng), Length: max(format.SkipFrameSize, codectest.EdgyUint32(rng)),
			FirstLost: codectest.EdgyUint64(rng), LostCount: codectest.EdgyUint64(rng), ReasonCode: codectest.EdgyUint32(rng)}
		if got, err := format.DecodeSkip(format.AppendSkip(nil, skip)); err != nil || got != skip {
			t.Fatalf("round %d: skip %+v: %+v, %v", round, skip, got, err)
		}

		header := format.SegmentHeader{Version: format.SegmentFormatVersion, StreamHash: codectest.EdgyUint64(rng),
			Partition: codectest.EdgyUint32(rng), BaseOffset: codectest.EdgyUint64(rng), CreatedUnix: int64(codectest.EdgyUint64(rng)), Token: codectest.EdgyUint64(rng)}
		if got, err := format.DecodeSegmentHeader(format.AppendSegmentHeader(nil, header)); err != nil || got != header {
			t.Fatalf("round %d: segment header %+v: %+v, %v", round, header, got, err)
		}
	}
}

// TestFormatRandomBytesNeverPanic throws short random buffers, and random
// buffers behind each valid magic, at every decoder. The fuzz targets do
// this at scale; this keeps a cheap version in every `go test` run.
func TestFormatRandomBytesNeverPanic(t *testing.T) {
	rng := codectest.NewRand(103)
	magics := [][]byte{nil, []byte("IR"), []byte("IC"), []byte("IF"), []byte("IS"), []byte("IRONBSEG")}
	for range 2000 {
		input := append(append([]byte(nil), magics[rng.IntN(len(magics))]...), codectest.RandomBytes(rng, rng.IntN(120))...)
		for _, decode := range []func([]byte) ([]byte, error){decodeCommitAgain, decodeFooterAgain, decodeSkipAgain, decodeSegmentHeaderAgain} {
			if _, err := decode(input); err == nil {
				t.Fatalf("random bytes decoded as a fixed frame: %x", input)
			}
		}
		format.PeekKind(input)
		format.IsZero(input)
	}
}
