package datadir

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"path"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// IncarnationFileName is the file, at the top of a data directory, that
// holds the directory's incarnation id.
const IncarnationFileName = "INCARNATION"

// ErrNoIncarnation marks a data directory without a readable incarnation
// file, found by ReadIncarnation (which never creates one).
var ErrNoIncarnation = errors.New("datadir: no incarnation id")

// Why an incarnation id was created.
const (
	// IncarnationKept: the file was there and intact.
	IncarnationKept = "kept"
	// IncarnationNew: the directory held no stream and no id: a new one.
	IncarnationNew = "new"
	// IncarnationForeign: the directory holds streams but no id (restored
	// from a backup, copied from another machine, written before
	// directories had ids, or the file was deleted); it is a new identity,
	// never the one it may have had.
	IncarnationForeign = "foreign"
	// IncarnationDamaged: the file was unreadable; its id cannot be
	// trusted, so the directory takes a new one.
	IncarnationDamaged = "damaged"
)

// Incarnation is a data directory's identity: a random nonzero id made at
// its first open and kept for its life. A node that comes back with another
// directory (empty, restored or copied) comes back with another
// incarnation, so the cluster treats its replicas as new members that must
// catch up, never as the old ones with their votes.
type Incarnation struct {
	ID uint32
	// Reason is IncarnationKept for an id read back, otherwise why this
	// open made a new one.
	Reason string
}

// Created reports whether this open made the id.
func (i Incarnation) Created() bool { return i.Reason != IncarnationKept }

// IncarnationOptions configure OpenIncarnation.
type IncarnationOptions struct {
	// Random is the source of new ids (crypto/rand when nil).
	Random io.Reader
	// Logger hears about a new id made for a directory that held streams
	// or a damaged file (slog.Default when nil).
	Logger *slog.Logger
}

type incarnationFile struct {
	Format      string `json:"format"`
	Version     int    `json:"version"`
	Incarnation uint32 `json:"incarnation"`
	// Check is the CRC32C of the id's 4 little-endian bytes, so a flipped
	// digit reads as damage rather than as another identity.
	Check uint32 `json:"check"`
}

const incarnationFormat = "ironbus-incarnation"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func incarnationCheck(id uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], id)
	return crc32.Checksum(b[:], castagnoli)
}

// ReadIncarnation returns the incarnation id of the data directory at
// root, writing nothing: ErrNoIncarnation when the file is missing or
// unreadable.
func ReadIncarnation(fsys vfs.FS, root string) (uint32, error) {
	name := path.Join(root, IncarnationFileName)
	data, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s is missing", ErrNoIncarnation, name)
	}
	if err != nil {
		return 0, fmt.Errorf("datadir: reading %s: %w", name, err)
	}
	var f incarnationFile
	if err := json.Unmarshal(data, &f); err != nil || f.Format != incarnationFormat || f.Version != 1 ||
		f.Incarnation == 0 || f.Check != incarnationCheck(f.Incarnation) {
		return 0, fmt.Errorf("%w: %s is damaged", ErrNoIncarnation, name)
	}
	return f.Incarnation, nil
}

// OpenIncarnation returns the incarnation of the data directory logs was
// opened on, creating it when missing. logs must be open writable (the
// exclusive lock), which serializes the creation. A missing file on a
// directory that holds streams (logs or a catalog) is not taken for a
// new directory in silence: the directory gets a new id all the same,
// since reusing one it may have had elsewhere is what must never happen,
// and the reason (IncarnationForeign) is logged and returned. A damaged
// file likewise (IncarnationDamaged).
func OpenIncarnation(fsys vfs.FS, logs *segment.Dir, opts IncarnationOptions) (Incarnation, error) {
	root := logs.Path()
	id, err := ReadIncarnation(fsys, root)
	if err == nil {
		return Incarnation{ID: id, Reason: IncarnationKept}, nil
	}
	if !errors.Is(err, ErrNoIncarnation) {
		return Incarnation{}, err
	}
	reason := IncarnationNew
	if _, statErr := fsys.Stat(path.Join(root, IncarnationFileName)); statErr == nil {
		reason = IncarnationDamaged
	} else {
		held, err := holdsStreams(fsys, logs)
		if err != nil {
			return Incarnation{}, err
		}
		if held {
			reason = IncarnationForeign
		}
	}
	id, err = newIncarnationID(opts.Random)
	if err != nil {
		return Incarnation{}, err
	}
	data, _ := json.Marshal(incarnationFile{Format: incarnationFormat, Version: 1, Incarnation: id, Check: incarnationCheck(id)})
	if err := vfs.WriteFileAtomic(fsys, path.Join(root, IncarnationFileName), append(data, '\n')); err != nil {
		return Incarnation{}, fmt.Errorf("datadir: writing %s: %w", IncarnationFileName, err)
	}
	if reason != IncarnationNew {
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("data directory has a new incarnation id: in a cluster its replicas rejoin as new members",
			"path", root, "reason", reason, "incarnation", fmt.Sprintf("%08x", id))
	}
	return Incarnation{ID: id, Reason: reason}, nil
}

// holdsStreams reports whether the directory has a log or a catalog.
func holdsStreams(fsys vfs.FS, logs *segment.Dir) (bool, error) {
	ids, err := logs.Logs()
	if err != nil {
		return false, fmt.Errorf("datadir: listing the logs of %s: %w", logs.Path(), err)
	}
	if len(ids) > 0 {
		return true, nil
	}
	_, err = fsys.Stat(path.Join(logs.Path(), catalog.FileName))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("datadir: looking for the catalog of %s: %w", logs.Path(), err)
}

func newIncarnationID(random io.Reader) (uint32, error) {
	if random == nil {
		random = rand.Reader
	}
	var b [4]byte
	for {
		if _, err := io.ReadFull(random, b[:]); err != nil {
			return 0, fmt.Errorf("datadir: drawing an incarnation id: %w", err)
		}
		if id := binary.LittleEndian.Uint32(b[:]); id != 0 {
			return id, nil
		}
	}
}
