package dedup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// Defaults and bounds.
const (
	// DefaultMaxIDs is the count cap when Options.MaxIDs is zero.
	DefaultMaxIDs = 100_000
	// DefaultGenerationIDs caps the active generation: it is sealed to
	// disk when it holds this many ids (or MaxIDs/4, if smaller).
	DefaultGenerationIDs = 3072
	// closeWait bounds how long Close waits for the log to make the
	// active generation's records durable before it writes what is.
	closeWait = 5 * time.Second
)

// Options configure a Window.
type Options struct {
	// Window is how long an id is remembered, in broker time.
	Window time.Duration
	// MaxIDs caps the ids remembered; beyond it the oldest are forgotten
	// early, and counted (DefaultMaxIDs when zero).
	MaxIDs int
	// Now reads broker time.
	Now func() time.Duration
	// Durable blocks until every offset below end is durable (or can no
	// longer become so, or ctx ends) and returns the partition's durable
	// end; with end 0 it returns at once. A generation on disk holds only
	// ids of durable records. Nil: every offset is durable.
	Durable func(ctx context.Context, end uint64) uint64
	// GenerationIDs caps the active generation (DefaultGenerationIDs, at
	// most MaxIDs/4, when zero).
	GenerationIDs int
	// Logger reports dropped generation files and failed writes.
	Logger *slog.Logger
}

// Stats are a window's counters.
type Stats struct {
	IDs          int    // ids remembered, in RAM and on disk
	Generations  int    // sealed generations on disk
	EvictedEarly uint64 // ids forgotten before their window ended (count cap, a lost file)
	Duplicates   uint64 // lookups that found an id
	Errors       uint64 // generation reads and writes that failed
}

// Window is one partition's message-id window. Lookup, Insert and Replay
// are called with the partition's append lock held, one at a time; a
// background goroutine writes sealed generations and deletes old ones.
type Window struct {
	fs     vfs.FS
	dir    string
	opts   Options
	ttl    time.Duration // opts.Window
	seal   time.Duration // the active generation's age at which it seals
	logger *slog.Logger

	// Under the caller's lock.
	active   *table
	readBuf  []byte
	replayed uint64 // the log offset Replay has reached

	mu sync.Mutex
	// sealing is the generation being written (nil when none); sealed
	// closes when it is done.
	sealing *table
	sealed  chan struct{}
	spare   *table // a table the writer finished with, for the next active one
	// gens are the sealed generations, oldest first; the slice is
	// replaced, never changed in place, so a Lookup may read a snapshot.
	gens       []*generation
	nextSeq    uint64
	coversUpTo uint64
	// unsealedFrom: the lowest offset whose id a seal left out because
	// its record was not durable in time; the covers file never passes
	// it (MaxUint64: none).
	unsealedFrom uint64
	onDisk       int // ids in gens plus sealing
	closed       bool

	activeIDs    atomic.Int64
	evictedEarly atomic.Uint64
	duplicates   atomic.Uint64
	errors       atomic.Uint64
	work         sync.WaitGroup
}

// generation is a sealed generation: its file and what of it RAM keeps.
type generation struct {
	file string
	decodedRun
	// clamp: entry times above it read as it. A lost clock file restarts
	// broker time below what the file holds; such ids then live one
	// window from the restart, not until the clock catches up.
	clamp time.Duration
}

func (g *generation) timeOf(e entry) time.Duration {
	return min(g.header.minTime+time.Duration(e.age)*time.Millisecond, g.clamp)
}

// Open opens (creating it if needed) the window kept in dir: it loads
// every sealed generation, drops damaged or expired ones, and applies the
// count cap. The ids of records from CoversUpTo on are then replayed
// from the log (Replay) before the window serves.
func Open(fsys vfs.FS, dir string, opts Options) (*Window, error) {
	if opts.Window <= 0 {
		return nil, fmt.Errorf("dedup: window %v: want a positive duration", opts.Window)
	}
	if opts.Now == nil {
		return nil, errors.New("dedup: Options.Now is required")
	}
	if opts.MaxIDs <= 0 {
		opts.MaxIDs = DefaultMaxIDs
	}
	opts.GenerationIDs = generationIDs(opts.MaxIDs, opts.GenerationIDs)
	if opts.Durable == nil {
		opts.Durable = func(context.Context, uint64) uint64 { return math.MaxUint64 }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Window{fs: fsys, dir: dir, opts: opts, ttl: opts.Window, seal: max(opts.Window/4, time.Millisecond),
		logger: opts.Logger.With("dedup", dir), unsealedFrom: math.MaxUint64}
	if err := w.load(); err != nil {
		return nil, err
	}
	w.replayed = w.coversUpTo
	return w, nil
}

// generationIDs is the active generation's cap: at most a quarter of
// maxIDs, so the count cap always has an older generation to drop.
func generationIDs(maxIDs, asked int) int {
	if asked <= 0 {
		asked = DefaultGenerationIDs
	}
	return max(1, min(asked, maxIDs/4, maxGenerationIDs))
}

// MemoryBytes is the most RAM one window holds with this count cap and
// the default generation size (I8): two active-generation tables (one
// being written), the sorted copy and file image of a seal, and the
// Bloom filters of every generation.
func MemoryBytes(maxIDs int) int64 {
	if maxIDs <= 0 {
		maxIDs = DefaultMaxIDs
	}
	g := generationIDs(maxIDs, 0)
	tables := 2 * int64(tableSlots(g)) * entrySize
	seal := 2 * int64(g) * entrySize
	blooms := int64(maxIDs+2*g)*bloomBitsPerID/8 + int64(maxIDs/g+3)*256 + blockBytes
	return tables + seal + blooms
}

// CoversUpTo is the log offset from which ids are not in the sealed
// generations: after Open, replay the log from there (or from its first
// offset, if higher) to its durable end.
func (w *Window) CoversUpTo() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.coversUpTo
}

// Lookup returns the offset of the first record published with id inside
// the window. A hit does not extend the id's window.
func (w *Window) Lookup(id []byte) (offset uint64, found bool) {
	hash := hashID(id)
	horizon := w.opts.Now() - w.ttl // an id remembered at or before it has expired
	if w.active != nil {
		if offset, at, ok := w.active.find(hash); ok && at > horizon {
			w.duplicates.Add(1)
			return offset, true
		}
	}
	w.mu.Lock()
	sealing, gens := w.sealing, w.gens
	w.mu.Unlock()
	if sealing != nil {
		if offset, at, ok := sealing.find(hash); ok && at > horizon {
			w.duplicates.Add(1)
			return offset, true
		}
	}
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if min(g.header.maxTime, g.clamp) <= horizon {
			break // this one and every older one have expired
		}
		if !g.bloom.has(hash) {
			continue
		}
		e, ok := w.search(g, hash)
		if ok && g.timeOf(e) > horizon {
			w.duplicates.Add(1)
			return g.header.baseOffset + uint64(e.offset), true
		}
	}
	return 0, false
}

// search reads the one block of g that may hold hash. A read error
// answers "not found": the id is then stored again, never refused.
func (w *Window) search(g *generation, hash uint64) (entry, bool) {
	block := sort.Search(len(g.fences), func(i int) bool { return g.fences[i] > hash }) - 1
	if block < 0 {
		return entry{}, false
	}
	file, err := w.fs.OpenFile(g.file, vfs.ReadOnly)
	if err != nil {
		w.readFailed(g, err)
		return entry{}, false
	}
	defer file.Close()
	start := runHeaderSize + block*blockBytes
	size := min(blockBytes, g.header.crcsAt()-start)
	if cap(w.readBuf) < blockBytes {
		w.readBuf = make([]byte, blockBytes)
	}
	data := w.readBuf[:size]
	if _, err := file.ReadAt(data, int64(start)); err != nil {
		w.readFailed(g, err)
		return entry{}, false
	}
	e, ok, err := searchBlock(data, g.crcs[block], hash)
	if err != nil {
		w.readFailed(g, err)
	}
	return e, ok
}

func (w *Window) readFailed(g *generation, err error) {
	w.errors.Add(1)
	w.logger.Warn("a message-id generation could not be read; its ids may be stored again", "file", g.file, "error", err.Error())
}

// Insert remembers id at offset from now. The caller has seen Lookup
// miss; offsets arrive in ascending order.
func (w *Window) Insert(id []byte, offset uint64) {
	now := w.opts.Now()
	if w.active == nil {
		w.active = w.takeTable()
	}
	if w.active.count > 0 && (!w.active.fits(offset, now) || now-w.active.baseTime >= w.seal) {
		w.sealActive(context.Background())
	}
	before := w.active.count
	w.active.put(hashID(id), offset, now)
	if w.active.count != before {
		w.activeIDs.Add(1)
	}
	w.replayed = max(w.replayed, offset+1)
	w.trim()
}

// Maintain seals the active generation once it is a quarter window old,
// so what a crash leaves to replay stays recent however few ids arrive,
// and forgets generations that expired. Call it now and then (the broker:
// every checkpoint interval) with the append lock held.
func (w *Window) Maintain() {
	if w.active != nil && w.active.count > 0 && w.opts.Now()-w.active.baseTime >= w.seal {
		w.sealActive(context.Background())
	}
	w.retireExpired(true)
}

// Replay remembers the id of a record found in the log at or after
// CoversUpTo, as Insert does; records below what was replayed already are
// skipped.
func (w *Window) Replay(id []byte, offset uint64) {
	if offset < w.replayed {
		return
	}
	w.Insert(id, offset)
}

// Seal writes the active generation now and waits until it, and any
// generation still being written, is on disk (each once its records are
// durable, or ctx ends): every id inserted so far then lives in the
// files, not in the log's tail a crash would replay. Call it, with the
// append lock held, before deleting records whose ids the window keeps
// (a purge).
func (w *Window) Seal(ctx context.Context) {
	if w.active != nil && w.active.count > 0 {
		w.sealActive(ctx)
	}
	w.mu.Lock()
	for w.sealing != nil {
		done := w.sealed
		w.mu.Unlock()
		<-done
		w.mu.Lock()
	}
	w.mu.Unlock()
}

// takeTable returns an empty table: the spare one the writer gave back,
// or a new one.
func (w *Window) takeTable() *table {
	w.mu.Lock()
	t := w.spare
	w.spare = nil
	w.mu.Unlock()
	if t == nil {
		return newTable(w.opts.GenerationIDs)
	}
	t.reset()
	return t
}

// sealActive hands the active generation to the writer and starts an
// empty one. One generation is written at a time: while the previous is
// still being written, this waits (the partition's appends with it).
func (w *Window) sealActive(ctx context.Context) {
	w.mu.Lock()
	for w.sealing != nil {
		done := w.sealed
		w.mu.Unlock()
		<-done
		w.mu.Lock()
	}
	t := w.active
	w.sealing, w.sealed = t, make(chan struct{})
	w.onDisk += t.count
	w.mu.Unlock()
	w.activeIDs.Add(-int64(t.count))
	w.active = w.takeTable()
	w.work.Add(1)
	go w.write(ctx, t)
}

// write seals t to disk once its records are durable, then adds it to the
// generations and retires what expired.
func (w *Window) write(ctx context.Context, t *table) {
	defer w.work.Done()
	durable := w.opts.Durable(ctx, t.maxOffset+1)
	entries := t.sorted(durable)
	var g *generation
	var err error
	if len(entries) > 0 {
		g, err = w.writeGeneration(t, entries, min(t.maxOffset+1, durable))
	}
	if err != nil {
		w.errors.Add(1)
		w.evictedEarly.Add(uint64(len(entries)))
		w.logger.Error("a message-id generation was not written; its ids are forgotten", "ids", len(entries), "error", err.Error())
	}
	w.mu.Lock()
	w.onDisk -= t.count
	if len(entries) < t.count {
		w.unsealedFrom = min(w.unsealedFrom, durable)
	}
	if g != nil {
		w.gens = append(w.gens[:len(w.gens):len(w.gens)], g)
		w.onDisk += g.header.count
		w.coversUpTo = max(w.coversUpTo, g.header.coversUpTo)
	}
	w.sealing, w.spare = nil, t
	close(w.sealed)
	w.mu.Unlock()
	w.retireExpired(false)
}

// writeGeneration writes one generation file crash-safely.
func (w *Window) writeGeneration(t *table, entries []entry, coversUpTo uint64) (*generation, error) {
	f := newBloom(len(entries))
	for _, e := range entries {
		f.add(e.hash)
	}
	w.mu.Lock()
	seq := w.nextSeq
	w.nextSeq++
	w.mu.Unlock()
	header := runHeader{seq: seq, minTime: t.baseTime, maxTime: t.maxTime, coversUpTo: coversUpTo, baseOffset: t.baseOffset}
	image := encodeRun(header, entries, f)
	run, err := decodeRun(image)
	if err != nil {
		return nil, err // a bug: what we encode must decode
	}
	if err := vfs.MkdirAllDurable(w.fs, w.dir); err != nil {
		return nil, err
	}
	file := path.Join(w.dir, fmt.Sprintf("%s%016x%s", runFilePrefix, seq, runFileSuffix))
	if err := vfs.WriteFileAtomic(w.fs, file, image); err != nil {
		return nil, err
	}
	return &generation{file: file, decodedRun: run, clamp: math.MaxInt64}, nil
}

// trim applies the count cap: while more ids are remembered than MaxIDs,
// the oldest sealed generation is forgotten, its live ids counted.
func (w *Window) trim() {
	w.mu.Lock()
	var retired []*generation
	for len(w.gens) > 0 && int(w.activeIDs.Load())+w.onDisk > w.opts.MaxIDs {
		g := w.gens[0]
		w.gens = w.gens[1:len(w.gens):len(w.gens)]
		w.onDisk -= g.header.count
		retired = append(retired, g)
	}
	w.mu.Unlock()
	if len(retired) > 0 {
		w.work.Add(1)
		go w.retire(retired, w.opts.Now()-w.ttl, true)
	}
}

// retireExpired forgets every generation whose ids have all expired,
// deleting their files on a goroutine of its own when async.
func (w *Window) retireExpired(async bool) {
	horizon := w.opts.Now() - w.ttl
	w.mu.Lock()
	var retired []*generation
	for len(w.gens) > 0 && min(w.gens[0].header.maxTime, w.gens[0].clamp) <= horizon {
		g := w.gens[0]
		w.gens = w.gens[1:len(w.gens):len(w.gens)]
		w.onDisk -= g.header.count
		retired = append(retired, g)
	}
	w.mu.Unlock()
	switch {
	case len(retired) == 0:
	case async:
		w.work.Add(1)
		go w.retire(retired, horizon, false)
	default:
		w.work.Add(1)
		w.retire(retired, horizon, false)
	}
}

// retire deletes the files of forgotten generations, oldest first;
// early, it counts the ids that were still inside their window.
func (w *Window) retire(gens []*generation, horizon time.Duration, early bool) {
	defer w.work.Done()
	for _, g := range gens {
		if early {
			w.evictedEarly.Add(uint64(w.liveIDs(g, horizon)))
		}
		if err := w.fs.Remove(g.file); err != nil {
			w.logger.Warn("a forgotten message-id generation was not deleted", "file", g.file, "error", err.Error())
		}
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		w.logger.Warn("syncing the message-id directory", "error", err.Error())
	}
}

// liveIDs counts the ids of g remembered after horizon, reading the file
// only when some but not all of them are.
func (w *Window) liveIDs(g *generation, horizon time.Duration) int {
	switch {
	case min(g.header.maxTime, g.clamp) <= horizon:
		return 0
	case min(g.header.minTime, g.clamp) > horizon:
		return g.header.count
	}
	image, err := vfs.ReadFile(w.fs, g.file)
	if err != nil || len(image) < g.header.crcsAt() {
		return g.header.count
	}
	live := 0
	for _, e := range blockEntriesIn(image[runHeaderSize:g.header.crcsAt()]) {
		if g.timeOf(e) > horizon {
			live++
		}
	}
	return live
}

// Stats returns the window's counters.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{IDs: int(w.activeIDs.Load()) + w.onDisk, Generations: len(w.gens), EvictedEarly: w.evictedEarly.Load(),
		Duplicates: w.duplicates.Load(), Errors: w.errors.Load()}
}

// Close seals the active generation (once its records are durable, for
// at most a few seconds), waits for every file write, and records that
// the log up to its durable end is covered, so the next Open replays
// nothing. Call it once appends have stopped.
func (w *Window) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if w.active != nil && w.active.count > 0 {
		w.sealActive(ctx)
	}
	w.work.Wait()
	if err := w.persistCovers(w.opts.Durable(ctx, 0)); err != nil {
		w.errors.Add(1)
		w.logger.Warn("the message-id window's covers file was not written; the log tail is replayed at the next open", "error", err.Error())
	}
	if w.errors.Load() > 0 {
		return fmt.Errorf("dedup: %s: %d generation reads or writes failed (see the log)", w.dir, w.errors.Load())
	}
	return nil
}
