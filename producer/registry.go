package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"sync"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The registry file, <data>/producers.log, little-endian:
//
//	header   magic "IBPRODLG" @0 · version u32 (1) @8 · reserved u32 @12
//	entry    body length u32 · CRC32C of the body u32 · body
//	body     kind u8 (1: init) · id u64 · epoch u32 · generation u64 ·
//	         name length u16 · name
//
// Entries only ever append; each Init writes one and syncs it before it
// returns. The generation counts Inits over the life of the directory, so
// it rises from each entry to the next (with holes where a rewrite
// dropped superseded entries). Reading stops at the
// first entry that is short, fails its CRC, or does not follow from the
// ones before it (a torn or damaged tail): nothing after it is trusted.
const (
	RegistryFileName = "producers.log"

	registryMagic        = "IBPRODLG"
	registryVersion      = 1
	registryHeaderSize   = 16
	registryEntryHeader  = 8
	registryKindInit     = 1
	registryBodyFixed    = 1 + 8 + 4 + 8 + 2
	registryMaxEntryBody = registryBodyFixed + MaxNameBytes
)

// MaxNameBytes bounds a producer name: room for a client's name (128
// bytes on the wire) scoped by an identity's name (256) and a separator.
const MaxNameBytes = 512

// DefaultMaxNames is the registry's name cap when RegistryOptions leaves
// it zero.
const DefaultMaxNames = 512

// ErrRegistryFormat reports a registry file this binary cannot read: a
// foreign file, or a newer format version.
var ErrRegistryFormat = errors.New("producer: registry file format")

// ErrEpochsExhausted refuses an Init of a name whose epoch reached the
// largest value an epoch can hold.
var ErrEpochsExhausted = errors.New("producer: epochs exhausted")

// RegistryOptions bound a Registry.
type RegistryOptions struct {
	// MaxNames caps the names the registry holds (DefaultMaxNames when
	// zero): a new name beyond it evicts the name initialised longest ago
	// (never the holder of the newest id). The cap bounds both the
	// registry's memory (at most about 720 B per name, with a full-length
	// name) and its file (at most twice the live entries).
	MaxNames int
	// IDOf, when set, gives a new name its id instead of the next one:
	// the members of a cluster derive every name's id from the name, so a
	// producer has one id on every node and a partition's new leader
	// recognises its records (epochs stay each node's own).
	IDOf func(name string) uint64
}

// ErrIDTaken: IDOf gave a new name an id another name holds.
var ErrIDTaken = errors.New("producer: the id derived from the name is another name's")

// Registry maps producer names to ids and epochs, durably. It is the
// authority for both: an id is never issued twice, and an epoch returned
// by Init is on disk before Init returns. Safe for concurrent use.
type Registry struct {
	fsys vfs.FS
	dir  string
	max  int
	idOf func(name string) uint64

	mu      sync.RWMutex // read-locked by the lookups of the append path
	file    vfs.File
	end     int64 // where the next entry goes
	names   map[string]*registration
	ids     map[uint64]*registration
	lastID  uint64
	last    uint64 // generation of the latest Init
	entries int    // entries in the file, live and dead
	evicted uint64 // names dropped to make room for new ones
	failed  error  // a write or sync failed: no more Inits (sticky)
	closed  bool
}

// registration is one name's current incarnation.
type registration struct {
	name       string
	id         uint64
	epoch      uint32
	generation uint64
}

// OpenRegistry opens the registry file in dir; the first Init creates it
// when there is none. A torn or damaged tail is cut off by rewriting the
// file with the entries before it.
func OpenRegistry(fsys vfs.FS, dir string, opts RegistryOptions) (*Registry, error) {
	if opts.MaxNames <= 0 {
		opts.MaxNames = DefaultMaxNames
	}
	r := &Registry{fsys: fsys, dir: dir, max: opts.MaxNames, idOf: opts.IDOf,
		names: map[string]*registration{}, ids: map[uint64]*registration{}}
	name := path.Join(dir, RegistryFileName)
	image, err := vfs.ReadFile(fsys, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, nil // the first Init creates the file
	case err != nil:
		return nil, fmt.Errorf("producer: reading %s: %w", name, err)
	}
	valid, err := r.load(image)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRegistryFormat, name, err)
	}
	// A tail beyond the valid entries is what a crash mid-Init leaves (the
	// Init never returned): rewriting drops it before anything appends
	// after it. So does a file with more dead entries than live ones.
	if valid < int64(len(image)) || r.compactionDue() {
		if err := r.rewriteLocked(); err != nil {
			return nil, err
		}
		return r, nil
	}
	file, err := fsys.OpenFile(name, vfs.ReadWrite)
	if err != nil {
		return nil, fmt.Errorf("producer: opening %s: %w", name, err)
	}
	r.file, r.end = file, valid
	return r, nil
}

// load applies the valid entries of image and returns where they end.
// Only a missing or foreign header is an error: a bad entry ends the
// valid prefix.
func (r *Registry) load(image []byte) (int64, error) {
	if len(image) < registryHeaderSize {
		if len(image) == 0 || isPrefix(image, []byte(registryMagic)) {
			return 0, nil // a crash while the file was first written
		}
		return 0, errors.New("short header")
	}
	if string(image[:8]) != registryMagic {
		return 0, errors.New("bad magic")
	}
	if version := binary.LittleEndian.Uint32(image[8:12]); version != registryVersion {
		return 0, fmt.Errorf("version %d (this binary knows %d)", version, registryVersion)
	}
	at := int64(registryHeaderSize)
	for {
		entry, size, ok := decodeEntry(image[at:])
		if !ok || !r.follows(entry) {
			return at, nil
		}
		r.apply(entry)
		r.entries++
		at += size
	}
}

func isPrefix(short, of []byte) bool {
	return len(short) <= len(of) && string(of[:len(short)]) == string(short)
}

// decodeEntry decodes the entry at the start of data; false when it is
// short, fails its CRC or does not parse.
func decodeEntry(data []byte) (registration, int64, bool) {
	if len(data) < registryEntryHeader {
		return registration{}, 0, false
	}
	length := binary.LittleEndian.Uint32(data[0:4])
	if length < registryBodyFixed || length > registryMaxEntryBody || uint64(len(data)-registryEntryHeader) < uint64(length) {
		return registration{}, 0, false
	}
	body := data[registryEntryHeader : registryEntryHeader+int(length)]
	if format.CRC(body) != binary.LittleEndian.Uint32(data[4:8]) || body[0] != registryKindInit {
		return registration{}, 0, false
	}
	entry := registration{
		id:         binary.LittleEndian.Uint64(body[1:9]),
		epoch:      binary.LittleEndian.Uint32(body[9:13]),
		generation: binary.LittleEndian.Uint64(body[13:21]),
	}
	nameLength := int(binary.LittleEndian.Uint16(body[21:23]))
	if nameLength != len(body)-registryBodyFixed || validateName(body[registryBodyFixed:]) != nil {
		return registration{}, 0, false
	}
	entry.name = string(body[registryBodyFixed:])
	return entry, registryEntryHeader + int64(length), true
}

// follows reports whether entry can come after the entries applied so
// far: a higher generation, the same id and a higher epoch for a known
// name, an id no other name has for a new one. (A rewrite lists entries
// by generation, so ids need not rise from one entry to the next.)
func (r *Registry) follows(entry registration) bool {
	if entry.generation <= r.last || entry.id == 0 || entry.epoch == 0 {
		return false
	}
	if known, ok := r.names[entry.name]; ok {
		return known.id == entry.id && entry.epoch > known.epoch
	}
	// A new name never takes an id issued before: ids only rise, also
	// past names evicted since.
	_, taken := r.ids[entry.id]
	return !taken
}

// apply adds an entry. A new name beyond the cap first evicts the name
// initialised longest ago, the same way when the file is read back as
// when Init ran, so the two always agree.
func (r *Registry) apply(entry registration) {
	if known, ok := r.names[entry.name]; ok {
		known.epoch, known.generation = entry.epoch, entry.generation
	} else {
		if len(r.names) >= r.max {
			r.evictOldest()
		}
		reg := entry
		r.names[reg.name] = &reg
		r.ids[reg.id] = &reg
		r.lastID = max(r.lastID, reg.id)
	}
	r.last = entry.generation
}

func appendEntry(dst []byte, entry registration) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(registryBodyFixed+len(entry.name)))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the CRC, below
	dst = append(dst, registryKindInit)
	dst = binary.LittleEndian.AppendUint64(dst, entry.id)
	dst = binary.LittleEndian.AppendUint32(dst, entry.epoch)
	dst = binary.LittleEndian.AppendUint64(dst, entry.generation)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(entry.name)))
	dst = append(dst, entry.name...)
	binary.LittleEndian.PutUint32(dst[start+4:], format.CRC(dst[start+registryEntryHeader:]))
	return dst
}

// validateName accepts 1 to MaxNameBytes of any bytes: a name is an
// opaque key, which the broker may compose (an account, a separator, the
// name a client chose).
func validateName(name []byte) error {
	switch {
	case len(name) == 0:
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: %d bytes (maximum %d)", ErrInvalidName, len(name), MaxNameBytes)
	}
	return nil
}

// Init returns the id of name and a new epoch, on disk before it returns.
// A name seen for the first time gets the next id. ErrInvalidName,
// ErrEpochsExhausted, or the storage error that made the
// registry refuse every later Init (a failed sync is never retried).
func (r *Registry) Init(name string) (Identity, error) {
	if err := validateName([]byte(name)); err != nil {
		return Identity{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return Identity{}, fmt.Errorf("producer: registry closed")
	case r.failed != nil:
		return Identity{}, r.failed
	}
	if r.file == nil {
		if err := r.rewriteLocked(); err != nil {
			r.failed = err
			return Identity{}, err
		}
	}
	entry := registration{name: name, generation: r.last + 1}
	if known, ok := r.names[name]; ok {
		if known.epoch == ^uint32(0) {
			return Identity{}, fmt.Errorf("%w: producer %q", ErrEpochsExhausted, name)
		}
		entry.id, entry.epoch = known.id, known.epoch+1
	} else {
		entry.id, entry.epoch = r.lastID+1, 1
		if r.idOf != nil {
			entry.id = r.idOf(name)
			if holder, taken := r.ids[entry.id]; taken || entry.id == 0 {
				return Identity{}, fmt.Errorf("%w: producer %q, id %d (held by %q): choose another name", ErrIDTaken, name, entry.id, holderName(holder))
			}
		}
	}
	image := appendEntry(nil, entry)
	if _, err := r.file.WriteAt(image, r.end); err != nil {
		r.failed = fmt.Errorf("producer: writing %s: %w", RegistryFileName, err)
		return Identity{}, r.failed
	}
	if err := r.file.SyncData(); err != nil {
		r.failed = fmt.Errorf("producer: syncing %s: %w", RegistryFileName, err)
		return Identity{}, r.failed
	}
	r.end += int64(len(image))
	r.entries++
	r.apply(entry)
	identity := Identity{ID: entry.id, Epoch: entry.epoch}
	if r.compactionDue() {
		// The Init is durable already; a failed rewrite leaves the old
		// file, which is complete, and stops further Inits.
		if err := r.rewriteLocked(); err != nil {
			r.failed = err
		}
	}
	return identity, nil
}

func holderName(holder *registration) string {
	if holder == nil {
		return ""
	}
	return holder.name
}

// evictOldest drops the name whose latest Init is the oldest (but not
// the newest id's): its id is
// forgotten (Epoch answers false, so its records are refused as an
// unknown producer, a typed error, never taken for another producer's),
// and it is never issued again. REQUIRES: r.mu held.
func (r *Registry) evictOldest() {
	var oldest *registration
	for _, reg := range r.names {
		// The holder of the highest id stays: a rewrite keeps only live
		// names, and the next id is one past the highest it lists.
		if reg.id == r.lastID {
			continue
		}
		if oldest == nil || reg.generation < oldest.generation {
			oldest = reg
		}
	}
	if oldest != nil {
		delete(r.names, oldest.name)
		delete(r.ids, oldest.id)
		r.evicted++
	}
}

// Evicted returns how many names were dropped to make room for new ones
// since the registry opened (or was read back).
func (r *Registry) Evicted() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.evicted
}

// compactionDue reports whether dead entries (superseded Inits) exceed
// the live ones.
func (r *Registry) compactionDue() bool { return r.entries-len(r.names) > len(r.names) }

// rewriteLocked replaces the file with one live entry per name, in
// generation order: write a temporary file, sync it, rename it over the
// registry, sync the directory. A crash leaves the old file or the new
// one, each complete.
func (r *Registry) rewriteLocked() error {
	live := make([]*registration, 0, len(r.names))
	for _, reg := range r.names {
		live = append(live, reg)
	}
	// sort.Slice: one sort for every element type (docs/PACKAGING.md).
	sort.Slice(live, func(i, j int) bool { return live[i].generation < live[j].generation })
	image := make([]byte, registryHeaderSize, registryHeaderSize+len(live)*(registryEntryHeader+registryBodyFixed+32))
	copy(image, registryMagic)
	binary.LittleEndian.PutUint32(image[8:], registryVersion)
	for _, reg := range live {
		image = appendEntry(image, *reg)
	}
	name := path.Join(r.dir, RegistryFileName)
	if r.file != nil {
		_ = r.file.Close()
		r.file = nil
	}
	if err := vfs.WriteFileAtomic(r.fsys, name, image); err != nil {
		return fmt.Errorf("producer: rewriting %s: %w", name, err)
	}
	file, err := r.fsys.OpenFile(name, vfs.ReadWrite)
	if err != nil {
		return fmt.Errorf("producer: opening %s: %w", name, err)
	}
	r.file, r.end, r.entries = file, int64(len(image)), len(live)
	return nil
}

// Epoch returns the current epoch of id; false when id was never issued.
func (r *Registry) Epoch(id uint64) (uint32, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if reg, ok := r.ids[id]; ok {
		return reg.epoch, true
	}
	return 0, false
}

// Generation returns the number of Inits the registry has made over the
// life of the data directory: the generation of the latest one.
func (r *Registry) Generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.last
}

// InitGeneration returns the generation of id's latest Init; false when
// id was never issued. Tables compare it with the generation at which
// they last dropped state (Table.Check).
func (r *Registry) InitGeneration(id uint64) (uint64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if reg, ok := r.ids[id]; ok {
		return reg.generation, true
	}
	return 0, false
}

// ReserveIDs makes sure no name is given an id up to through: the logs
// hold state of producers up to it, which a registry restored from an
// older copy may not list. The next new name gets a higher id.
func (r *Registry) ReserveIDs(through uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastID = max(r.lastID, through)
}

// Names returns how many names the registry holds.
func (r *Registry) Names() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.names)
}

// Close closes the registry file; later Inits fail.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.file == nil {
		return nil
	}
	return r.file.Close()
}

// Err returns the storage failure that made the registry refuse every
// Init from then on, or nil.
func (r *Registry) Err() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.failed
}
