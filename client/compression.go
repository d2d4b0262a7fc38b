package client

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
)

// Compression is what a producer compresses payloads with. The zero value
// is lz4: payloads that shrink by at least an eighth travel and rest
// compressed; the others, and payloads under CompressMinBytes, as they are.
// The record names its codec, so consumers decompress without being told.
type Compression uint8

// Compression choices.
const (
	CompressLZ4  Compression = iota // fast; the default
	CompressNone                    // never compress
	CompressZstd                    // smaller output, more CPU on both ends
)

func (c Compression) String() string {
	switch c {
	case CompressLZ4:
		return "lz4"
	case CompressNone:
		return "none"
	case CompressZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression reads "lz4", "zstd" or "none".
func ParseCompression(name string) (Compression, error) {
	for _, c := range []Compression{CompressLZ4, CompressNone, CompressZstd} {
		if c.String() == name {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: compression %q (want lz4, zstd or none)", ErrInvalidArgument, name)
}

func (c Compression) codec() (record.Codec, error) {
	switch c {
	case CompressLZ4:
		return record.CodecLZ4, nil
	case CompressNone:
		return record.CodecNone, nil
	case CompressZstd:
		return record.CodecZstd, nil
	}
	return 0, fmt.Errorf("%w: %s", ErrInvalidArgument, c)
}

// newCompressor builds the compressor of one encoder; nil means none, so
// the uncompressed path never touches the codec package.
func newCompressor(c Compression, minBytes int) (*codec.Compressor, error) {
	kind, err := c.codec()
	if err != nil || kind == record.CodecNone {
		return nil, err
	}
	compressor, err := codec.NewCompressor(codec.Policy{Codec: kind, MinBytes: minBytes})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return compressor, nil
}

// Codec names how a delivered record's payload was stored; Message.Payload
// is always the decompressed payload.
type Codec = record.Codec

// Codecs a Message can report.
const (
	CodecNone = record.CodecNone
	CodecLZ4  = record.CodecLZ4
	CodecZstd = record.CodecZstd
)

// DecompressError is a delivered record whose CRC32C verified but whose
// payload could not be decompressed: it declares more raw bytes than
// Options.MaxDecompressedBytes (errors.Is(err, ErrDecompressedTooLarge)),
// or its compressed bytes are not what its codec says
// (errors.Is(err, ErrCorruptDelivery); a producer framed them so). The
// record is leased like any other: Ack, Nack or Term it by its offset.
type DecompressError struct {
	Stream      string
	Partition   uint32
	Offset      uint64
	Codec       Codec
	StoredBytes int    // the payload as stored
	RawBytes    uint32 // the payload length the record declares
	Limit       int    // Options.MaxDecompressedBytes in effect
	Err         error  // the codec's error
}

func (e *DecompressError) Error() string {
	return fmt.Sprintf("ironbus client: cannot decompress %s/%d offset %d (%s, %d bytes stored, %d raw, limit %d): %v",
		e.Stream, e.Partition, e.Offset, e.Codec, e.StoredBytes, e.RawBytes, e.Limit, e.Err)
}

// Unwrap exposes the class (ErrDecompressedTooLarge, ErrCorruptDelivery or
// ErrUnsupportedRecord) and the codec's error.
func (e *DecompressError) Unwrap() []error {
	class := ErrCorruptDelivery
	switch {
	case errors.Is(e.Err, codec.ErrTooLarge):
		class = ErrDecompressedTooLarge
	case errors.Is(e.Err, codec.ErrUnknownCodec):
		class = ErrUnsupportedRecord
	}
	return []error{class, e.Err}
}

// decompressPayload restores view's payload into dst (appending) or
// returns a *DecompressError naming the record.
func decompressPayload(d *codec.Decompressor, dst []byte, view record.View, stream string, partition uint32, offset uint64) ([]byte, error) {
	out, err := d.Decompress(dst, view.Codec, view.Payload, view.RawLength)
	if err != nil {
		return dst, &DecompressError{Stream: stream, Partition: partition, Offset: offset, Codec: view.Codec,
			StoredBytes: len(view.Payload), RawBytes: view.RawLength, Limit: d.MaxBytes(), Err: err}
	}
	return out, nil
}
