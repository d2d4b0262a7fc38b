package codectest

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// NewRand is a seeded source: the same seed gives the same inputs, so a
// failure replays.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x5eed_1b05))
}

// RandomBytes returns n bytes from rng.
func RandomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// EdgyUint64 returns an edge value (zero, one, the 32- and 64-bit
// limits and their neighbours) about half the time, else a random one of
// random width: off-by-one and sign bugs live at the edges.
func EdgyUint64(rng *rand.Rand) uint64 {
	edges := []uint64{0, 1, 2, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MaxUint64 - 1, math.MaxUint64}
	if rng.IntN(2) == 0 {
		return edges[rng.IntN(len(edges))]
	}
	return rng.Uint64() >> rng.IntN(64)
}

// EdgyUint32 is EdgyUint64 cut to 32 bits.
func EdgyUint32(rng *rand.Rand) uint32 { return uint32(EdgyUint64(rng)) }

// PrefixLengths returns the prefix lengths to try for an input of length
// total: every one for short inputs, else the first bytes, the
// neighbourhood of each interesting length (a frame end, a header end) and
// an even sample. Decoding a long input at every prefix would hash
// megabytes per input and starve the fuzzer.
func PrefixLengths(total int, interesting ...int) []int {
	if total <= 256 {
		lengths := make([]int, total)
		for i := range lengths {
			lengths[i] = i
		}
		return lengths
	}
	lengths := []int{0, 1, 2, 7, 8, 9}
	for _, at := range interesting {
		for n := at - 2; n <= at+2; n++ {
			if n > 9 && n < total {
				lengths = append(lengths, n)
			}
		}
	}
	for i := 1; i < 8; i++ {
		lengths = append(lengths, total*i/8)
	}
	return append(lengths, total-1)
}

// RequireKnownError fails unless err wraps one of known, the error
// classes the decoder documents: anything else means it let an error
// through unwrapped.
func RequireKnownError(t testing.TB, err error, what string, known ...error) {
	t.Helper()
	for _, class := range known {
		if errors.Is(err, class) {
			return
		}
	}
	t.Fatalf("%s: error %v wraps none of the documented error classes %v", what, err, known)
}

// RequireErrorIs fails unless err wraps want.
func RequireErrorIs(t testing.TB, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want one wrapping %v", what, err, want)
	}
}

// SizeName names a benchmark's input size: 256B, 4KiB, 1MiB.
func SizeName(size int) string {
	switch {
	case size >= 1<<20:
		return strconv.Itoa(size>>20) + "MiB"
	case size >= 1024:
		return strconv.Itoa(size>>10) + "KiB"
	}
	return strconv.Itoa(size) + "B"
}
