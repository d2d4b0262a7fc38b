package record_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ironbus/ironbus/record"
)

// The tests live in an external package so they exercise the codec only
// through the API its callers use.

var littleEndian = binary.LittleEndian

// Byte offsets of fields the tests edit. They restate the layout in
// docs/FORMAT.md on purpose: if an encoder moves a field, these tests must
// fail.
const (
	versionByte = 2 // frame version, in the frame prefix
	flagsByte   = 3 // frame flags, in the frame prefix

	frameHeaderCRCAt  = 32 // CRC32C of frame header bytes [0:32)
	frameBodyLengthAt = 24
	frameBodyCRCAt    = 28
	frameLengthAt     = 4

	bodyFlagsAt = 2 // u16 body flags
)

// resealFrameHeader recomputes a record frame's header checksum after an
// edit, so the edit reaches the checks behind it.
func resealFrameHeader(frame []byte) {
	littleEndian.PutUint32(frame[frameHeaderCRCAt:], record.Checksum(frame[:frameHeaderCRCAt]))
}

// newTestRand returns a deterministic generator, so a failure replays.
func newTestRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x5eed_1b05))
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// requireErrorIs fails unless err wraps want.
func requireErrorIs(t testing.TB, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want one wrapping %v", what, err, want)
	}
}
