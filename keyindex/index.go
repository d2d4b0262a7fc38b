package keyindex

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/ironbus/ironbus/segment/vfs"
)

// Defaults of Options.
const (
	DefaultCapacity    = 64 << 10
	DefaultOverlay     = 4096
	DefaultDroppedBits = 64 << 10
	DefaultCoverStep   = 4096
	// maxGrowth bounds DefaultMaxCapacity: Capacity × maxGrowth.
	maxGrowth = 16
	// loadSlots is how many of a page's 127 slots the table plans to fill
	// (about 75 %) before it grows, so probes stay short.
	loadSlots = 95
)

// Options configure an Index. Zero values take the defaults.
type Options struct {
	// Capacity is how many subjects a new table is sized for
	// (DefaultCapacity).
	Capacity int
	// MaxCapacity is how far the table may grow, doubling, as subjects
	// arrive (Capacity × 16). Past it, new subjects are not indexed and
	// Last answers ErrFull for every subject it does not hold.
	MaxCapacity int
	// Overlay caps each of the two in-memory generations of updates not
	// yet in the table (DefaultOverlay entries).
	Overlay int
	// DroppedBits sizes the bitmap of subjects left out while both
	// generations were full (DefaultDroppedBits bits).
	DroppedBits int
	// LogEnd is the log's durable end at open (one past its last
	// committed record): a file covering past it describes another
	// history and is rebuilt.
	LogEnd uint64
	// ReadLog reads the committed records of the log in [from, to) and
	// calls visit with each one that has a subject, in offset order. The
	// index uses it to catch up with updates it had to leave out. Without
	// it those subjects answer ErrFull until the next open.
	ReadLog func(from, to uint64, visit func(subject []byte, offset uint64)) error
	// FlushDue, when set, is called by Put when a flush would make room
	// (a generation filled). It must not block.
	FlushDue func()
	// CoverStep is how far CoversUpTo must be able to move before a
	// flush with no page to write rewrites the header for it alone
	// (DefaultCoverStep offsets); Close always writes it.
	CoverStep uint64
	// Seed, when not zero, is the hash seed of a new table (tests); zero
	// draws a random one, so subjects cannot be chosen to collide.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.MaxCapacity <= 0 {
		o.MaxCapacity = o.Capacity * maxGrowth
	}
	o.MaxCapacity = max(o.MaxCapacity, o.Capacity)
	if o.Overlay <= 0 {
		o.Overlay = DefaultOverlay
	}
	if o.DroppedBits <= 0 {
		o.DroppedBits = DefaultDroppedBits
	}
	o.DroppedBits = (o.DroppedBits + 63) / 64 * 64
	if o.CoverStep == 0 {
		o.CoverStep = DefaultCoverStep
	}
	return o
}

// Memory per index (doc.go, "Memory"): the upper bounds MemoryBound adds.
const (
	// mapEntryBound is a generation's map entry, measured at 53 B live
	// and up to twice that just after the map doubles.
	mapEntryBound = 110
	// pageBuffers are the lookups' and the writer's page pairs and, while
	// the table grows, a page pair and growBatchPages pages of entries.
	pageBuffers = 3*2*blockSize + growBatchPages*slotsPerPage*32
)

// MemoryBound is the most heap one index holds under opts (I8): two
// generations of Overlay map entries, the writer's merge buffer of
// Overlay entries, the dropped-subject bitmap and the page buffers.
// Nothing in it grows with subjects, records or backlog.
func MemoryBound(opts Options) int64 {
	opts = opts.withDefaults()
	return int64(2*opts.Overlay*mapEntryBound + opts.Overlay*32 + opts.DroppedBits/8 + pageBuffers)
}

// pagesFor is the page count that holds capacity subjects at the planned
// load.
func pagesFor(capacity int) uint32 {
	return uint32(max(1, (capacity+loadSlots-1)/loadSlots))
}

// generation is a set of updates not yet in the table: each subject's
// last offset, and the range of offsets put into it.
type generation struct {
	entries     map[fingerprint]uint64
	first, last uint64
}

// Index is one partition log's subject index. Put, Last, Durable and
// Replay may be called from any goroutine; Flush and Close from one at a
// time (they take the writer's lock).
type Index struct {
	fsys     vfs.FS
	dir      string
	opts     Options
	seed     uint64
	maxPages uint32
	rebuilt  string

	// flushMu makes its holder the table's only writer; scratch is the
	// writer's merge buffer.
	flushMu sync.Mutex
	scratch []entry

	mu struct {
		sync.Mutex
		// table is replaced (never changed under a reader) when it grows.
		table *table
		// active takes Puts; frozen, when not empty, waits for durability
		// and a flush. Lookups read active, then frozen, then the table.
		active, frozen generation
		durable        uint64
		covers         uint64
		full           bool
		// lag, when on, says Puts in [from, to] were left out; dropped
		// has the bit of each of their subjects.
		lag struct {
			on       bool
			from, to uint64
		}
		dropped []uint64
		err     error
		closed  bool
		// pair is the lookups' page buffer.
		pair [2 * blockSize]byte
	}
}

// Open opens the index kept in dir (creating the directory and the table
// as needed). A table that is missing, damaged, from a newer format,
// covering past opts.LogEnd, or full below a raised MaxCapacity is
// replaced by an empty one; Rebuilt says why. The caller then replays the
// log from CoversUpTo to its durable end (Replay) before serving.
func Open(fsys vfs.FS, dir string, opts Options) (*Index, error) {
	opts = opts.withDefaults()
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("keyindex: %w", err)
	}
	if err := removeLeftover(fsys, dir); err != nil {
		return nil, fmt.Errorf("keyindex: %w", err)
	}
	i := &Index{fsys: fsys, dir: dir, opts: opts, maxPages: pagesFor(opts.MaxCapacity)}
	t, reason := i.openExisting()
	if t == nil {
		var err error
		if t, err = i.createEmpty(); err != nil {
			return nil, fmt.Errorf("keyindex: creating %s: %w", path.Join(dir, tableFileName), err)
		}
		i.rebuilt = reason
	}
	i.seed = t.head.seed
	i.mu.table, i.mu.covers, i.mu.full = t, t.head.covers, t.head.full
	i.mu.durable = t.head.covers
	i.mu.active.entries = map[fingerprint]uint64{}
	i.mu.frozen.entries = map[fingerprint]uint64{}
	i.mu.dropped = make([]uint64, opts.DroppedBits/64)
	return i, nil
}

// openExisting opens the table on disk when it can be trusted, else
// returns nil and why not.
func (i *Index) openExisting() (*table, string) {
	t, err := openTable(i.fsys, path.Join(i.dir, tableFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "no index file"
	case err != nil:
		return nil, err.Error()
	case t.head.covers > i.opts.LogEnd:
		_ = t.close()
		return nil, fmt.Sprintf("the index covers offsets up to %d, past the log's end %d", t.head.covers, i.opts.LogEnd)
	case t.head.full && t.pages < i.maxPages:
		_ = t.close()
		return nil, "the index was full and may grow now"
	}
	return t, ""
}

func (i *Index) createEmpty() (*table, error) {
	seed := i.opts.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	name := path.Join(i.dir, tableFileName)
	t, err := createTable(i.fsys, name, pagesFor(i.opts.Capacity), seed, 0)
	if err != nil {
		return nil, err
	}
	if err := i.fsys.SyncDir(i.dir); err != nil {
		_ = t.close()
		return nil, err
	}
	return t, nil
}

// removeLeftover deletes the temporary of a growth a crash interrupted.
func removeLeftover(fsys vfs.FS, dir string) error {
	name := path.Join(dir, growFileName)
	if _, err := fsys.Stat(name); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := fsys.Remove(name); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// Rebuilt says why Open started from an empty table ("" when it reused
// the file): the caller logs it.
func (i *Index) Rebuilt() string { return i.rebuilt }

func (i *Index) fingerprint(subject []byte) fingerprint {
	h := xxh3.Hash128Seed(subject, i.seed)
	fp := fingerprint{probe: h.Lo, check: h.Hi}
	if fp.check == 0 {
		fp.check = 1 // zero marks an empty slot
	}
	return fp
}

// Last returns the offset of the last record of subject: found is false
// when the log has none (as far as the index knows, which is its whole
// history since the table was built). ErrFull (retryable) when the index
// cannot be sure; another error when it is broken.
func (i *Index) Last(subject []byte) (offset uint64, found bool, err error) {
	fp := i.fingerprint(subject)
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.usableLocked(); err != nil {
		return 0, false, err
	}
	if last, ok := i.mu.active.entries[fp]; ok {
		return last, true, nil
	}
	if i.mu.lag.on && i.droppedLocked(fp) {
		return 0, false, fmt.Errorf("%w: updates of this subject were left out while the overlay was full; the index is catching up from the log (offsets %d..%d)",
			ErrFull, i.mu.lag.from, i.mu.lag.to)
	}
	if last, ok := i.mu.frozen.entries[fp]; ok {
		return last, true, nil
	}
	last, ok, err := i.mu.table.lookup(fp, i.mu.pair[:])
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			i.mu.err = err
		}
		return 0, false, fmt.Errorf("keyindex: reading the table: %w", err)
	}
	if ok {
		return last, true, nil
	}
	if i.mu.full {
		return 0, false, fmt.Errorf("%w: the table holds its maximum of %d subjects and this one is not among them", ErrFull, i.opts.MaxCapacity)
	}
	return 0, false, nil
}

// REQUIRES: i.mu held.
func (i *Index) usableLocked() error {
	if i.mu.closed {
		return ErrClosed
	}
	return i.mu.err
}

// Put notes that the record at offset has subject. Calls come in offset
// order (the partition's append lock orders them), before the record can
// be named durable through Durable. It never does I/O: when both
// generations are full it leaves the update out, and Last answers ErrFull
// for that subject until a flush has caught up from the log.
func (i *Index) Put(subject []byte, offset uint64) {
	fp := i.fingerprint(subject)
	i.mu.Lock()
	if i.usableLocked() != nil {
		i.mu.Unlock()
		return
	}
	_, due := i.putLocked(fp, offset)
	i.mu.Unlock()
	if due && i.opts.FlushDue != nil {
		i.opts.FlushDue()
	}
}

// putLocked records fp at offset. stored is false when it was left out;
// due when a flush is now needed. REQUIRES: i.mu held.
func (i *Index) putLocked(fp fingerprint, offset uint64) (stored, due bool) {
	active := &i.mu.active
	if last, ok := active.entries[fp]; ok {
		active.entries[fp] = max(last, offset)
		// first bounds CoversUpTo: an out-of-order Put lowers it.
		active.first, active.last = min(active.first, offset), max(active.last, offset)
		return true, false
	}
	if len(active.entries) >= i.opts.Overlay {
		if len(i.mu.frozen.entries) > 0 {
			i.dropLocked(fp, offset)
			return false, true
		}
		i.freezeLocked()
		due = true
	}
	if len(active.entries) == 0 || offset < active.first {
		active.first = offset
	}
	active.entries[fp] = offset
	active.last = max(active.last, offset)
	return true, due
}

// freezeLocked turns the active generation into the frozen one (empty
// before). REQUIRES: i.mu held.
func (i *Index) freezeLocked() {
	i.mu.active, i.mu.frozen = i.mu.frozen, i.mu.active
	i.mu.active.first, i.mu.active.last = 0, 0
}

// REQUIRES: i.mu held.
func (i *Index) dropLocked(fp fingerprint, offset uint64) {
	if !i.mu.lag.on {
		i.mu.lag.on, i.mu.lag.from, i.mu.lag.to = true, offset, offset
	}
	i.mu.lag.from, i.mu.lag.to = min(i.mu.lag.from, offset), max(i.mu.lag.to, offset)
	bit := fp.check % uint64(len(i.mu.dropped)*64)
	i.mu.dropped[bit/64] |= 1 << (bit % 64)
}

// REQUIRES: i.mu held.
func (i *Index) droppedLocked(fp fingerprint) bool {
	bit := fp.check % uint64(len(i.mu.dropped)*64)
	return i.mu.dropped[bit/64]&(1<<(bit%64)) != 0
}

// Durable says every record below end is durable and, if it has a
// subject, has been passed to Put or Replay: the caller reads the log's
// committed mark under the lock it stages and Puts under. Only updates
// below it are ever written to the table.
func (i *Index) Durable(end uint64) {
	i.mu.Lock()
	i.mu.durable = max(i.mu.durable, end)
	i.mu.Unlock()
}

// Pending reports whether updates wait in memory for the log to become
// durable (a frozen generation, or updates left out): a flusher then
// comes back soon rather than at its next tick.
func (i *Index) Pending() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.mu.frozen.entries) > 0 || i.mu.lag.on
}

// CoversUpTo is the offset the table on disk covers up to (exclusive):
// every record below it is reflected there. Recovery replays from it.
func (i *Index) CoversUpTo() uint64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.mu.covers
}

// Replay feeds a record read back from the durable log at open (from
// CoversUpTo to the log's durable end, in offset order). Unlike Put it
// may write to the table, to make room; an error is kept and returned by
// the next Flush.
func (i *Index) Replay(subject []byte, offset uint64) {
	fp := i.fingerprint(subject)
	for attempt := 0; ; attempt++ {
		i.mu.Lock()
		i.mu.durable = max(i.mu.durable, offset+1)
		if i.usableLocked() != nil {
			i.mu.Unlock()
			return
		}
		if len(i.mu.active.entries) < i.opts.Overlay || len(i.mu.frozen.entries) == 0 || attempt > 0 {
			i.putLocked(fp, offset)
			i.mu.Unlock()
			return
		}
		i.mu.Unlock()
		_ = i.Flush()
	}
}
