package replica

import (
	"encoding/binary"
	"fmt"
)

// Entry payloads. A data payload is a 16-byte header followed by record
// frames exactly as a segment stores them:
//
//	[0]     magic 'D'
//	[1]     version (1)
//	[2:4]   flags (zero; unknown bits are refused)
//	[4:8]   record count
//	[8:16]  base offset (the first frame's offset)
//	[16:]   record frames, offsets base .. base+count-1
//
// A control payload owns no offsets:
//
//	[0]     magic 'C'
//	[1]     version (1)
//	[2:4]   control kind
//	[4:]    body
const (
	dataMagic         = 'D'
	controlMagic      = 'C'
	payloadVersion    = 1
	DataHeaderSize    = 16
	ControlHeaderSize = 4
	payloadFlagsKnown = 0
)

// DataHeader describes a data payload's records.
type DataHeader struct {
	Count      uint32
	BaseOffset uint64
}

// AppendDataHeader appends a data payload header; the caller appends the
// record frames after it.
func AppendDataHeader(dst []byte, h DataHeader) []byte {
	var b [DataHeaderSize]byte
	b[0] = dataMagic
	b[1] = payloadVersion
	binary.LittleEndian.PutUint32(b[4:8], h.Count)
	binary.LittleEndian.PutUint64(b[8:16], h.BaseOffset)
	return append(dst, b[:]...)
}

// AppendControl appends a control payload.
func AppendControl(dst []byte, kind uint16, body []byte) []byte {
	dst = append(dst, controlMagic, payloadVersion, 0, 0)
	binary.LittleEndian.PutUint16(dst[len(dst)-2:], kind)
	return append(dst, body...)
}

// PayloadKind says what an entry's Data holds.
type PayloadKind uint8

const (
	PayloadEmpty   PayloadKind = iota // a no-op: no data
	PayloadData                       // record frames
	PayloadControl                    // a control record
)

// Payload is a decoded entry payload. Frames and Body alias the input.
type Payload struct {
	Kind    PayloadKind
	Data    DataHeader
	Frames  []byte // PayloadData: the record frames
	Control uint16 // PayloadControl: the control kind
	Body    []byte // PayloadControl: the body
}

// DecodePayload decodes a normal entry's Data. It checks the header only;
// the record frames are checked by their own CRCs where they are read.
func DecodePayload(data []byte) (Payload, error) {
	if len(data) == 0 {
		return Payload{Kind: PayloadEmpty}, nil
	}
	switch data[0] {
	case dataMagic:
		if len(data) < DataHeaderSize {
			return Payload{}, fmt.Errorf("%w: data header of %d bytes", ErrBadPayload, len(data))
		}
		if data[1] != payloadVersion {
			return Payload{}, fmt.Errorf("%w: data payload version %d", ErrBadPayload, data[1])
		}
		if flags := binary.LittleEndian.Uint16(data[2:4]); flags != payloadFlagsKnown {
			return Payload{}, fmt.Errorf("%w: unknown data payload flags %#x", ErrBadPayload, flags)
		}
		h := DataHeader{
			Count:      binary.LittleEndian.Uint32(data[4:8]),
			BaseOffset: binary.LittleEndian.Uint64(data[8:16]),
		}
		if h.Count == 0 {
			return Payload{}, fmt.Errorf("%w: data payload with no records", ErrBadPayload)
		}
		if h.BaseOffset+uint64(h.Count) < h.BaseOffset {
			return Payload{}, fmt.Errorf("%w: offsets overflow", ErrBadPayload)
		}
		return Payload{Kind: PayloadData, Data: h, Frames: data[DataHeaderSize:]}, nil
	case controlMagic:
		if len(data) < ControlHeaderSize {
			return Payload{}, fmt.Errorf("%w: control header of %d bytes", ErrBadPayload, len(data))
		}
		if data[1] != payloadVersion {
			return Payload{}, fmt.Errorf("%w: control payload version %d", ErrBadPayload, data[1])
		}
		return Payload{Kind: PayloadControl, Control: binary.LittleEndian.Uint16(data[2:4]),
			Body: data[ControlHeaderSize:]}, nil
	default:
		return Payload{}, fmt.Errorf("%w: unknown payload magic %#x", ErrBadPayload, data[0])
	}
}
