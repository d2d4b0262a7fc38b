package keyindex

import (
	"errors"
	"fmt"
	"path"

	"github.com/ironbus/ironbus/segment/vfs"
)

// Flush writes what it may to the table: the frozen generation once
// every offset in it is durable (freezing the active one first when the
// frozen one is empty, and again after, so one call after Durable writes
// everything durable), then the updates Put left out, read back from the
// log (Options.ReadLog), and finally the header with the new
// CoversUpTo. Pages are synced before the header that vouches for them.
// A failed sync is kept (the index then refuses to answer until it is
// reopened); a write refused for space is returned and retried by the
// next Flush.
func (i *Index) Flush() error {
	i.flushMu.Lock()
	defer i.flushMu.Unlock()
	return i.flushLocked(false)
}

// REQUIRES: i.flushMu held.
func (i *Index) flushLocked(final bool) error {
	wrote := false
	for range 2 {
		written, err := i.writeFrozen()
		if err != nil {
			return i.fail(err)
		}
		if !written {
			break
		}
		wrote = true
	}
	caught, err := i.catchUp()
	if err != nil {
		return i.fail(err)
	}
	return i.fail(i.commit(wrote || caught, final))
}

// writeFrozen merges the frozen generation into the table when all of it
// is durable, and reports whether it did.
// REQUIRES: i.flushMu held.
func (i *Index) writeFrozen() (bool, error) {
	i.mu.Lock()
	if err := i.usableLocked(); err != nil {
		i.mu.Unlock()
		return false, err
	}
	if len(i.mu.frozen.entries) == 0 && len(i.mu.active.entries) > 0 {
		i.freezeLocked()
	}
	frozen := i.mu.frozen
	ready := len(frozen.entries) > 0 && frozen.last < i.mu.durable
	i.mu.Unlock()
	if !ready {
		return false, nil
	}
	// The frozen map is not changed while it is frozen: Put writes only
	// the active one, so it is read here without the lock.
	i.scratch = i.scratch[:0]
	for fp, last := range frozen.entries {
		i.scratch = append(i.scratch, entry{fp: fp, last: last})
	}
	if err := i.mergeEntries(i.scratch); err != nil {
		return false, err
	}
	i.mu.Lock()
	clear(i.mu.frozen.entries)
	i.mu.frozen.first, i.mu.frozen.last = 0, 0
	i.mu.Unlock()
	return true, nil
}

// catchUp reads back from the log the updates Put left out, once they
// are durable, merges them into the table and, when no update was left
// out meanwhile, clears the lag. It reports whether it wrote.
// REQUIRES: i.flushMu held.
func (i *Index) catchUp() (bool, error) {
	i.mu.Lock()
	lag, durable := i.mu.lag, i.mu.durable
	i.mu.Unlock()
	if !lag.on || lag.to >= durable || i.opts.ReadLog == nil {
		return false, nil
	}
	i.scratch = i.scratch[:0]
	var mergeErr error
	visit := func(subject []byte, offset uint64) {
		if mergeErr != nil || offset < lag.from || offset > lag.to {
			return
		}
		i.scratch = append(i.scratch, entry{fp: i.fingerprint(subject), last: offset})
		if len(i.scratch) >= i.opts.Overlay {
			mergeErr = i.mergeEntries(i.scratch)
			i.scratch = i.scratch[:0]
		}
	}
	if err := i.opts.ReadLog(lag.from, lag.to+1, visit); err != nil {
		return false, fmt.Errorf("keyindex: reading the log back from %d: %w", lag.from, err)
	}
	if mergeErr == nil && len(i.scratch) > 0 {
		mergeErr = i.mergeEntries(i.scratch)
	}
	if mergeErr != nil {
		return false, mergeErr
	}
	i.mu.Lock()
	if i.mu.lag.to == lag.to {
		i.mu.lag.on, i.mu.lag.from, i.mu.lag.to = false, 0, 0
		clear(i.mu.dropped)
	} else {
		i.mu.lag.from = lag.to + 1
	}
	i.mu.Unlock()
	return true, nil
}

// mergeEntries merges entries into the table, growing it first when they
// would pass its planned load, and again when some find no room. At
// MaxCapacity the entries without room are dropped and the table marked
// full. REQUIRES: i.flushMu held.
func (i *Index) mergeEntries(entries []entry) error {
	t := i.currentTable()
	if t.head.entries+uint64(len(entries)) > t.capacity() && t.pages < i.maxPages {
		var err error
		if t, err = i.grow(t); err != nil {
			return err
		}
	}
	for {
		left, inserted, err := t.merge(entries)
		t.head.entries += uint64(inserted)
		if err != nil || len(left) == 0 {
			return err
		}
		if t.pages >= i.maxPages {
			i.mu.Lock()
			i.mu.full = true
			i.mu.Unlock()
			return nil
		}
		if t, err = i.grow(t); err != nil {
			return err
		}
		entries = left
	}
}

// grow replaces the table with one twice its size (at most maxPages),
// holding every entry it held.
// REQUIRES: i.flushMu held.
func (i *Index) grow(t *table) (*table, error) {
	pages := min(2*t.pages, i.maxPages)
	grown, lost, err := t.grow(pages)
	if err != nil {
		return nil, fmt.Errorf("keyindex: growing to %d pages: %w", pages, err)
	}
	i.mu.Lock()
	i.mu.table = grown
	// Subjects that found no room are not in the table: a full table
	// answers ErrFull for them, never "none".
	i.mu.full = i.mu.full || lost > 0
	i.mu.Unlock()
	_ = t.close()
	return grown, nil
}

func (i *Index) currentTable() *table {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.mu.table
}

// commit syncs the pages written and writes the header with the offset
// the table now covers: the durable end, lowered to the first offset of
// each generation still in memory and of the updates left out. Without
// pages written, it writes the header only when that offset moved by
// CoverStep (or at Close). REQUIRES: i.flushMu held.
func (i *Index) commit(wrote, final bool) error {
	i.mu.Lock()
	covers := i.mu.durable
	for _, g := range []*generation{&i.mu.frozen, &i.mu.active} {
		if len(g.entries) > 0 {
			covers = min(covers, g.first)
		}
	}
	if i.mu.lag.on {
		covers = min(covers, i.mu.lag.from)
	}
	full := i.mu.full
	i.mu.Unlock()
	t := i.currentTable()
	moved := covers > t.head.covers
	due := wrote || full != t.head.full ||
		moved && (final || covers-t.head.covers >= i.opts.CoverStep)
	if !due {
		return nil
	}
	if wrote {
		if err := t.syncData(); err != nil {
			return err
		}
	}
	h := t.head
	h.covers, h.full = covers, full
	if err := t.writeHeader(h); err != nil {
		return err
	}
	i.mu.Lock()
	i.mu.covers = covers
	i.mu.Unlock()
	return nil
}

// fail keeps err when it leaves the table in doubt: anything but a write
// refused for space (vfs.IsNoSpace), which leaves both copies of every
// page as they were and is worth retrying.
func (i *Index) fail(err error) error {
	if err == nil || vfs.IsNoSpace(err) && !errors.Is(err, errSynced) {
		return err
	}
	i.mu.Lock()
	if i.mu.err == nil && !errors.Is(err, ErrClosed) {
		i.mu.err = fmt.Errorf("keyindex: %w", err)
	}
	i.mu.Unlock()
	return err
}

// errSynced marks a failed sync: never retried, whatever its cause.
var errSynced = errors.New("keyindex: sync failed")

// Close writes what is durable (a final Flush) and closes the file. An
// index found corrupt removes its file instead, so the next Open rebuilds
// it from the log.
func (i *Index) Close() error {
	i.flushMu.Lock()
	defer i.flushMu.Unlock()
	i.mu.Lock()
	if i.mu.closed {
		i.mu.Unlock()
		return nil
	}
	i.mu.Unlock()
	err := i.flushLocked(true)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.mu.closed = true
	corrupt := errors.Is(i.mu.err, ErrCorrupt)
	if cerr := i.mu.table.close(); cerr != nil && err == nil {
		err = cerr
	}
	if corrupt {
		name := path.Join(i.dir, tableFileName)
		if rerr := i.fsys.Remove(name); rerr == nil {
			_ = i.fsys.SyncDir(i.dir)
		}
		return nil
	}
	return err
}
