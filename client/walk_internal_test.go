package client

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// commitLikeFrame is an 80-byte stored frame that is not a record, the way
// a commit frame closing a producer batch sits between record frames in a
// DeliverBatch. The client steps over it by its prefix and reads nothing
// else of it.
func commitLikeFrame() []byte {
	frame := make([]byte, 80)
	copy(frame, "IC\x01\x00")
	binary.LittleEndian.PutUint32(frame[4:8], 80)
	return frame
}

func TestWalkRecordsStepsOverOtherFrames(t *testing.T) {
	body, err := record.AppendBody(nil, record.Body{Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	frameAt := func(offset uint64) []byte {
		return record.AppendFrame(nil, offset, 1, body, record.Checksum(body), record.BodyHash(body))
	}
	var frames []byte
	frames = append(frames, frameAt(3)...)
	frames = append(frames, commitLikeFrame()...)
	frames = append(frames, frameAt(4)...)
	frames = append(frames, commitLikeFrame()...)

	var offsets []uint64
	err = walkRecords(wire.DeliverBatch{First: 3, Next: 5, Count: 2, Frames: frames}, func(h record.FrameHeader, frame []byte, err error) error {
		if err != nil || frame == nil {
			t.Fatalf("offset %d: %v", h.Offset, err)
		}
		offsets = append(offsets, h.Offset)
		return nil
	})
	if err != nil || len(offsets) != 2 || offsets[0] != 3 || offsets[1] != 4 {
		t.Fatalf("walked %v: %v", offsets, err)
	}

	broken := map[string][]byte{
		"other frame cut short":        append(frameAt(3), commitLikeFrame()[:79]...),
		"zero bytes between records":   append(frameAt(3), make([]byte, 80)...),
		"other frame under its prefix": append(frameAt(3), "IC\x01\x00\x04\x00\x00\x00"...),
	}
	for name, frames := range broken {
		err := walkRecords(wire.DeliverBatch{First: 3, Next: 4, Count: 1, Frames: frames}, func(record.FrameHeader, []byte, error) error { return nil })
		var corrupt *CorruptBatchError
		if !errors.As(err, &corrupt) {
			t.Errorf("%s: %v, want a *CorruptBatchError", name, err)
		}
	}
}
