package format_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ironbus/ironbus/segment/format"
)

// Property tests: random values from a fixed seed must survive encode and
// decode unchanged. The values lean towards the edges (zero, one, the
// maximum) where off-by-one and sign bugs live. A fixed seed keeps failures
// replayable; the fuzz targets cover the search for new inputs.

const propertyRounds = 300

// edgyUint64 returns an edge value about half the time, else a random one.
func edgyUint64(rng *rand.Rand) uint64 {
	edges := []uint64{0, 1, 2, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MaxUint64 - 1, math.MaxUint64}
	if rng.IntN(2) == 0 {
		return edges[rng.IntN(len(edges))]
	}
	return rng.Uint64() >> rng.IntN(64)
}

func edgyUint32(rng *rand.Rand) uint32 { return uint32(edgyUint64(rng)) }

func TestRoundTripFixedFramesProperty(t *testing.T) {
	rng := newTestRand(102)
	for round := range propertyRounds {
		first := edgyUint64(rng)
		count := max(1, edgyUint32(rng))
		if first > math.MaxUint64-uint64(count-1) {
			first = math.MaxUint64 - uint64(count-1) // keep the range from wrapping
		}
		commit := format.Commit{Token: edgyUint64(rng), FirstOffset: first, LastOffset: first + uint64(count-1), Count: count,
			BatchLength: edgyUint32(rng), BatchCRC: rng.Uint32(), DurableNext: edgyUint64(rng),
			Term: edgyUint64(rng), Index: edgyUint64(rng)}
		if got, err := format.DecodeCommit(format.AppendCommit(nil, commit)); err != nil || got != commit {
			t.Fatalf("round %d: commit %+v: %+v, %v", round, commit, got, err)
		}

		base := edgyUint64(rng)
		span := min(edgyUint64(rng), math.MaxUint64-base) // keep NextOffset from wrapping
		records := edgyUint64(rng)
		if span < math.MaxUint64 {
			records %= span + 1 // a footer never holds more records than offsets
		}
		footer := format.Footer{Token: edgyUint64(rng), BaseOffset: base, NextOffset: base + span, Count: records,
			DataEnd:      max(format.SegmentDataStart, edgyUint64(rng)),
			MinTimestamp: int64(edgyUint64(rng)), MaxTimestamp: int64(edgyUint64(rng))}
		if got, err := format.DecodeFooter(format.AppendFooter(nil, footer)); err != nil || got != footer {
			t.Fatalf("round %d: footer %+v: %+v, %v", round, footer, got, err)
		}

		skip := format.Skip{Token: edgyUint64(rng), Length: max(format.SkipFrameSize, edgyUint32(rng)),
			FirstLost: edgyUint64(rng), LostCount: edgyUint64(rng), ReasonCode: edgyUint32(rng)}
		if got, err := format.DecodeSkip(format.AppendSkip(nil, skip)); err != nil || got != skip {
			t.Fatalf("round %d: skip %+v: %+v, %v", round, skip, got, err)
		}

		header := format.SegmentHeader{Version: format.SegmentFormatVersion, StreamHash: edgyUint64(rng),
			Partition: edgyUint32(rng), BaseOffset: edgyUint64(rng), CreatedUnix: int64(edgyUint64(rng)), Token: edgyUint64(rng)}
		if got, err := format.DecodeSegmentHeader(format.AppendSegmentHeader(nil, header)); err != nil || got != header {
			t.Fatalf("round %d: segment header %+v: %+v, %v", round, header, got, err)
		}
	}
}

// TestFormatRandomBytesNeverPanic throws short random buffers, and random
// buffers behind each valid magic, at every decoder. The fuzz targets do
// this at scale; this keeps a cheap version in every `go test` run.
func TestFormatRandomBytesNeverPanic(t *testing.T) {
	rng := newTestRand(103)
	magics := [][]byte{nil, []byte("IR"), []byte("IC"), []byte("IF"), []byte("IS"), []byte("IRONBSEG")}
	for range 2000 {
		input := append(append([]byte(nil), magics[rng.IntN(len(magics))]...), randomBytes(rng, rng.IntN(120))...)
		for _, decode := range []func([]byte) ([]byte, error){decodeCommitAgain, decodeFooterAgain, decodeSkipAgain, decodeSegmentHeaderAgain} {
			if _, err := decode(input); err == nil {
				t.Fatalf("random bytes decoded as a fixed frame: %x", input)
			}
		}
		format.PeekKind(input)
		format.IsZero(input)
	}
}
