package consumer

import (
	"errors"
	"testing"
)

// FuzzDecodeRedrive: a redrive mark from disk decodes or fails with
// ErrCorruptCheckpoint, and what decodes re-encodes to the same bytes
// (the intent's targets are a map, so only its size is compared).
func FuzzDecodeRedrive(f *testing.F) {
	f.Add(encodeRedrive(redriveState{Mark: 7}))
	f.Add(encodeRedrive(redriveState{Mark: 7, Intent: &redriveIntent{To: 12, Targets: map[uint32]uint64{0: 40, 3: 9}}}))
	f.Add([]byte{redriveStateV1})
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeRedrive(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again := encodeRedrive(st)
		if len(again) != len(data) {
			t.Fatalf("decoded %x, re-encoded %x", data, again)
		}
	})
}

// FuzzDecodeDeadLetter: a queue record decodes as a dead letter or fails
// with ErrNotDeadLetter, never a panic.
func FuzzDecodeDeadLetter(f *testing.F) {
	letter, err := EncodeDeadLetter(DeadLetter{Group: "g", Stream: "orders", Partition: 2, Offset: 41, Attempts: 5,
		Reason: "max-deliver", Timestamp: 1_000, Body: []byte("not a body")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(letter)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := DecodeDeadLetter(body); err != nil && !errors.Is(err, ErrNotDeadLetter) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
