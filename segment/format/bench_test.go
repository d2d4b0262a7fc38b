package format

import (
	"strconv"
	"testing"
)

// BenchmarkCRC is the CRC32C (Castagnoli, hardware accelerated) every
// batch and storage frame is checked with.
func BenchmarkCRC(b *testing.B) {
	for _, size := range []int{256, 4096, 65536} {
		data := make([]byte, size)
		b.Run(itoaSize(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				_ = CRC(data)
			}
		})
	}
}

func itoaSize(size int) string {
	switch {
	case size >= 1<<20:
		return strconv.Itoa(size>>20) + "MiB"
	case size >= 1024:
		return strconv.Itoa(size>>10) + "KiB"
	}
	return strconv.Itoa(size) + "B"
}
