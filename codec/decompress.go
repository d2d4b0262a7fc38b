package codec

import (
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/ironbus/ironbus/record"
)

// Decompressor restores payloads. It is safe for concurrent use: lz4 keeps
// no state and one zstd decoder, made on the first zstd payload, serves
// every caller in turn.
type Decompressor struct {
	maxBytes int

	once    sync.Once
	zstd    *zstd.Decoder
	zstdErr error
}

// NewDecompressor returns a Decompressor that refuses any payload
// declaring more than maxBytes raw bytes (at least 1).
func NewDecompressor(maxBytes int) *Decompressor {
	return &Decompressor{maxBytes: max(maxBytes, 1)}
}

// MaxBytes is the decompressed-size cap.
func (d *Decompressor) MaxBytes() int { return d.maxBytes }

// Decompress appends the raw payload of stored, compressed with codec, to
// dst and returns the extended slice. rawLength is the length the record
// declares; it is checked against the cap before anything is allocated,
// and the output must be exactly that long. A CodecNone payload is
// appended as is. The caller has verified the record's CRC32C.
func (d *Decompressor) Decompress(dst []byte, codec record.Codec, stored []byte, rawLength uint32) ([]byte, error) {
	if codec == record.CodecNone {
		return append(dst, stored...), nil
	}
	if codec != record.CodecLZ4 && codec != record.CodecZstd {
		return dst, fmt.Errorf("%w: %s", ErrUnknownCodec, codec)
	}
	if uint64(rawLength) > uint64(d.maxBytes) {
		return dst, fmt.Errorf("%w: %s payload of %d stored bytes declares %d raw bytes, the cap is %d",
			ErrTooLarge, codec, len(stored), rawLength, d.maxBytes)
	}
	raw := int(rawLength)
	start := len(dst)
	dst = slices.Grow(dst, raw)
	var err error
	switch codec {
	case record.CodecLZ4:
		dst, err = decompressLZ4(dst, stored, raw)
	case record.CodecZstd:
		dst, err = d.decompressZstd(dst, stored, raw)
	}
	if err != nil {
		return dst[:start], err
	}
	if got := len(dst) - start; got != raw {
		return dst[:start], fmt.Errorf("%w: %s payload decodes to %d bytes, the record declares %d", ErrCorrupt, codec, got, raw)
	}
	return dst, nil
}

func decompressLZ4(dst, stored []byte, raw int) ([]byte, error) {
	start := len(dst)
	// Exactly raw bytes of room: an input that would decode to more
	// fails inside lz4 instead of writing past the declared length.
	out := dst[start : start+raw : start+raw]
	if raw == 0 {
		if len(stored) == 0 {
			return dst, nil
		}
		return dst, fmt.Errorf("%w: lz4 payload of %d bytes declares 0 raw bytes", ErrCorrupt, len(stored))
	}
	n, err := lz4.UncompressBlock(stored, out)
	if err != nil {
		return dst, fmt.Errorf("%w: lz4: %w", ErrCorrupt, err)
	}
	return dst[:start+n], nil
}

func (d *Decompressor) decompressZstd(dst, stored []byte, raw int) ([]byte, error) {
	decoder, err := d.zstdDecoder()
	if err != nil {
		return dst, err
	}
	start := len(dst)
	// With the cap limit on, DecodeAll writes at most cap-len bytes: a
	// frame that lies about its size cannot make it allocate past raw.
	out, err := decoder.DecodeAll(stored, dst[:start:start+raw])
	if err != nil {
		return dst, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	return out, nil
}

func (d *Decompressor) zstdDecoder() (*zstd.Decoder, error) {
	d.once.Do(func() {
		limit := uint64(max(d.maxBytes, zstd.MinWindowSize))
		d.zstd, d.zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(limit), zstd.WithDecoderMaxWindow(limit), zstd.WithDecodeAllCapLimit(true))
		if d.zstdErr != nil {
			d.zstdErr = fmt.Errorf("codec: zstd decoder: %w", d.zstdErr)
		}
	})
	return d.zstd, d.zstdErr
}

// Close releases the zstd decoder, if one was made. The Decompressor must
// not be used afterwards.
func (d *Decompressor) Close() {
	d.once.Do(func() {}) // no decoder is made after Close
	if d.zstd != nil {
		d.zstd.Close()
	}
}
