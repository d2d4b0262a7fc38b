package dedup

import (
	"encoding/binary"
	"fmt"

	"github.com/ironbus/ironbus/segment/format"
)

// bloom is a generation's Bloom filter, held in RAM so a lookup reads a
// generation's file only when the id may be in it: bloomBitsPerID bits
// per id and bloomHashes probes give about 1 % false positives. It is
// blocked: all probes of a hash fall in one 64-byte block (one cache
// line), so a miss costs one memory access per generation.
type bloom struct {
	words  []uint64
	hashes uint8
}

const (
	bloomBitsPerID = 10
	bloomHashes    = 7
	blockWords     = 8 // 512 bits
	// maxBloomWords bounds what decodeBloom accepts: a generation never
	// holds more than maxGenerationIDs ids.
	maxBloomWords = (maxGenerationIDs*bloomBitsPerID/64/blockWords + 1) * blockWords
)

func newBloom(ids int) bloom {
	blocks := max(1, (ids*bloomBitsPerID+511)/512)
	return bloom{words: make([]uint64, blocks*blockWords), hashes: bloomHashes}
}

// bit is probe i of hash: the block comes from the hash's low half, the
// bits inside it from its high half by double hashing.
func (f bloom) bit(hash uint64, i uint8) (word int, mask uint64) {
	block := (hash & 0xffffffff) % uint64(len(f.words)/blockWords)
	position := (hash>>32 + uint64(i)*(hash>>41|1)) & 511
	return int(block)*blockWords + int(position/64), 1 << (position % 64)
}

func (f bloom) add(hash uint64) {
	for i := range f.hashes {
		word, mask := f.bit(hash, i)
		f.words[word] |= mask
	}
}

func (f bloom) has(hash uint64) bool {
	for i := range f.hashes {
		word, mask := f.bit(hash, i)
		if f.words[word]&mask == 0 {
			return false
		}
	}
	return true
}

// bloomSize is the encoded size of a filter of words words.
func bloomSize(words int) int { return 8 + words*8 + 4 }

// The encoded filter, little-endian:
//
//	hashes u8 @0 · reserved [3]u8 @1 · words u32 @4 · words × u64 @8 ·
//	CRC32C of everything before it u32
func appendBloom(dst []byte, f bloom) []byte {
	start := len(dst)
	dst = append(dst, f.hashes, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(f.words)))
	for _, w := range f.words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return binary.LittleEndian.AppendUint32(dst, format.CRC(dst[start:]))
}

// decodeBloom reads an encoded filter that must fill b exactly.
func decodeBloom(b []byte) (bloom, error) {
	if len(b) < bloomSize(blockWords) {
		return bloom{}, fmt.Errorf("%w: Bloom filter of %d bytes", ErrCorrupt, len(b))
	}
	words := binary.LittleEndian.Uint32(b[4:8])
	if words == 0 || words%blockWords != 0 || words > maxBloomWords || bloomSize(int(words)) != len(b) {
		return bloom{}, fmt.Errorf("%w: Bloom filter of %d words in %d bytes", ErrCorrupt, words, len(b))
	}
	if binary.LittleEndian.Uint32(b[len(b)-4:]) != format.CRC(b[:len(b)-4]) {
		return bloom{}, fmt.Errorf("%w: Bloom filter checksum mismatch", ErrCorrupt)
	}
	if b[0] == 0 || b[0] > 16 {
		return bloom{}, fmt.Errorf("%w: Bloom filter with %d hashes", ErrCorrupt, b[0])
	}
	f := bloom{words: make([]uint64, words), hashes: b[0]}
	for i := range f.words {
		f.words[i] = binary.LittleEndian.Uint64(b[8+8*i:])
	}
	return f, nil
}
