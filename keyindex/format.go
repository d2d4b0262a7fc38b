package keyindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The table file, keyidx.tbl (little-endian, fixed-width integers):
//
//	[0, 4096)      header copy 0
//	[4096, 8192)   header copy 1
//	then, for page i = 0 .. pages-1, two copies side by side:
//	[8192 + (2i+c)·4096, +4096)   page i, copy c
//
// Header (64 bytes used of its block, the rest zero):
//
//	magic "IBKEYIDX" @0 · version u16 @8 · flags u16 @10 (bit 0: full) ·
//	pages u32 @12 · sequence u64 @16 · covers_up_to u64 @24 · seed u64
//	@32 · entries u64 @40 · reserved @48 · CRC32C of [0,60) @60
//
// The valid copy with the higher sequence is the header; a write goes to
// the other copy. Page (4096 bytes):
//
//	magic "IBKP" @0 · page index u32 @4 · generation u64 @8 · used u16 @16
//	· reserved @18 · CRC32C of [0,28) and [32,4096) @28 · 127 slots of 32
//	bytes @32
//
// A page copy of all zeros is a valid empty page of generation 0 (a new
// file is sparse). The valid copy with the higher generation is the page;
// a write goes to the other copy, so a torn write leaves the previous one.
// Slot: check u64 @0 (the fingerprint's high half, never zero in a used
// slot) · probe u64 @8 (its low half, which picks the home page) · last
// offset u64 @16 · reserved @24. An all-zero slot is empty.
const (
	tableFileName = "keyidx.tbl"
	growFileName  = "keyidx.tbl.grow"

	blockSize     = 4096
	headerSize    = 64
	tableStart    = 2 * blockSize
	pageHeader    = 32
	slotSize      = 32
	slotsPerPage  = (blockSize - pageHeader) / slotSize // 127
	formatVersion = 1
	flagFull      = 1 << 0
)

var (
	headerMagic = [8]byte{'I', 'B', 'K', 'E', 'Y', 'I', 'D', 'X'}
	pageMagic   = [4]byte{'I', 'B', 'K', 'P'}
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
	le          = binary.LittleEndian
)

// errTooNew marks a header written by a newer format version: the file is
// derived, so it is rebuilt rather than refused.
var errTooNew = errors.New("keyindex: index file format is newer than this binary")

// header is the decoded table header.
type header struct {
	full     bool
	pages    uint32
	sequence uint64
	covers   uint64
	seed     uint64
	entries  uint64
}

func encodeHeader(dst []byte, h header) {
	clear(dst[:headerSize])
	copy(dst[0:8], headerMagic[:])
	le.PutUint16(dst[8:10], formatVersion)
	var flags uint16
	if h.full {
		flags |= flagFull
	}
	le.PutUint16(dst[10:12], flags)
	le.PutUint32(dst[12:16], h.pages)
	le.PutUint64(dst[16:24], h.sequence)
	le.PutUint64(dst[24:32], h.covers)
	le.PutUint64(dst[32:40], h.seed)
	le.PutUint64(dst[40:48], h.entries)
	le.PutUint32(dst[60:64], crc32.Checksum(dst[0:60], castagnoli))
}

// decodeHeader checks one header copy: magic, CRC, version, a page count
// of at least one.
func decodeHeader(b []byte) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("%w: header of %d bytes", ErrCorrupt, len(b))
	}
	if [8]byte(b[0:8]) != headerMagic {
		return header{}, fmt.Errorf("%w: bad header magic", ErrCorrupt)
	}
	if crc32.Checksum(b[0:60], castagnoli) != le.Uint32(b[60:64]) {
		return header{}, fmt.Errorf("%w: header checksum mismatch", ErrCorrupt)
	}
	if version := le.Uint16(b[8:10]); version > formatVersion {
		return header{}, fmt.Errorf("%w: version %d, this binary reads %d", errTooNew, version, formatVersion)
	} else if version == 0 {
		return header{}, fmt.Errorf("%w: header version 0", ErrCorrupt)
	}
	h := header{full: le.Uint16(b[10:12])&flagFull != 0, pages: le.Uint32(b[12:16]),
		sequence: le.Uint64(b[16:24]), covers: le.Uint64(b[24:32]), seed: le.Uint64(b[32:40]),
		entries: le.Uint64(b[40:48])}
	if h.pages == 0 {
		return header{}, fmt.Errorf("%w: header names zero pages", ErrCorrupt)
	}
	return h, nil
}

// pickHeader returns the newer valid header of the two copies in image
// (2 blocks), and which copy it was.
func pickHeader(image []byte) (header, int, error) {
	first, errFirst := decodeHeader(image[0:blockSize])
	second, errSecond := decodeHeader(image[blockSize : 2*blockSize])
	switch {
	case errFirst == nil && errSecond == nil:
		if second.sequence > first.sequence {
			return second, 1, nil
		}
		return first, 0, nil
	case errFirst == nil:
		return first, 0, nil
	case errSecond == nil:
		return second, 1, nil
	case errors.Is(errFirst, errTooNew):
		return header{}, 0, errFirst
	case errors.Is(errSecond, errTooNew):
		return header{}, 0, errSecond
	}
	return header{}, 0, errFirst
}

// slot is one decoded table slot.
type slot struct {
	check, probe, last uint64
}

func readSlot(page []byte, k int) slot {
	at := pageHeader + k*slotSize
	return slot{check: le.Uint64(page[at:]), probe: le.Uint64(page[at+8:]), last: le.Uint64(page[at+16:])}
}

func writeSlot(page []byte, k int, s slot) {
	at := pageHeader + k*slotSize
	le.PutUint64(page[at:], s.check)
	le.PutUint64(page[at+8:], s.probe)
	le.PutUint64(page[at+16:], s.last)
	le.PutUint64(page[at+24:], 0)
}

func pageUsed(page []byte) int { return int(le.Uint16(page[16:18])) }

func pageGeneration(page []byte) uint64 { return le.Uint64(page[8:16]) }

// sealPage stamps a page image with its index, generation, used count
// and CRC.
func sealPage(page []byte, index uint32, generation uint64, used int) {
	copy(page[0:4], pageMagic[:])
	le.PutUint32(page[4:8], index)
	le.PutUint64(page[8:16], generation)
	le.PutUint16(page[16:18], uint16(used))
	clear(page[18:28])
	le.PutUint32(page[28:32], pageChecksum(page))
}

func pageChecksum(page []byte) uint32 {
	crc := crc32.Checksum(page[0:28], castagnoli)
	return crc32.Update(crc, castagnoli, page[32:blockSize])
}

// checkPage validates one page copy of page index. An all-zero copy is a
// valid empty page (generation 0); otherwise the magic, index, CRC and
// used count must agree, and the used slots must be exactly the first
// `used` ones (slots fill in order and are never emptied).
func checkPage(page []byte, index uint32) error {
	if len(page) != blockSize {
		return fmt.Errorf("%w: page of %d bytes", ErrCorrupt, len(page))
	}
	if isZero(page) {
		return nil
	}
	if [4]byte(page[0:4]) != pageMagic {
		return fmt.Errorf("%w: page %d: bad magic", ErrCorrupt, index)
	}
	if got := le.Uint32(page[4:8]); got != index {
		return fmt.Errorf("%w: page %d: names itself page %d", ErrCorrupt, index, got)
	}
	if pageChecksum(page) != le.Uint32(page[28:32]) {
		return fmt.Errorf("%w: page %d: checksum mismatch", ErrCorrupt, index)
	}
	used := pageUsed(page)
	if used > slotsPerPage {
		return fmt.Errorf("%w: page %d: %d slots used of %d", ErrCorrupt, index, used, slotsPerPage)
	}
	for k := range slotsPerPage {
		if occupied := readSlot(page, k).check != 0; occupied != (k < used) {
			return fmt.Errorf("%w: page %d: slot %d does not match the used count %d", ErrCorrupt, index, k, used)
		}
	}
	return nil
}

// pickPage returns which copy of a page pair (2 blocks) is current: the
// valid one with the higher generation.
func pickPage(pair []byte, index uint32) (int, error) {
	errFirst := checkPage(pair[0:blockSize], index)
	errSecond := checkPage(pair[blockSize:2*blockSize], index)
	switch {
	case errFirst == nil && errSecond == nil:
		if pageGeneration(pair[blockSize:]) > pageGeneration(pair[0:]) {
			return 1, nil
		}
		return 0, nil
	case errFirst == nil:
		return 0, nil
	case errSecond == nil:
		return 1, nil
	}
	return 0, errFirst
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if le.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
