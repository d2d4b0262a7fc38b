package format

import (
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
)

// BenchmarkCRC is the CRC32C (Castagnoli, hardware accelerated) every
// batch and storage frame is checked with.
func BenchmarkCRC(b *testing.B) {
	for _, size := range []int{256, 4096, 65536} {
		data := make([]byte, size)
		b.Run(codectest.SizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				_ = CRC(data)
			}
		})
	}
}
