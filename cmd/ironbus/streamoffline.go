package main

import (
	"context"
	"errors"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/subject"
)

// The offline stream verbs: the catalog (<data-dir>/streams.json) and
// the logs of a stopped broker's data directory, through package datadir
// and its crash protocol. Opening the directory takes its lock (exclusive
// to change it, shared to read it), so a running broker makes them exit 5
// and no broker starts meanwhile.

// offlineDir is an open data directory.
type offlineDir struct {
	path string
	dir  *datadir.Dir
}

func openOffline(opts *globalOptions, dataDir string, write bool) (*offlineDir, error) {
	dir, rec, err := datadir.Open(vfs.OS{}, dataDir, datadir.Options{Exclusive: write, RefuseDamage: true, Logger: opts.logger()})
	if err != nil {
		return nil, openOfflineError(dataDir, rec, err)
	}
	if write && rec.Leftovers != nil {
		_ = dir.Close()
		return nil, exitErrorf(exitUnreadable, "finishing an interrupted stream removal: %w", rec.Leftovers)
	}
	return &offlineDir{path: dataDir, dir: dir}, nil
}

// openOfflineError classifies a failure of datadir.Open: the directory
// itself (lock, missing, too new), a damaged catalog, or unreadable data.
func openOfflineError(dataDir string, rec datadir.Recovery, err error) error {
	if refused := keyRingError(dataDir, err); refused != nil {
		return refused
	}
	switch {
	case errors.Is(err, segment.ErrLocked), errors.Is(err, segment.ErrNotFound), errors.Is(err, segment.ErrTooNew),
		errors.Is(err, segment.ErrInvalidOptions):
		return openDirError(dataDir, err)
	case errors.Is(err, datadir.ErrDamaged):
		return exitErrorf(exitDamage, "the stream catalog of %s is damaged (%s); start the broker once to fall back to its previous copy and record the fallback",
			dataDir, rec.Catalog.Damage)
	}
	return exitErrorf(exitUnreadable, "%w", err)
}

func (d *offlineDir) close() { _ = d.dir.Close() }

func (d *offlineDir) stream(name string) (catalog.Stream, error) {
	s, err := d.dir.Stream(name)
	if err != nil {
		return s, exitErrorf(exitNotFound, "stream %q does not exist in %s (ironbus stream ls --data-dir %s)", name, d.path, d.path)
	}
	return s, nil
}

// row describes a stream from its logs; a partition with no log yet
// (never written) is empty.
func (d *offlineDir) row(s catalog.Stream) streamRow {
	row := streamRow{Name: s.Name, Partitions: int(s.Partitions), MaxBytes: s.MaxBytes, MaxAge: ageText(s.MaxAge), MaxRecords: s.MaxRecords,
		DedupWindow: dedupText(s.Dedup())}
	row.setCompact(s.Compact, s.DeleteRetention)
	row.CompactPastGroups = s.CompactPastGroups
	if !s.Created.IsZero() {
		row.Created = s.Created.Format(time.RFC3339)
	}
	state := d.dir.Describe(s)
	for p, part := range state.Partitions {
		row.addPartition(p, part.First, part.End, part.Bytes)
	}
	row.Groups = state.Groups
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
	c := d.dir.Catalog()
	if name == "" {
		return d.output(c.Streams, c.Bindings), nil
	}
	s, err := d.stream(name)
	if err != nil {
		return streamsOutput{}, err
	}
	return d.output([]catalog.Stream{s}, c.BindingsOf(name)), nil
}

func offlineCreate(opts *globalOptions, dataDir, name string, settings client.StreamSettings, dedupWindow time.Duration) (streamsOutput, error) {
	d, err := openOffline(opts, dataDir, true)
	if err != nil {
		return streamsOutput{}, err
	}
	defer d.close()
	want := catalog.Stream{Name: name, Partitions: max(settings.Partitions, 1), MaxBytes: settings.MaxBytes,
		MaxAge: settings.MaxAge.Truncate(time.Millisecond), MaxRecords: settings.MaxRecords, Created: time.Now().UTC(), DedupWindow: dedupWindow,
		Compact: settings.Compact, DeleteRetention: settings.DeleteRetention.Truncate(time.Millisecond),
		CompactPastGroups: settings.CompactPastGroups}
	s, err := d.dir.CreateStream(want)
	switch {
	case errors.Is(err, datadir.ErrStreamExists):
		return streamsOutput{}, exitErrorf(exitDamage, "stream %q exists with other settings (%d partitions, max bytes %d, max age %v, max records %d, dedup window %s, compact %v)",
			name, s.Partitions, s.MaxBytes, s.MaxAge, s.MaxRecords, dedupText(s.Dedup()), s.Compact)
	case errors.Is(err, datadir.ErrInvalid):
		return streamsOutput{}, exitErrorf(exitUsage, "%w", cause(err))
	case err != nil:
		return streamsOutput{}, exitErrorf(exitUnreadable, "creating stream %s: %w", name, err)
	}
	return d.output([]catalog.Stream{s}, d.dir.Catalog().BindingsOf(name)), nil
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
		if err := d.dir.PurgeStream(context.Background(), name); err != nil {
			return streamsOutput{}, exitErrorf(exitUnreadable, "%w", err)
		}
		return d.output([]catalog.Stream{s}, d.dir.Catalog().BindingsOf(name)), nil
	}
	before := d.output([]catalog.Stream{s}, d.dir.Catalog().BindingsOf(name))
	if err := d.dir.RemoveStream(name); err != nil {
		return streamsOutput{}, exitErrorf(exitUnreadable, "removing %s (the next open finishes what was committed): %w", name, err)
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
	err = d.dir.Bind(pattern, name)
	var ambiguous *subject.AmbiguousError
	switch {
	case errors.Is(err, datadir.ErrNoSuchStream):
		_, err = d.stream(name)
		return streamsOutput{}, err
	case errors.As(err, &ambiguous):
		return streamsOutput{}, exitErrorf(exitDamage, "pattern %q overlaps the binding of %q to stream %q: some subject would match both (unbind it first, or pick a narrower pattern)",
			pattern, ambiguous.Existing.Pattern, ambiguous.Existing.Stream)
	case errors.Is(err, datadir.ErrInvalid):
		return streamsOutput{}, exitErrorf(exitUsage, "%w", cause(err))
	case errors.Is(err, datadir.ErrDamaged):
		return streamsOutput{}, exitErrorf(exitDamage, "%w", err)
	case err != nil:
		return streamsOutput{}, exitErrorf(exitUnreadable, "writing the stream catalog: %w", err)
	}
	return d.output(nil, d.dir.Catalog().Bindings), nil
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
	err = d.dir.Unbind(pattern)
	switch {
	case errors.Is(err, datadir.ErrNoSuchBinding):
		return streamsOutput{}, exitErrorf(exitNotFound, "no binding has pattern %q (ironbus stream ls --data-dir %s)", pattern, dataDir)
	case err != nil:
		return streamsOutput{}, exitErrorf(exitUnreadable, "writing the stream catalog: %w", err)
	}
	return d.output(nil, d.dir.Catalog().Bindings), nil
}

// cause is the reason an error wraps beside its package's sentinel
// ("datadir: invalid: <cause>"), for messages that name the cause alone.
func cause(err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		if causes := joined.Unwrap(); len(causes) == 2 {
			return causes[1]
		}
	}
	return err
}
