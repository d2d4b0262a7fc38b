package datadir

import (
	"errors"
	"fmt"
	"path"
	"sort"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/subject"
)

// Streams is the stream side of an open data directory: the catalog and
// the log directories, changed only through the crash protocol of the
// package doc. Its methods change files and the catalog, never open logs:
// the caller opens (and, before Remove, closes) them through its
// segment.Dir. Safe for concurrent use; the catalog serializes changes.
type Streams struct {
	fs     vfs.FS
	root   string
	store  *catalog.Store
	shared bool
	// view is what a shared open decided in memory (unfinished removals
	// completed, logs adopted); an exclusive open writes it instead.
	view          catalog.Catalog
	routingDomain func(name []byte) int
}

// StreamsOptions configure OpenStreams.
type StreamsOptions struct {
	// Shared opens read-only: nothing is written, and what an exclusive
	// open would repair is applied to the in-memory catalog only.
	Shared bool
	// RefuseDamage fails the open (ErrDamaged) on a damaged catalog
	// instead of falling back to its previous copy.
	RefuseDamage bool
	// RoutingDomain splits the bindings' overlap check into domains, as
	// broker.Config.RoutingDomain does (nil: one domain).
	RoutingDomain func(name []byte) int
}

// Recovery is what opening found and finished.
type Recovery struct {
	// Catalog says which catalog file was read and what damage was
	// passed over.
	Catalog catalog.Recovery
	// Removed names the streams whose removal a crash interrupted after
	// its commit point: they are gone now.
	Removed []string
	// Adopted lists the streams found on disk without a catalog entry and
	// added to the catalog with default settings.
	Adopted []catalog.Stream
	// Leftovers is why some leftover of a crash (a renamed directory, a
	// temporary file) was not deleted; the next open retries.
	Leftovers error
}

// OpenStreams loads the catalog of the data directory logs was opened on
// (shared or exclusive, matching opts.Shared) and finishes what a crash
// interrupted, as the package doc says.
func OpenStreams(fsys vfs.FS, logs *segment.Dir, opts StreamsOptions) (*Streams, Recovery, error) {
	root := logs.Path()
	store, found, err := catalog.Open(fsys, root, catalog.Options{ReadOnly: opts.Shared})
	rec := Recovery{Catalog: found}
	if err != nil {
		return nil, rec, err
	}
	if found.Damaged() && opts.RefuseDamage {
		return nil, rec, fmt.Errorf("%w: %s", ErrDamaged, found.Damage)
	}
	entries, names, err := pendingRemovals(fsys, root)
	if err != nil {
		return nil, rec, err
	}
	next := store.Catalog()
	if rec.Removed, err = rollForward(fsys, root, &next, names); err != nil {
		return nil, rec, err
	}
	ids, err := logs.Logs()
	if err != nil {
		return nil, rec, fmt.Errorf("datadir: listing the logs of %s: %w", root, err)
	}
	rec.Adopted = adoptable(next, ids)
	for _, s := range rec.Adopted {
		next.Put(s)
	}
	s := &Streams{fs: fsys, root: root, store: store, shared: opts.Shared, routingDomain: opts.RoutingDomain}
	if opts.Shared {
		s.view = next
		return s, rec, nil
	}
	if len(rec.Removed)+len(rec.Adopted) > 0 {
		// The removals' markers go only after the catalog that settles
		// them is durable.
		if err := store.Update(func(c *catalog.Catalog) error { *c = next; return nil }); err != nil {
			return nil, rec, fmt.Errorf("datadir: recording the recovered catalog: %w", err)
		}
	}
	rec.Leftovers = deleteLeftovers(fsys, root, next, entries, names)
	return s, rec, nil
}

// adoptable returns the streams found on disk (ids) that the catalog
// lacks, or whose entry has fewer partitions than the disk holds. Each
// gets the highest partition found + 1, default retention and no
// creation time.
func adoptable(c catalog.Catalog, ids []segment.LogID) []catalog.Stream {
	highest := map[string]uint32{}
	for _, id := range ids {
		if id.Partition >= catalog.MaxPartitions {
			continue
		}
		if p, ok := highest[id.Stream]; !ok || id.Partition > p {
			highest[id.Stream] = id.Partition
		}
	}
	var out []catalog.Stream
	for name, p := range highest {
		s, ok := c.Stream(name)
		if ok && s.Partitions > p {
			continue
		}
		if !ok {
			s = catalog.Stream{Name: name}
		}
		s.Partitions = p + 1
		out = append(out, s)
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Catalog returns a copy of the catalog.
func (s *Streams) Catalog() catalog.Catalog {
	if s.shared {
		return s.view.Clone()
	}
	return s.store.Catalog()
}

// Stream returns the named stream: ErrNoSuchStream when there is none.
func (s *Streams) Stream(name string) (catalog.Stream, error) {
	stream, ok := s.Catalog().Stream(name)
	if !ok {
		return stream, fmt.Errorf("%w: %q", ErrNoSuchStream, name)
	}
	return stream, nil
}

// errUnchanged ends a catalog update that has nothing to write.
var errUnchanged = errors.New("datadir: unchanged")

// Create records a stream in the catalog, durably: the commit point of a
// create. The caller then opens its partitions (segment.Dir.OpenLog
// creates their directories); a partition without one is empty. Creating
// a stream that exists with the same settings returns it unchanged; with
// other settings it fails with ErrStreamExists and returns the existing
// one.
func (s *Streams) Create(want catalog.Stream) (catalog.Stream, error) {
	if s.shared {
		return catalog.Stream{}, ErrReadOnly
	}
	if err := catalog.ValidateStream(want); err != nil {
		return catalog.Stream{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var existing catalog.Stream
	found := false
	err := s.store.Update(func(c *catalog.Catalog) error {
		if existing, found = c.Stream(want.Name); found {
			return errUnchanged
		}
		c.Put(want)
		return nil
	})
	switch {
	case !found && err != nil:
		return catalog.Stream{}, fmt.Errorf("datadir: recording stream %s: %w", want.Name, err)
	case !found:
		return want, nil
	case !existing.SameSettings(want):
		return existing, fmt.Errorf("%w: stream %q has %d partitions, max bytes %d, max age %v, max records %d",
			ErrStreamExists, want.Name, existing.Partitions, existing.MaxBytes, existing.MaxAge, existing.MaxRecords)
	}
	return existing, nil
}

// Remove commits the removal of a stream: its directory is renamed out of
// the scan (the commit point), then the catalog forgets the stream and
// its bindings. The caller must have closed the stream's logs, and then
// calls FinishRemoval with the returned aside ("" when the stream had no
// directory). An error with a non-empty aside means the removal is
// committed but not complete; the next open completes it.
func (s *Streams) Remove(name string) (aside string, err error) {
	if s.shared {
		return "", ErrReadOnly
	}
	if _, err := s.Stream(name); err != nil {
		return "", err
	}
	aside, err = moveAside(s.fs, s.root, name)
	if err != nil {
		return aside, err
	}
	if err := s.store.Update(func(c *catalog.Catalog) error { c.Remove(name); return nil }); err != nil {
		return aside, fmt.Errorf("datadir: forgetting stream %s (the next open completes its removal): %w", name, err)
	}
	return aside, nil
}

// FinishRemoval deletes what Remove left: the stream's dead-letter queue
// (its log must be closed), then its renamed directory, the marker of the
// removal. An error leaves the rest to the next open.
func (s *Streams) FinishRemoval(name, aside string) error {
	if err := removeLog(s.fs, path.Join(s.root, DeadLetterDirName), name); err != nil {
		return err
	}
	if aside == "" {
		return nil
	}
	return removeTree(s.fs, aside)
}

// Bind routes subjects matching pattern to stream, durably. It fails with
// ErrInvalid for a bad pattern, ErrNoSuchStream, or ErrOverlap (wrapping
// *subject.AmbiguousError) when some subject could match the pattern and
// a binding to another stream.
func (s *Streams) Bind(pattern, stream string) error {
	return s.BindMany([]catalog.Binding{{Pattern: pattern, Stream: stream}})
}

// BindMany adds many bindings with one catalog write, all or none, each
// checked as Bind checks it, against the others too.
func (s *Streams) BindMany(bindings []catalog.Binding) error {
	if s.shared {
		return ErrReadOnly
	}
	for _, binding := range bindings {
		if err := subject.ValidatePattern([]byte(binding.Pattern)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return s.store.Update(func(c *catalog.Catalog) error {
		tables, err := bindingTables(*c, s.domain)
		if err != nil {
			return err
		}
		for _, binding := range bindings {
			if _, ok := c.Stream(binding.Stream); !ok {
				return fmt.Errorf("%w: %q", ErrNoSuchStream, binding.Stream)
			}
			var ambiguous *subject.AmbiguousError
			domain := s.domain(binding.Pattern)
			if tables[domain], err = tables[domain].Bind(binding.Pattern, binding.Stream); errors.As(err, &ambiguous) {
				return fmt.Errorf("%w: %w", ErrOverlap, err)
			} else if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
		}
		for _, binding := range bindings {
			c.Bind(binding)
		}
		return nil
	})
}

// Unbind removes the binding of pattern, durably: ErrNoSuchBinding when
// there is none.
func (s *Streams) Unbind(pattern string) error {
	if s.shared {
		return ErrReadOnly
	}
	return s.store.Update(func(c *catalog.Catalog) error {
		if !c.Unbind(pattern) {
			return fmt.Errorf("%w: %q", ErrNoSuchBinding, pattern)
		}
		return nil
	})
}

// bindingTables builds the routing table of each domain of a catalog's
// bindings; ErrDamaged when they do not form them.
func bindingTables(c catalog.Catalog, domain func(pattern string) string) (map[string]*subject.Table, error) {
	split := map[string][]subject.Binding{}
	for _, b := range c.Bindings {
		split[domain(b.Pattern)] = append(split[domain(b.Pattern)], subject.Binding(b))
	}
	tables := make(map[string]*subject.Table, len(split))
	for name, bindings := range split {
		table, err := subject.NewTable(bindings...)
		if err != nil {
			return nil, fmt.Errorf("%w: the bindings do not form a routing table: %w", ErrDamaged, err)
		}
		tables[name] = table
	}
	return tables, nil
}

// domain names a pattern's routing domain (StreamsOptions.RoutingDomain).
func (s *Streams) domain(pattern string) string {
	if s.routingDomain == nil {
		return ""
	}
	return pattern[:s.routingDomain([]byte(pattern))]
}
