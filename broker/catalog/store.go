package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"github.com/ironbus/ironbus/segment/vfs"
)

// File names under the data directory.
const (
	FileName     = "streams.json"
	previousName = FileName + ".prev"
	damagedName  = FileName + ".damaged"
)

// Recovery says where the catalog a Store opened with came from.
type Recovery struct {
	// Source is the file read: "streams.json", "streams.json.prev" (a
	// crash between the two renames of a save, or damage), or "" for a
	// data directory without a catalog.
	Source string
	// Damage describes a damaged file that was passed over; empty when
	// nothing was damaged. With Source "" and Damage set, no intact copy
	// was left and the catalog starts empty.
	Damage string
	// Kept is where the damaged file was moved (data-directory relative)
	// when the store is writable.
	Kept string
}

// Damaged reports whether a damaged file was passed over.
func (r Recovery) Damaged() bool { return r.Damage != "" }

// Options configure a Store.
type Options struct {
	// ReadOnly opens the catalog for reading only: Update fails and a
	// damaged file is left where it is.
	ReadOnly bool
}

// Store is the catalog of one data directory, kept in memory and on disk
// in step. Safe for concurrent use; Update calls are serialized.
type Store struct {
	fs       vfs.FS
	dir      string
	readOnly bool

	mu      sync.Mutex
	current Catalog
}

// Open reads the catalog of dataDir. A missing file is an empty catalog;
// a damaged one falls back to the previous copy (see Recovery), never an
// error. Only a catalog from a newer IronBus, or an I/O failure, is.
func Open(fsys vfs.FS, dataDir string, opts Options) (*Store, Recovery, error) {
	s := &Store{fs: fsys, dir: dataDir, readOnly: opts.ReadOnly}
	current, rec, err := s.load()
	if err != nil {
		return nil, rec, err
	}
	s.current = current
	return s, rec, nil
}

func (s *Store) load() (Catalog, Recovery, error) {
	file := path.Join(s.dir, FileName)
	image, err := vfs.ReadFile(s.fs, file)
	if errors.Is(err, fs.ErrNotExist) {
		// Between the two renames of a save only the previous copy
		// exists: it is the catalog.
		return s.loadPrevious(Recovery{})
	}
	if err != nil {
		return Catalog{}, Recovery{}, fmt.Errorf("catalog: reading %s: %w", file, err)
	}
	c, err := Decode(image)
	switch {
	case err == nil:
		return c, Recovery{Source: FileName}, nil
	case errors.Is(err, ErrTooNew):
		return Catalog{}, Recovery{}, fmt.Errorf("%s: %w", file, err)
	}
	rec := Recovery{Damage: fmt.Sprintf("%s: %v", FileName, err)}
	if !s.readOnly {
		// Moving the damaged file aside makes the previous copy the
		// catalog, and keeps the next save from replacing that copy with
		// the damaged one.
		if err := s.fs.Rename(file, path.Join(s.dir, damagedName)); err == nil && s.fs.SyncDir(s.dir) == nil {
			rec.Kept = damagedName
		}
	}
	return s.loadPrevious(rec)
}

func (s *Store) loadPrevious(rec Recovery) (Catalog, Recovery, error) {
	file := path.Join(s.dir, previousName)
	image, err := vfs.ReadFile(s.fs, file)
	if errors.Is(err, fs.ErrNotExist) {
		return Catalog{}, rec, nil
	}
	if err != nil {
		return Catalog{}, rec, fmt.Errorf("catalog: reading %s: %w", file, err)
	}
	c, err := Decode(image)
	switch {
	case err == nil:
		rec.Source = previousName
		return c, rec, nil
	case errors.Is(err, ErrTooNew):
		return Catalog{}, rec, fmt.Errorf("%s: %w", file, err)
	}
	if rec.Damage != "" {
		rec.Damage += "; "
	}
	rec.Damage += fmt.Sprintf("%s: %v", previousName, err)
	return Catalog{}, rec, nil
}

// Catalog returns a copy of the catalog.
func (s *Store) Catalog() Catalog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current.Clone()
}

// Update applies change to a copy of the catalog, validates the result
// and makes it durable; only then does the store (and the caller's
// answer) see it. An error from change, validation or the disk leaves
// the catalog as it was.
func (s *Store) Update(change func(*Catalog) error) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.current.Clone()
	if err := change(&next); err != nil {
		return err
	}
	image, err := Encode(next)
	if err != nil {
		return err
	}
	if err := s.save(image); err != nil {
		return err
	}
	s.current = next
	return nil
}

// save replaces the file crash-safely, keeping the version it replaces
// as the previous copy.
func (s *Store) save(image []byte) error {
	file := path.Join(s.dir, FileName)
	if err := s.fs.Rename(file, path.Join(s.dir, previousName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("catalog: keeping the previous version: %w", err)
	}
	if err := vfs.WriteFileAtomic(s.fs, file, image); err != nil {
		return fmt.Errorf("catalog: writing %s: %w", file, err)
	}
	return nil
}
