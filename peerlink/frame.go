package peerlink

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Frame layout (little-endian):
//
//	[u32 length][u32 crc32c][u64 channel][payload]
//
// length counts the channel and the payload (8 + len(payload)); the
// checksum covers the length field, the channel and the payload, so a
// flipped length that still lands inside the limit fails it too.
const (
	frameHeaderBytes = 16
	frameLengthMin   = 8 // a frame always carries its channel

	// ControlChannel is reserved for the link's own frames (heartbeats);
	// Send refuses it.
	ControlChannel uint64 = math.MaxUint64
)

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// frameBytes is the wire size of a frame carrying payloadBytes.
func frameBytes(payloadBytes int) int { return frameHeaderBytes + payloadBytes }

// frameChecksum is the CRC32C of the length field, the channel and the
// payload. header must hold the first 16 bytes of the frame.
func frameChecksum(header []byte, payload []byte) uint32 {
	sum := crc32.Update(0, castagnoli, header[0:4])
	sum = crc32.Update(sum, castagnoli, header[8:16])
	return crc32.Update(sum, castagnoli, payload)
}

// frameHeader builds the header of a frame, checksum included. The caller
// checked that the payload fits in a u32 length.
func frameHeader(channel uint64, payload []byte) [frameHeaderBytes]byte {
	var header [frameHeaderBytes]byte
	le.PutUint32(header[0:4], uint32(frameLengthMin+len(payload)))
	le.PutUint64(header[8:16], channel)
	le.PutUint32(header[4:8], frameChecksum(header[:], payload))
	return header
}

// appendFrame appends one encoded frame to dst.
func appendFrame(dst []byte, channel uint64, payload []byte) []byte {
	header := frameHeader(channel, payload)
	dst = append(dst, header[:]...)
	return append(dst, payload...)
}

// frameReader decodes frames from a buffered stream. A payload it returns
// aliases either the bufio buffer or its scratch buffer and is valid only
// until the next call to next.
type frameReader struct {
	source          *bufio.Reader
	maxPayloadBytes int
	scratch         []byte
	consumed        int // bytes of the previous frame still to discard
}

func newFrameReader(source *bufio.Reader, maxPayloadBytes int) *frameReader {
	return &frameReader{source: source, maxPayloadBytes: maxPayloadBytes}
}

// next returns the next frame. io.EOF means the stream ended cleanly
// between frames; a stream that ends inside a frame returns an error
// wrapping io.ErrUnexpectedEOF. A length beyond the limit is
// ErrFrameTooLarge and a bad length or checksum ErrFrameCorrupt; either
// way the stream cannot be trusted past it.
func (r *frameReader) next() (channel uint64, payload []byte, err error) {
	if r.consumed > 0 {
		if _, err := r.source.Discard(r.consumed); err != nil {
			return 0, nil, err
		}
		r.consumed = 0
	}
	header, err := r.source.Peek(frameHeaderBytes)
	if err != nil {
		return 0, nil, endOfStream(len(header), err)
	}
	length := le.Uint32(header[0:4])
	if length < frameLengthMin {
		return 0, nil, fmt.Errorf("%w: length %d is shorter than the channel id", ErrFrameCorrupt, length)
	}
	payloadBytes := uint64(length) - frameLengthMin
	if payloadBytes > uint64(r.maxPayloadBytes) {
		return 0, nil, fmt.Errorf("%w: %d payload bytes, at most %d allowed", ErrFrameTooLarge, payloadBytes, r.maxPayloadBytes)
	}
	total := frameHeaderBytes + int(payloadBytes)
	var frame []byte
	if total <= r.source.Size() {
		// The whole frame fits the read buffer: hand out a view of it.
		frame, err = r.source.Peek(total)
		if err != nil {
			return 0, nil, endOfStream(1, err)
		}
		r.consumed = total
	} else {
		if cap(r.scratch) < total {
			r.scratch = make([]byte, total)
		}
		frame = r.scratch[:total]
		if _, err := io.ReadFull(r.source, frame); err != nil {
			return 0, nil, endOfStream(1, err)
		}
	}
	payload = frame[frameHeaderBytes:]
	if want, got := le.Uint32(frame[4:8]), frameChecksum(frame, payload); want != got {
		return 0, nil, fmt.Errorf("%w: checksum %08x, frame says %08x", ErrFrameCorrupt, got, want)
	}
	return le.Uint64(frame[8:16]), payload, nil
}

// endOfStream names a read error: EOF before any byte of a frame is a clean
// end; EOF inside one is a truncated frame.
func endOfStream(bytesSeen int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if bytesSeen == 0 {
			return io.EOF
		}
		return fmt.Errorf("peerlink: stream ended inside a frame: %w", io.ErrUnexpectedEOF)
	}
	return err
}
