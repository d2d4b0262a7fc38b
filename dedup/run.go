package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/segment/format"
)

// ErrCorrupt marks a generation file (or part of one) that fails its
// checks: it is dropped, never half-trusted.
var ErrCorrupt = errors.New("dedup: generation file is corrupt")

// A sealed generation is one file, dedup/gen-<seq>.run, written whole
// (temporary file, sync, rename, sync the directory) and never changed.
// Little-endian:
//
//	header (runHeaderSize bytes):
//	  magic "IRONDDUP" @0 · version u16 (1) @8 · reserved u16 @10 ·
//	  count u32 @12 · seq u64 @16 · min time ns u64 @24 ·
//	  max time ns u64 @32 · covers up to u64 @40 · base offset u64 @48 ·
//	  Bloom bytes u32 @56 · CRC32C of [0,60) u32 @60
//	entries: count × (hash u64 · offset − base u32 · ms after min time u32),
//	  ascending by hash, in blocks of blockEntries
//	block CRCs: one CRC32C u32 per block
//	Bloom filter (appendBloom), Bloom bytes long
//
// covers up to: every id of a record below this offset is in this
// generation or an older one; the log from there on is replayed after a
// crash.
const (
	runMagic       = "IRONDDUP"
	runVersion     = 1
	runHeaderSize  = 64
	blockEntries   = 256
	blockBytes     = blockEntries * entrySize
	runFilePrefix  = "gen-"
	runFileSuffix  = ".run"
	tempFileSuffix = ".tmp"
	// maxGenerationIDs bounds a generation: what GenerationIDs accepts
	// and what a decoder believes.
	maxGenerationIDs = 1 << 16
)

type runHeader struct {
	count      int
	seq        uint64
	minTime    time.Duration
	maxTime    time.Duration
	coversUpTo uint64
	baseOffset uint64
	bloomBytes int
}

func blocksOf(count int) int { return (count + blockEntries - 1) / blockEntries }

// runSize is a file's size from its header.
func (h runHeader) crcsAt() int   { return runHeaderSize + h.count*entrySize }
func (h runHeader) bloomAt() int  { return h.crcsAt() + 4*blocksOf(h.count) }
func (h runHeader) fileSize() int { return h.bloomAt() + h.bloomBytes }

// encodeRun returns the file image of a generation.
func encodeRun(h runHeader, entries []entry, f bloom) []byte {
	h.count, h.bloomBytes = len(entries), bloomSize(len(f.words))
	buf := make([]byte, runHeaderSize, h.fileSize())
	copy(buf, runMagic)
	binary.LittleEndian.PutUint16(buf[8:], runVersion)
	binary.LittleEndian.PutUint32(buf[12:], uint32(h.count))
	binary.LittleEndian.PutUint64(buf[16:], h.seq)
	binary.LittleEndian.PutUint64(buf[24:], uint64(h.minTime))
	binary.LittleEndian.PutUint64(buf[32:], uint64(h.maxTime))
	binary.LittleEndian.PutUint64(buf[40:], h.coversUpTo)
	binary.LittleEndian.PutUint64(buf[48:], h.baseOffset)
	binary.LittleEndian.PutUint32(buf[56:], uint32(h.bloomBytes))
	binary.LittleEndian.PutUint32(buf[60:], format.CRC(buf[:60]))
	for _, e := range entries {
		buf = binary.LittleEndian.AppendUint64(buf, e.hash)
		buf = binary.LittleEndian.AppendUint32(buf, e.offset)
		buf = binary.LittleEndian.AppendUint32(buf, e.age)
	}
	entriesEnd := len(buf)
	for start := runHeaderSize; start < entriesEnd; start += blockBytes {
		buf = binary.LittleEndian.AppendUint32(buf, format.CRC(buf[start:min(start+blockBytes, entriesEnd)]))
	}
	return appendBloom(buf, f)
}

// decodeRunHeader reads and checks a file's header.
func decodeRunHeader(b []byte) (runHeader, error) {
	if len(b) < runHeaderSize {
		return runHeader{}, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(b))
	}
	if string(b[:8]) != runMagic {
		return runHeader{}, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if binary.LittleEndian.Uint32(b[60:64]) != format.CRC(b[:60]) {
		return runHeader{}, fmt.Errorf("%w: header checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint16(b[8:10]); v != runVersion {
		return runHeader{}, fmt.Errorf("%w: version %d (this binary reads %d)", ErrCorrupt, v, runVersion)
	}
	h := runHeader{count: int(binary.LittleEndian.Uint32(b[12:16])), seq: binary.LittleEndian.Uint64(b[16:24]),
		minTime: time.Duration(binary.LittleEndian.Uint64(b[24:32])), maxTime: time.Duration(binary.LittleEndian.Uint64(b[32:40])),
		coversUpTo: binary.LittleEndian.Uint64(b[40:48]), baseOffset: binary.LittleEndian.Uint64(b[48:56]),
		bloomBytes: int(binary.LittleEndian.Uint32(b[56:60]))}
	switch {
	case h.count < 1 || h.count > maxGenerationIDs:
		return runHeader{}, fmt.Errorf("%w: %d ids", ErrCorrupt, h.count)
	case h.minTime < 0 || h.maxTime < h.minTime:
		return runHeader{}, fmt.Errorf("%w: times %d..%d", ErrCorrupt, h.minTime, h.maxTime)
	case h.coversUpTo <= h.baseOffset:
		return runHeader{}, fmt.Errorf("%w: covers up to %d, below its base offset %d", ErrCorrupt, h.coversUpTo, h.baseOffset)
	case h.bloomBytes < bloomSize(blockWords) || h.bloomBytes > bloomSize(maxBloomWords):
		return runHeader{}, fmt.Errorf("%w: Bloom filter of %d bytes", ErrCorrupt, h.bloomBytes)
	}
	return h, nil
}

// decodedRun is what a generation keeps in RAM: its header, its filter,
// and per block the first hash and the CRC, so a lookup reads one block.
type decodedRun struct {
	header runHeader
	bloom  bloom
	fences []uint64
	crcs   []uint32
}

// decodeRun checks a whole file image: header, every block, the order
// of the hashes, the Bloom filter.
func decodeRun(b []byte) (decodedRun, error) {
	h, err := decodeRunHeader(b)
	if err != nil {
		return decodedRun{}, err
	}
	if len(b) != h.fileSize() {
		return decodedRun{}, fmt.Errorf("%w: %d bytes, the header says %d", ErrCorrupt, len(b), h.fileSize())
	}
	run := decodedRun{header: h, fences: make([]uint64, 0, blocksOf(h.count)), crcs: make([]uint32, 0, blocksOf(h.count))}
	var last uint64
	for block := range blocksOf(h.count) {
		start := runHeaderSize + block*blockBytes
		data := b[start:min(start+blockBytes, h.crcsAt())]
		crc := binary.LittleEndian.Uint32(b[h.crcsAt()+4*block:])
		if format.CRC(data) != crc {
			return decodedRun{}, fmt.Errorf("%w: block %d checksum mismatch", ErrCorrupt, block)
		}
		for i := 0; i < len(data); i += entrySize {
			hash := binary.LittleEndian.Uint64(data[i:])
			if hash <= last {
				return decodedRun{}, fmt.Errorf("%w: block %d: hashes out of order", ErrCorrupt, block)
			}
			last = hash
		}
		run.fences = append(run.fences, binary.LittleEndian.Uint64(data))
		run.crcs = append(run.crcs, crc)
	}
	if run.bloom, err = decodeBloom(b[h.bloomAt():]); err != nil {
		return decodedRun{}, err
	}
	return run, nil
}

// searchBlock finds hash in one block read from the file, after checking
// it against its CRC.
func searchBlock(data []byte, crc uint32, hash uint64) (entry, bool, error) {
	if len(data)%entrySize != 0 || format.CRC(data) != crc {
		return entry{}, false, fmt.Errorf("%w: block checksum mismatch on read", ErrCorrupt)
	}
	low, high := 0, len(data)/entrySize
	for low < high {
		mid := (low + high) / 2
		if binary.LittleEndian.Uint64(data[mid*entrySize:]) < hash {
			low = mid + 1
		} else {
			high = mid
		}
	}
	if low == len(data)/entrySize {
		return entry{}, false, nil
	}
	at := data[low*entrySize:]
	e := entry{hash: binary.LittleEndian.Uint64(at), offset: binary.LittleEndian.Uint32(at[8:]), age: binary.LittleEndian.Uint32(at[12:])}
	return e, e.hash == hash, nil
}

// blockEntriesIn yields the entries of a verified block.
func blockEntriesIn(data []byte) []entry {
	out := make([]entry, 0, len(data)/entrySize)
	for i := 0; i+entrySize <= len(data); i += entrySize {
		out = append(out, entry{hash: binary.LittleEndian.Uint64(data[i:]), offset: binary.LittleEndian.Uint32(data[i+8:]),
			age: binary.LittleEndian.Uint32(data[i+12:])})
	}
	return out
}
