package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment/format"
)

// FuzzDecodeCheckpoint: a checkpoint file decodes to its data, or fails
// with ErrCorruptCheckpoint or ErrTooNew; never a panic, and what decodes
// is exactly the bytes between the header and the checksum.
func FuzzDecodeCheckpoint(f *testing.F) {
	image := func(version uint16, data []byte) []byte {
		b := append([]byte{}, checkpointMagic[:]...)
		b = binary.LittleEndian.AppendUint16(b, version)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
		return binary.LittleEndian.AppendUint32(b, format.CRC(b))
	}
	f.Add(image(checkpointVersion, []byte("cursor state")))
	f.Add(image(checkpointVersion, nil))
	f.Add(image(checkpointVersion+1, []byte("from the future")))
	f.Add([]byte("IBCK"))
	f.Fuzz(func(t *testing.T, file []byte) {
		data, err := decodeCheckpoint(file, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrTooNew) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !bytes.Equal(data, file[checkpointHeader:len(file)-4]) {
			t.Fatalf("decoded %q from %x", data, file)
		}
	})
}
