package record

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/zeebo/xxh3"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C (Castagnoli) of data: the checksum a producer
// computes over an encoded body and sends beside it, and every later reader
// verifies before it trusts a byte of the body.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// BodyHash returns the xxh3-64 a record frame stores for body, or zero when
// the body is shorter than BodyHashThreshold (nothing is stored then).
// Callers compute it before taking locks.
func BodyHash(body []byte) uint64 {
	if len(body) < BodyHashThreshold {
		return 0
	}
	return xxh3.Hash(body)
}

var le = binary.LittleEndian
