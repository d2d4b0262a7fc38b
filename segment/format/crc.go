package format

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/zeebo/xxh3"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC32C of data.
func CRC(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// UpdateCRC extends a running CRC32C with data.
func UpdateCRC(crc uint32, data []byte) uint32 { return crc32.Update(crc, castagnoli, data) }

// XXH3 returns the xxh3-64 hash of data.
func XXH3(data []byte) uint64 { return xxh3.Hash(data) }

var le = binary.LittleEndian
