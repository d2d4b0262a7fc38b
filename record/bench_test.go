package record

import (
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
)

func BenchmarkAppendFrame(b *testing.B) {
	for _, size := range []int{256, 16384} {
		body := make([]byte, size)
		crc := Checksum(body)
		buf := make([]byte, 0, FrameSize(size))
		b.Run(codectest.SizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendFrame(buf[:0], 1, 2, body, crc, 0)
			}
		})
	}
}

func BenchmarkParseFrame(b *testing.B) {
	for _, size := range []int{256, 16384, 1 << 20} {
		body := make([]byte, size)
		frame := AppendFrame(nil, 1, 2, body, Checksum(body), BodyHash(body))
		b.Run(codectest.SizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ParseFrame(frame, DefaultMaxBody); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChecksum is the CRC32C (Castagnoli, hardware accelerated) every
// record body is checked with: by the producer, the broker and the
// consumer.
func BenchmarkChecksum(b *testing.B) {
	for _, size := range []int{256, 4096, 65536} {
		data := make([]byte, size)
		b.Run(codectest.SizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				_ = Checksum(data)
			}
		})
	}
}
