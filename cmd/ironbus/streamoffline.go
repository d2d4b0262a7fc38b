package main

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/subject"
)

// The offline stream verbs: the catalog (<data-dir>/streams.json) and
// the logs of a stopped broker's data directory. Opening the directory
// takes its lock (exclusive to change it, shared to read it), so a
// running broker makes them exit 5 and no broker starts meanwhile.

// offlineDir is an open data directory with its catalog.
type offlineDir struct {
	path    string
	dir     *segment.Dir
	catalog *catalog.Store
	// streams is the catalog with the streams found on disk and missing
	// from it adopted, as the broker would at boot (and, when writable,
	// written back).
	streams catalog.Catalog
}

func openOffline(opts *globalOptions, dataDir string, write bool) (*offlineDir, error) {
	dir, err := segment.Open(vfs.OS{}, dataDir, segment.Options{Logger: opts.logger(), ReadOnly: !write})
	if err != nil {
		return nil, openDirError(dataDir, err)
	}
	d := &offlineDir{path: dataDir, dir: dir}
	if err := d.load(write); err != nil {
		_ = dir.Close()
		return nil, err
	}
	return d, nil
}

func (d *offlineDir) load(write bool) error {
	store, rec, err := catalog.Open(vfs.OS{}, d.path, catalog.Options{ReadOnly: !write})
	if err != nil {
		return exitErrorf(exitUnreadable, "%w", err)
	}
	if rec.Damaged() {
		return exitErrorf(exitDamage, "the stream catalog of %s is damaged (%s); start the broker once to fall back to its previous copy and record the fallback", d.path, rec.Damage)
	}
	if write {
		if err := catalog.FinishRemovals(vfs.OS{}, d.path); err != nil {
			return exitErrorf(exitUnreadable, "finishing an interrupted stream removal: %w", err)
		}
	}
	ids, err := d.dir.Logs()
	if err != nil {
		return exitErrorf(exitUnreadable, "listing the logs of %s: %w", d.path, err)
	}
	d.catalog, d.streams = store, store.Catalog()
	adopt := catalog.Adoptable(d.streams, ids)
	for _, s := range adopt {
		d.streams.Put(s)
	}
	if write && len(adopt) > 0 {
		return d.update(func(c *catalog.Catalog) error {
			for _, s := range adopt {
				c.Put(s)
			}
			return nil
		})
	}
	return nil
}

func (d *offlineDir) close() { _ = d.dir.Close() }

func (d *offlineDir) update(change func(*catalog.Catalog) error) error {
	if err := d.catalog.Update(change); err != nil {
		var exit *exitError
		if errors.As(err, &exit) {
			return exit
		}
		return exitErrorf(exitUnreadable, "writing the stream catalog: %w", err)
	}
	d.streams = d.catalog.Catalog()
	return nil
}

func (d *offlineDir) stream(name string) (catalog.Stream, error) {
	s, ok := d.streams.Stream(name)
	if !ok {
		return s, exitErrorf(exitNotFound, "stream %q does not exist in %s (ironbus stream ls --data-dir %s)", name, d.path, d.path)
	}
	return s, nil
}

// row describes a stream from its logs; a partition with no directory
// yet (never written) is empty.
func (d *offlineDir) row(s catalog.Stream) streamRow {
	row := streamRow{Name: s.Name, Partitions: int(s.Partitions), MaxBytes: s.MaxBytes, MaxAge: ageText(s.MaxAge), MaxRecords: s.MaxRecords}
	if !s.Created.IsZero() {
		row.Created = s.Created.Format(time.RFC3339)
	}
	for p := range int(s.Partitions) {
		l, err := d.dir.OpenLog(segment.LogID{Stream: s.Name, Partition: uint32(p)})
		if err != nil {
			row.addPartition(p, 0, 0, 0)
			continue
		}
		var bytes uint64
		for _, seg := range l.Segments() {
			bytes += uint64(seg.Bytes)
		}
		row.addPartition(p, l.FirstOffset(), l.Committed(), bytes)
		summaries, _ := consumer.Inspect(l)
		row.Groups += len(summaries)
	}
	return row
}

func (d *offlineDir) output(streams []catalog.Stream, bindings []catalog.Binding) streamsOutput {
	out := streamsOutput{Streams: make([]streamRow, 0, len(streams)), Bindings: make([]bindingRow, 0, len(bindings))}
	for _, s := range streams {
		out.Streams = append(out.Streams, d.row(s))
	}
	for _, b := range bindings {
		out.Bindings = append(out.Bindings, bindingRow(b))
	}
	return out
}

// offlineList lists every stream, or one (name).
func offlineList(opts *globalOptions, dataDir, name string) (streamsOutput, error) {
	d, err := openOffline(opts, dataDir, false)
	if err != nil {
		return streamsOutput{}, err
	}
	defer d.close()
	if name == "" {
		return d.output(d.streams.Streams, d.streams.Bindings), nil
	}
	s, err := d.stream(name)
	if err != nil {
		return streamsOutput{}, err
	}
	return d.output([]catalog.Stream{s}, d.streams.BindingsOf(name)), nil
}

func offlineCreate(opts *globalOptions, dataDir, name string, settings client.StreamSettings) (streamsOutput, error) {
	d, err := openOffline(opts, dataDir, true)
	if err != nil {
		return streamsOutput{}, err
	}
	defer d.close()
	want := catalog.Stream{Name: name, Partitions: max(settings.Partitions, 1), MaxBytes: settings.MaxBytes,
		MaxAge: settings.MaxAge.Truncate(time.Millisecond), MaxRecords: settings.MaxRecords, Created: time.Now().UTC()}
	if existing, ok := d.streams.Stream(name); ok {
		if !existing.SameSettings(want) {
			return streamsOutput{}, exitErrorf(exitDamage, "stream %q exists with other settings (%d partitions, max bytes %d, max age %v, max records %d)",
				name, existing.Partitions, existing.MaxBytes, existing.MaxAge, existing.MaxRecords)
		}
		want = existing
	} else if err := d.update(func(c *catalog.Catalog) error { c.Put(want); return nil }); err != nil {
		return streamsOutput{}, err
	}
	for p := range want.Partitions {
		if _, err := d.dir.OpenLog(segment.LogID{Stream: name, Partition: p}); err != nil {
			return streamsOutput{}, exitErrorf(exitUnreadable, "creating partition %d of %s: %w", p, name, err)
		}
	}
	return d.output([]catalog.Stream{want}, d.streams.BindingsOf(name)), nil
}

// offlineDestroy purges a stream (every record) or removes it (its
// logs, groups, dead letters and bindings).
func offlineDestroy(opts *globalOptions, dataDir, name string, purge bool) (streamsOutput, error) {
	if err := requireExistingDataDir(dataDir); err != nil {
		return streamsOutput{}, err
	}
	d, err := openOffline(opts, dataDir, true)
	if err != nil {
		return streamsOutput{}, err
	}
	defer d.close()
	s, err := d.stream(name)
	if err != nil {
		return streamsOutput{}, err
	}
	if purge {
		for p := range s.Partitions {
			l, err := d.dir.OpenLog(segment.LogID{Stream: name, Partition: p})
			if err != nil {
				return streamsOutput{}, openLogError(dataDir, segment.LogID{Stream: name, Partition: p}, err)
			}
			end, err := l.SealActive(context.Background())
			if err == nil {
				_, err = l.DeleteBefore(end)
			}
			if err != nil {
				return streamsOutput{}, exitErrorf(exitUnreadable, "purging %s/%d: %w", name, p, err)
			}
		}
		return d.output([]catalog.Stream{s}, d.streams.BindingsOf(name)), nil
	}
	before := d.output([]catalog.Stream{s}, d.streams.BindingsOf(name))
	if err := d.update(func(c *catalog.Catalog) error { c.Remove(name); return nil }); err != nil {
		return streamsOutput{}, err
	}
	// The logs must be closed before their files go.
	_ = d.dir.Close()
	if err := catalog.RemoveStreamFiles(vfs.OS{}, dataDir, name); err != nil {
		return streamsOutput{}, exitErrorf(exitUnreadable, "deleting the files of %s (the next open finishes it): %w", name, err)
	}
	if err := catalog.RemoveStreamFiles(vfs.OS{}, path.Join(dataDir, "deadletters"), name); err != nil {
		return streamsOutput{}, exitErrorf(exitUnreadable, "deleting the dead-letter queue of %s: %w", name, err)
	}
	return before, nil
}

func offlineBind(opts *globalOptions, dataDir, pattern, name string) (streamsOutput, error) {
	if err := requireExistingDataDir(dataDir); err != nil {
		return streamsOutput{}, err
	}
	d, err := openOffline(opts, dataDir, true)
	if err != nil {
		return streamsOutput{}, err
	}
	defer d.close()
	if err := subject.ValidatePattern([]byte(pattern)); err != nil {
		return streamsOutput{}, exitErrorf(exitUsage, "%w", err)
	}
	if _, err := d.stream(name); err != nil {
		return streamsOutput{}, err
	}
	table, err := bindingTable(d.streams)
	if err != nil {
		return streamsOutput{}, err
	}
	var ambiguous *subject.AmbiguousError
	if _, err := table.Bind(pattern, name); errors.As(err, &ambiguous) {
		return streamsOutput{}, exitErrorf(exitDamage, "pattern %q overlaps the binding of %q to stream %q: some subject would match both (unbind it first, or pick a narrower pattern)",
			pattern, ambiguous.Existing.Pattern, ambiguous.Existing.Stream)
	} else if err != nil {
		return streamsOutput{}, exitErrorf(exitUsage, "%w", err)
	}
	if err := d.update(func(c *catalog.Catalog) error { c.Bind(catalog.Binding{Pattern: pattern, Stream: name}); return nil }); err != nil {
		return streamsOutput{}, err
	}
	return d.output(nil, d.streams.Bindings), nil
}

func offlineUnbind(opts *globalOptions, dataDir, pattern string) (streamsOutput, error) {
	if err := requireExistingDataDir(dataDir); err != nil {
		return streamsOutput{}, err
	}
	d, err := openOffline(opts, dataDir, true)
	if err != nil {
		return streamsOutput{}, err
	}
	defer d.close()
	found := false
	if err := d.update(func(c *catalog.Catalog) error { found = c.Unbind(pattern); return nil }); err != nil {
		return streamsOutput{}, err
	}
	if !found {
		return streamsOutput{}, exitErrorf(exitNotFound, "no binding has pattern %q (ironbus stream ls --data-dir %s)", pattern, dataDir)
	}
	return d.output(nil, d.streams.Bindings), nil
}

// bindingTable builds the routing table of a catalog's bindings.
func bindingTable(c catalog.Catalog) (*subject.Table, error) {
	bindings := make([]subject.Binding, 0, len(c.Bindings))
	for _, b := range c.Bindings {
		bindings = append(bindings, subject.Binding(b))
	}
	table, err := subject.NewTable(bindings...)
	if err != nil {
		return nil, exitErrorf(exitDamage, "the catalog's bindings do not form a routing table: %w", err)
	}
	return table, nil
}
