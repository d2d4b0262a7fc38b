package keyindex

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"

	"github.com/ironbus/ironbus/segment/vfs"
)

// fingerprint is a subject's 128-bit hash under the table's seed: probe
// picks the home page, check tells apart the subjects sharing a page.
type fingerprint struct {
	probe, check uint64
}

// entry is a subject's last offset waiting to be merged into the table.
type entry struct {
	fp   fingerprint
	last uint64
	// hops counts the full pages merge has carried the entry past.
	hops uint32
}

// table is the on-disk hash table. Its pages are read with ReadAt (the
// page cache holds them, not the heap); only the writer (the goroutine
// holding Index.flushMu) writes it.
type table struct {
	fsys vfs.FS
	name string
	file vfs.File
	// pages is fixed for the table's life (growth makes a new table), so
	// readers use it without the writer's header.
	pages uint32
	// head is the header as last written; only the writer uses it.
	head header
	// headerCopy is the copy the current header was read from or last
	// written to; the next header write goes to the other one.
	headerCopy int
	// pair is the writer's page buffer; readers bring their own.
	pair [2 * blockSize]byte
	// dirty has a bit per page written since the last sync: writing such
	// a page again would overwrite its last synced copy, so the writer
	// syncs first (K3).
	dirty []uint64
}

// syncData makes every page written so far durable.
func (t *table) syncData() error {
	if err := t.file.SyncData(); err != nil {
		return fmt.Errorf("%w: %w", errSynced, err)
	}
	clear(t.dirty)
	return nil
}

// beforeWrite syncs when page i was written since the last sync, then
// marks it written.
func (t *table) beforeWrite(i uint32) error {
	if t.dirty == nil {
		t.dirty = make([]uint64, (t.pages+63)/64)
	}
	word, bit := i/64, uint64(1)<<(i%64)
	if t.dirty[word]&bit != 0 {
		if err := t.syncData(); err != nil {
			return err
		}
	}
	t.dirty[word] |= bit
	return nil
}

// pageOffset is where copy c of page i starts in the file.
func pageOffset(i uint32, c int) int64 {
	return tableStart + (2*int64(i)+int64(c))*blockSize
}

func tableSize(pages uint32) int64 { return pageOffset(pages, 0) }

// maxProbe bounds how many pages from its home an entry may sit, and so
// how many pages a lookup reads: an entry with no room that close makes
// the table grow (or, at its maximum, full) rather than probe on.
const maxProbe = 16

// probeLength is how many pages from home an entry may sit in a table of
// pages pages.
func probeLength(pages uint32) uint32 { return min(pages, maxProbe) }

// home is the page a probe hash starts at: a multiply-shift reduction, so
// any page count works.
func home(probe uint64, pages uint32) uint32 {
	return uint32((probe >> 32) * uint64(pages) >> 32)
}

// openTable opens an existing table file, or reports why it cannot be used.
func openTable(fsys vfs.FS, name string) (*table, error) {
	file, err := fsys.OpenFile(name, vfs.ReadWrite)
	if err != nil {
		return nil, err
	}
	t := &table{fsys: fsys, name: name, file: file}
	var image [2 * blockSize]byte
	if err := readFull(file, image[:], 0); err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("%w: reading the header: %w", ErrCorrupt, err)
	}
	if t.head, t.headerCopy, err = pickHeader(image[:]); err != nil {
		_ = file.Close()
		return nil, err
	}
	t.pages = t.head.pages
	size, err := file.Size()
	if err == nil && size < tableSize(t.head.pages) {
		err = fmt.Errorf("%w: %d bytes, %d pages need %d", ErrCorrupt, size, t.head.pages, tableSize(t.head.pages))
	}
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	return t, nil
}

// createTable writes a new, empty table of pages pages at name (replacing
// any file there): the file is sized (sparse zeros are empty pages), its
// header written, and both synced. The caller renames it into place when
// name is a temporary.
func createTable(fsys vfs.FS, name string, pages uint32, seed, covers uint64) (*table, error) {
	file, err := fsys.OpenFile(name, vfs.ReadWrite|vfs.Create)
	if err != nil {
		return nil, err
	}
	t := &table{fsys: fsys, name: name, file: file, pages: pages, headerCopy: 1,
		head: header{pages: pages, seed: seed, covers: covers}}
	if err := file.Truncate(0); err == nil {
		err = file.Truncate(tableSize(pages))
	}
	if err == nil {
		err = t.writeHeader(t.head)
	}
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	return t, nil
}

// writeHeader writes h (with the next sequence) into the other header
// copy and syncs it: the commit point of every page written before it.
func (t *table) writeHeader(h header) error {
	h.sequence = t.head.sequence + 1
	next := 1 - t.headerCopy
	var block [headerSize]byte
	encodeHeader(block[:], h)
	if _, err := t.file.WriteAt(block[:], int64(next)*blockSize); err != nil {
		return err
	}
	if err := t.file.Sync(); err != nil {
		return fmt.Errorf("%w: %w", errSynced, err)
	}
	t.head, t.headerCopy = h, next
	return nil
}

// readPage reads page i's two copies into pair (two blocks) and returns
// which one is current.
func (t *table) readPage(i uint32, pair []byte) (int, error) {
	if err := readFull(t.file, pair[:2*blockSize], pageOffset(i, 0)); err != nil {
		return 0, err
	}
	return pickPage(pair, i)
}

// lookup returns the last offset stored for fp, reading pages from its
// home on until one holds it or has a free slot, at most probeLength.
// pair is the caller's buffer of two blocks.
func (t *table) lookup(fp fingerprint, pair []byte) (uint64, bool, error) {
	pages := t.pages
	at := home(fp.probe, pages)
	for range probeLength(pages) {
		c, err := t.readPage(at, pair)
		if errors.Is(err, ErrCorrupt) {
			// A read racing two writes of the page by consecutive
			// flushes can see both copies mid-write; a second read
			// cannot race both again.
			c, err = t.readPage(at, pair)
		}
		if err != nil {
			return 0, false, err
		}
		page := pair[c*blockSize : (c+1)*blockSize]
		used := pageUsed(page)
		for k := range used {
			if s := readSlot(page, k); s.check == fp.check && s.probe == fp.probe {
				return s.last, true, nil
			}
		}
		if used < slotsPerPage {
			return 0, false, nil
		}
		at = (at + 1) % pages
	}
	return 0, false, nil
}

// merge writes entries into the table, each keeping the larger of its
// stored and new offset, without syncing. It returns the entries that
// found no room (every page of their probe length full, which also
// proves they are not in the table) and how many slots it filled.
func (t *table) merge(entries []entry) (left []entry, inserted int, err error) {
	pages := t.pages
	for n := range entries {
		entries[n].hops = 0
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Compare(home(a.fp.probe, pages), home(b.fp.probe, pages))
	})
	var carry []entry
	next, page := 0, uint32(0)
	for next < len(entries) || len(carry) > 0 {
		if len(carry) == 0 {
			page = home(entries[next].fp.probe, pages)
		}
		batch := carry
		for next < len(entries) && home(entries[next].fp.probe, pages) == page {
			batch = append(batch, entries[next])
			next++
		}
		var n int
		if carry, n, err = t.mergePage(page, batch); err != nil {
			return nil, inserted, err
		}
		inserted += n
		// An entry carried through its whole probe length has seen every
		// page it may sit in full.
		kept := carry[:0]
		for _, e := range carry {
			if e.hops++; e.hops >= probeLength(pages) {
				left = append(left, e)
				continue
			}
			kept = append(kept, e)
		}
		carry, page = kept, (page+1)%pages
	}
	return left, inserted, nil
}

// mergePage applies batch to page i and writes the result into the page's
// other copy. It returns the entries the page had no room for: each is
// neither in it nor placeable in it, so it belongs further along.
func (t *table) mergePage(i uint32, batch []entry) ([]entry, int, error) {
	c, err := t.readPage(i, t.pair[:])
	if err != nil {
		return nil, 0, err
	}
	current := t.pair[c*blockSize : (c+1)*blockSize]
	image := t.pair[(1-c)*blockSize : (2-c)*blockSize]
	generation := pageGeneration(current)
	copy(image, current)
	used, changed, inserted := pageUsed(image), false, 0
	var carry []entry
	for _, e := range batch {
		found := false
		for k := range used {
			s := readSlot(image, k)
			if s.check == e.fp.check && s.probe == e.fp.probe {
				if e.last > s.last {
					s.last = e.last
					writeSlot(image, k, s)
					changed = true
				}
				found = true
				break
			}
		}
		switch {
		case found:
		case used < slotsPerPage:
			writeSlot(image, used, slot{check: e.fp.check, probe: e.fp.probe, last: e.last})
			used, changed, inserted = used+1, true, inserted+1
		default:
			carry = append(carry, e)
		}
	}
	if !changed {
		return carry, 0, nil
	}
	sealPage(image, i, generation+1, used)
	if err := t.beforeWrite(i); err != nil {
		return nil, 0, err
	}
	if _, err := t.file.WriteAt(image, pageOffset(i, 1-c)); err != nil {
		return nil, 0, err
	}
	return carry, inserted, nil
}

// growBatchPages is how many pages' slots a growth moves at a time.
const growBatchPages = 4

// entriesOf calls visit with the slots of every page in order, a batch at
// a time (a page's worth of slots or more); the slice is reused.
func (t *table) entriesOf(visit func([]entry) error) error {
	var pair [2 * blockSize]byte
	batch := make([]entry, 0, growBatchPages*slotsPerPage)
	for i := range t.pages {
		c, err := t.readPage(i, pair[:])
		if err != nil {
			return err
		}
		page := pair[c*blockSize : (c+1)*blockSize]
		for k := range pageUsed(page) {
			s := readSlot(page, k)
			batch = append(batch, entry{fp: fingerprint{probe: s.probe, check: s.check}, last: s.last})
		}
		if len(batch) >= cap(batch)-slotsPerPage {
			if err := visit(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		return visit(batch)
	}
	return nil
}

// grow builds a table of pages pages holding every entry of t, beside it,
// synced; renames it over t's file; and returns it with the number of
// entries that found no room in it (possible only when it is not much
// larger: the caller then marks it full). The caller closes t once no
// reader can be using it. A crash leaves either file whole: the old one
// until the rename is durable, the new one after.
func (t *table) grow(pages uint32) (*table, int, error) {
	dir := path.Dir(t.name)
	temp := path.Join(dir, growFileName)
	grown, err := createTable(t.fsys, temp, pages, t.head.seed, t.head.covers)
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*table, int, error) {
		_ = grown.file.Close()
		_ = t.fsys.Remove(temp)
		return nil, 0, err
	}
	var entries uint64
	lost := 0
	err = t.entriesOf(func(batch []entry) error {
		left, inserted, err := grown.merge(batch)
		entries += uint64(inserted)
		lost += len(left)
		return err
	})
	if err != nil {
		return fail(err)
	}
	h := t.head
	h.pages, h.entries = pages, entries
	if err := grown.syncData(); err != nil {
		return fail(err)
	}
	if err := grown.writeHeader(h); err != nil {
		return fail(err)
	}
	if err := t.fsys.Rename(temp, t.name); err != nil {
		return fail(err)
	}
	if err := t.fsys.SyncDir(dir); err != nil {
		// The rename may or may not be durable; either file is whole.
		_ = grown.file.Close()
		return nil, 0, fmt.Errorf("%w: %w", errSynced, err)
	}
	grown.name = t.name
	return grown, lost, nil
}

func (t *table) close() error { return t.file.Close() }

// capacity is how many entries the table holds before it plans to grow.
func (t *table) capacity() uint64 { return uint64(t.pages) * loadSlots }

// readFull reads len(dst) bytes at off; bytes past the end of the file
// read as zeros (a table is sized up front, so a short file is damage the
// page checks catch).
func readFull(file vfs.File, dst []byte, off int64) error {
	n, err := file.ReadAt(dst, off)
	if errors.Is(err, io.EOF) {
		clear(dst[n:])
		return nil
	}
	return err
}
