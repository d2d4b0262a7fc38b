package dedup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// load reads the sealed generations in w.dir. A file that fails its
// checks is deleted and its ids counted as forgotten early; a temporary
// file a crash left is deleted; generations that expired go, and the
// count cap applies. When recovery cut the log below what the files
// cover, the offsets past its end will name new records: the files are
// rewritten without them, for good, before the window serves. Only a
// directory that cannot be listed fails.
func (w *Window) load() error {
	names, err := w.fs.List(w.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dedup: listing %s: %w", w.dir, err)
	}
	end := w.opts.Durable(context.Background(), 0)
	now := w.opts.Now()
	removed := false
	var covers uint64
	for _, name := range names {
		file := path.Join(w.dir, name)
		seq, ok := parseRunName(name)
		if !ok {
			if name == coversFileName {
				covers = w.loadCovers()
			}
			if strings.HasSuffix(name, tempFileSuffix) {
				removed = w.fs.Remove(file) == nil || removed
			}
			continue
		}
		w.nextSeq = max(w.nextSeq, seq+1)
		g, err := w.loadGeneration(file, end, now)
		if err != nil {
			w.logger.Error("a damaged message-id generation was dropped; the ids it held may be stored again", "file", file, "error", err.Error())
			removed = w.fs.Remove(file) == nil || removed
			continue
		}
		if g == nil {
			continue // every id in it was past the log's end
		}
		w.gens = append(w.gens, g)
		w.onDisk += g.header.count
		w.coversUpTo = max(w.coversUpTo, g.header.coversUpTo)
	}
	if removed {
		if err := w.fs.SyncDir(w.dir); err != nil {
			return fmt.Errorf("dedup: %s: %w", w.dir, err)
		}
	}
	slices.SortFunc(w.gens, func(a, b *generation) int { return compare(a.header.seq, b.header.seq) })
	if covers > end {
		if err := vfs.WriteFileAtomic(w.fs, path.Join(w.dir, coversFileName), encodeCovers(end)); err != nil {
			return fmt.Errorf("dedup: %s: lowering the covers file to the log's end: %w", w.dir, err)
		}
	}
	w.coversUpTo = min(max(w.coversUpTo, covers), end)
	w.retireExpired(false)
	w.trim()
	return nil
}

// loadGeneration reads and checks one generation file. One that covers
// past the log's end is cut there (nil when nothing is left of it).
func (w *Window) loadGeneration(file string, end uint64, now time.Duration) (*generation, error) {
	image, err := vfs.ReadFile(w.fs, file)
	if err != nil {
		return nil, err
	}
	run, err := decodeRun(image)
	if err != nil {
		if header, herr := decodeRunHeader(image); herr == nil {
			w.evictedEarly.Add(uint64(header.count))
		}
		return nil, err
	}
	if run.header.coversUpTo > end {
		if run, err = w.cutGeneration(file, image, run.header, end); err != nil || run.header.count == 0 {
			return nil, err
		}
	}
	g := &generation{file: file, decodedRun: run, clamp: math.MaxInt64}
	if run.header.maxTime > now {
		g.clamp = now
	}
	return g, nil
}

// cutGeneration rewrites a generation without the ids of records at or
// past end, or deletes it when none is left.
func (w *Window) cutGeneration(file string, image []byte, header runHeader, end uint64) (decodedRun, error) {
	var kept []entry
	for _, e := range blockEntriesIn(image[runHeaderSize:header.crcsAt()]) {
		if header.baseOffset+uint64(e.offset) < end {
			kept = append(kept, e)
		}
	}
	w.logger.Warn("the log ends before what a message-id generation covers; its ids past the end are forgotten",
		"file", file, "log_end", end, "covered_up_to", header.coversUpTo, "ids_kept", len(kept), "ids", header.count)
	if len(kept) == 0 {
		if err := w.fs.Remove(file); err != nil {
			return decodedRun{}, err
		}
		return decodedRun{}, w.fs.SyncDir(w.dir)
	}
	filter := newBloom(len(kept))
	for _, e := range kept {
		filter.add(e.hash)
	}
	header.coversUpTo = end
	cut := encodeRun(header, kept, filter)
	run, err := decodeRun(cut)
	if err != nil {
		return decodedRun{}, err
	}
	return run, vfs.WriteFileAtomic(w.fs, file, cut)
}

// parseRunName returns the sequence number of a generation file name.
func parseRunName(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, runFilePrefix)
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, runFileSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The covers file, dedup/covers, records at Close how far the log is
// covered when no generation says so (a partition whose records carry no
// ids): 20 bytes, little-endian, magic "IRONDCOV" @0 · offset u64 @8 ·
// CRC32C of [0,16) u32 @16. Damaged or missing, it covers nothing.
const (
	coversFileName = "covers"
	coversMagic    = "IRONDCOV"
	coversSize     = 20
)

func encodeCovers(offset uint64) []byte {
	buf := make([]byte, coversSize)
	copy(buf, coversMagic)
	binary.LittleEndian.PutUint64(buf[8:], offset)
	binary.LittleEndian.PutUint32(buf[16:], format.CRC(buf[:16]))
	return buf
}

func decodeCovers(b []byte) (uint64, bool) {
	if len(b) != coversSize || string(b[:8]) != coversMagic || binary.LittleEndian.Uint32(b[16:]) != format.CRC(b[:16]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

// loadCovers reads the covers file; anything wrong with it covers
// nothing.
func (w *Window) loadCovers() uint64 {
	data, err := vfs.ReadFile(w.fs, path.Join(w.dir, coversFileName))
	if err != nil {
		return 0
	}
	offset, ok := decodeCovers(data)
	if !ok {
		w.logger.Warn("the message-id window's covers file is damaged; the log tail is replayed")
	}
	return offset
}

// persistCovers records that every id of a record below end is in a
// sealed generation (or forgotten and counted), when that is news.
func (w *Window) persistCovers(end uint64) error {
	w.mu.Lock()
	known := w.coversUpTo
	end = min(end, w.unsealedFrom)
	w.mu.Unlock()
	if end <= known || end == math.MaxUint64 {
		return nil
	}
	if err := vfs.MkdirAllDurable(w.fs, w.dir); err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(w.fs, path.Join(w.dir, coversFileName), encodeCovers(end)); err != nil {
		return err
	}
	w.mu.Lock()
	w.coversUpTo = max(w.coversUpTo, end)
	w.mu.Unlock()
	return nil
}
