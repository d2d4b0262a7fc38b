package client

import (
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// FuzzWalkRecords feeds the DeliverBatch walker arbitrary frames: it must
// return a typed error or records that verified, and never panic or read
// out of bounds.
func FuzzWalkRecords(f *testing.F) {
	body, _ := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: []byte("payload")})
	var frames []byte
	for offset := uint64(5); offset < 8; offset++ {
		frames = record.AppendFrame(frames, offset, 1_000, body, record.Checksum(body), record.BodyHash(body))
	}
	f.Add(uint64(5), uint64(8), uint32(3), frames)
	f.Add(uint64(5), uint64(8), uint32(2), frames)
	f.Add(uint64(0), uint64(1), uint32(1), frames[:20])
	f.Add(uint64(0), uint64(0), uint32(0), []byte{})
	// A commit frame between records, as the broker sends them.
	first := record.AppendFrame(nil, 5, 1_000, body, record.Checksum(body), record.BodyHash(body))
	f.Add(uint64(5), uint64(8), uint32(3), append(append(first, commitLikeFrame()...), frames[len(first):]...))
	f.Fuzz(func(t *testing.T, first, next uint64, count uint32, frames []byte) {
		records := 0
		err := walkRecords(wire.DeliverBatch{First: first, Next: next, Count: count, Frames: frames},
			func(h record.FrameHeader, frame []byte, err error) error {
				if err == nil {
					if frame == nil || h.Offset < first || h.Offset >= next {
						t.Fatalf("a verified record %d outside [%d, %d) or without its frame", h.Offset, first, next)
					}
					records++
				}
				return nil
			})
		if err == nil && uint32(records) > count {
			t.Fatalf("%d records accepted from a batch of %d", records, count)
		}
	})
}
