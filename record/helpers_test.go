package record_test

import (
	"encoding/binary"

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
