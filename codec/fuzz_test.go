package codec_test

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
)

// FuzzDecompress feeds arbitrary bytes, codec and declared length to the
// decompressor: a hostile producer controls all three behind a valid CRC.
// It must return the declared length exactly or a typed error, and never
// panic or allocate past the cap.
func FuzzDecompress(f *testing.F) {
	for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		compressor, _ := codec.NewCompressor(codec.Policy{Codec: c, MinBytes: -1})
		payload := jsonLike(600, 9)
		stored, got := compressor.Compress(payload)
		f.Add(uint8(got), append([]byte(nil), stored...), uint32(len(payload)))
		compressor.Close()
	}
	f.Add(uint8(record.CodecLZ4), []byte{0xf0, 0xff, 0xff, 0xff, 0x0f}, uint32(100))
	f.Add(uint8(record.CodecZstd), []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00}, uint32(0))
	f.Add(uint8(7), []byte("x"), uint32(1))
	const limit = 64 << 10
	d := codec.NewDecompressor(limit)
	f.Fuzz(func(t *testing.T, c uint8, stored []byte, raw uint32) {
		out, err := d.Decompress(nil, record.Codec(c), stored, raw)
		if err != nil {
			if !errors.Is(err, codec.ErrCorrupt) && !errors.Is(err, codec.ErrTooLarge) && !errors.Is(err, codec.ErrUnknownCodec) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if record.Codec(c) != record.CodecNone && len(out) != int(raw) {
			t.Fatalf("decoded %d bytes for a declared %d", len(out), raw)
		}
		if len(out) > limit && record.Codec(c) != record.CodecNone {
			t.Fatalf("decoded %d bytes past the cap %d", len(out), limit)
		}
	})
}
