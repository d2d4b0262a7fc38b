package wire_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Regression tests for codec bugs found while writing the fuzz targets and
// docs/WIRE.md. Each states the contract; they fail until the codec is
// fixed (the 32-bit one only on 32-bit platforms), and then keep it fixed.
// TestDecodeAckDoesNotAllocateWithRoomForEntries and
// TestHotPathDecodersDoNotAllocate (decode_alloc_test.go) belong with them.

// An Error body whose flags byte has bits other than retryable and closes
// set must not decode to a message that re-encodes differently: either the
// decoder refuses the reserved bits, or it keeps them. Today it drops them,
// so the body is accepted but not canonical (found by FuzzDecodeMessages in
// 0.1 s; the minimized input is
// testdata/fuzz/FuzzDecodeMessages/error-unknown-flag-bits).
func TestDecodeErrorReservedFlagBitsAreNotDropped(t *testing.T) {
	body := (&wire.Error{Code: wire.CodeBusy, Retryable: true, Message: "window full"}).AppendBody(nil)
	const flagsAt = 2
	for bit := 2; bit < 8; bit++ {
		withReserved := append([]byte(nil), body...)
		withReserved[flagsAt] |= 1 << bit
		decoded, err := wire.DecodeError(withReserved)
		if errors.Is(err, wire.ErrMalformed) {
			continue // refusing reserved bits is one correct answer
		}
		if err != nil {
			t.Fatalf("flag bit %d: error of no known class: %v", bit, err)
		}
		if again := decoded.AppendBody(nil); again[flagsAt] != withReserved[flagsAt] {
			t.Errorf("flag bit %d: flags byte %#02x decoded and re-encoded as %#02x: the bit was silently dropped", bit, withReserved[flagsAt], again[flagsAt])
		}
	}
}

// A negative retry-after (a deadline already past, say) means "no wait";
// the encoder clamps the top of the u32 but not the bottom, so -1 s goes on
// the wire as 4294966296 ms and tells the client to wait 49.7 days.
func TestErrorNegativeRetryAfterIsNoHint(t *testing.T) {
	sent := &wire.Error{Code: wire.CodeBusy, Retryable: true, RetryAfter: -time.Second, Message: "busy"}
	received, err := wire.DecodeError(sent.AppendBody(nil))
	if err != nil {
		t.Fatal(err)
	}
	if received.RetryAfter != 0 {
		t.Fatalf("RetryAfter %v was sent as %v", sent.RetryAfter, received.RetryAfter)
	}
}

// ParseFrame computes the frame's size as int(length)+4. With a limit of
// 2^31-4 or more (math.MaxUint32 is the natural "no limit"), a 32-bit int
// overflows, the bounds check passes and the slice expression panics on a
// 9-byte hostile input. 64-bit platforms are not affected; run
// GOARCH=386 go test -run TestParseFrameHugeLengthOnEveryPlatform ./wire
// to see it fail.
func TestParseFrameHugeLengthOnEveryPlatform(t *testing.T) {
	for _, length := range []uint32{math.MaxInt32 - 3, math.MaxInt32, math.MaxUint32} {
		header := []byte{byte(length), byte(length >> 8), byte(length >> 16), byte(length >> 24), byte(wire.TypePing), 1, 0, 0, 0}
		_, n, err := wire.ParseFrame(header, math.MaxUint32)
		if !errors.Is(err, wire.ErrIncomplete) && !errors.Is(err, wire.ErrFrameTooLarge) {
			t.Errorf("length %d: %v (needs %d), want incomplete or too large", length, err, n)
		}
	}
}
