package backup

import "errors"

// Sentinel errors; every error the package returns wraps one of these or
// a segment/vfs error with %w.
var (
	// ErrCorruptManifest: the manifest fails its checksum or does not parse.
	ErrCorruptManifest = errors.New("backup: manifest is corrupt")
	// ErrIncomplete: the backup has no manifest (it was interrupted).
	ErrIncomplete = errors.New("backup: no manifest; the backup is incomplete")
	// ErrMismatch: a file of the backup differs from its manifest entry.
	ErrMismatch = errors.New("backup: file does not match the manifest")
	// ErrTooNew: the backup was made by a newer IronBus.
	ErrTooNew = errors.New("backup: made by a newer IronBus; upgrade the binary")
	// ErrNotEmpty: the target exists and holds files.
	ErrNotEmpty = errors.New("backup: target directory is not empty")
	// ErrNotDataDir: the source is not an IronBus data directory.
	ErrNotDataDir = errors.New("backup: not an IronBus data directory")
	// ErrChanged: the source changed under the copy in a way retries could
	// not get past (a segment vanished from the middle of a log).
	ErrChanged = errors.New("backup: the data directory changed during the copy")
	// ErrUnsafePath: a manifest names a file outside the backup.
	ErrUnsafePath = errors.New("backup: manifest names an unsafe path")
)
