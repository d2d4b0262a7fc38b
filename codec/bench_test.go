package codec_test

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
)

// BenchmarkCompress sweeps payload sizes around the policy threshold for
// a JSON-like and a random payload and reports the stored/raw ratio (1.0
// when the policy kept the payload uncompressed). For the random payload
// the time is what a producer of incompressible data pays per record,
// the back-off (one attempt in 16) included.
func BenchmarkCompress(b *testing.B) {
	for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		for _, kind := range []string{"json", "random"} {
			for _, size := range []int{64, 128, 256, 1024, 16 << 10} {
				b.Run(fmt.Sprintf("%s/%s/%d", c, kind, size), func(b *testing.B) {
					payload := jsonLike(size, 11)
					if kind == "random" {
						payload = randomBytes(size, 11)
					}
					compressor, err := codec.NewCompressor(codec.Policy{Codec: c, MinBytes: -1})
					if err != nil {
						b.Fatal(err)
					}
					defer compressor.Close()
					stored, _ := compressor.Compress(payload)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						compressor.Compress(payload)
					}
					b.ReportMetric(float64(len(stored))/float64(size), "stored/raw")
				})
			}
		}
	}
}

// BenchmarkDecompress is the consumer side for the JSON-like payload.
func BenchmarkDecompress(b *testing.B) {
	for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		for _, size := range []int{1024, 16 << 10} {
			b.Run(fmt.Sprintf("%s/%d", c, size), func(b *testing.B) {
				compressor, _ := codec.NewCompressor(codec.Policy{Codec: c})
				defer compressor.Close()
				payload := jsonLike(size, 12)
				stored, got := compressor.Compress(payload)
				stored = append([]byte(nil), stored...)
				d := codec.NewDecompressor(1 << 20)
				defer d.Close()
				buf := make([]byte, 0, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.Decompress(buf[:0], got, stored, uint32(size)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
