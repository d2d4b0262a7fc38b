package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	FS vfs.FS
	// Force restores over a target that holds files: the target is renamed
	// aside (never deleted) and named in the result.
	Force bool
	Now   func() time.Time
	// Progress, when set, is told the bytes done and the total, first while
	// checking the backup, then while writing.
	Progress func(done, total int64)
}

// RestoreResult is what Restore did.
type RestoreResult struct {
	Manifest Manifest
	// MovedAside is where the previous contents of the target went, when
	// there were any.
	MovedAside string
}

// ReadManifest reads and checks the manifest of the backup at dir.
func ReadManifest(fsys vfs.FS, dir string) (Manifest, error) {
	if err := confined(fsys, dir, ManifestName); err != nil {
		return Manifest{}, err
	}
	data, err := vfs.ReadFile(fsys, path.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("%w: %s has no %s", ErrIncomplete, dir, ManifestName)
	}
	if err != nil {
		return Manifest{}, err
	}
	m, err := DecodeManifest(data)
	if err != nil {
		return m, err
	}
	if m.DataFormatVersion > segment.EncryptedDataFormatVersion || m.SegmentFormatVersion > format.SegmentFormatVersion {
		return m, fmt.Errorf("%w: data format %d, segment format %d", ErrTooNew, m.DataFormatVersion, m.SegmentFormatVersion)
	}
	return m, nil
}

// Validate checks every file of the backup at dir against its manifest
// (presence, size, CRC32C, reached through no symbolic link) and returns
// the manifest.
func Validate(fsys vfs.FS, dir string, progress func(done, total int64)) (Manifest, error) {
	if progress == nil {
		progress = func(int64, int64) {}
	}
	m, err := ReadManifest(fsys, dir)
	if err != nil {
		return m, err
	}
	var done int64
	for _, file := range m.Files {
		if err := confined(fsys, dir, path.Join(DataDirName, file.Path)); err != nil {
			return m, err
		}
		size, crc, err := checksum(fsys, path.Join(dir, DataDirName, file.Path))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return m, fmt.Errorf("%w: %s is missing", ErrMismatch, file.Path)
		case err != nil:
			return m, fmt.Errorf("backup: reading %s: %w", file.Path, err)
		case size != file.Size:
			return m, fmt.Errorf("%w: %s holds %d bytes, the manifest says %d", ErrMismatch, file.Path, size, file.Size)
		case crc != file.CRC32C:
			return m, fmt.Errorf("%w: %s has CRC32C %08x, the manifest says %08x", ErrMismatch, file.Path, crc, file.CRC32C)
		}
		done += size
		progress(done, m.Bytes)
	}
	return m, nil
}

// Restore checks the whole backup at from, then writes it as the data
// directory target: into a staging directory beside it first, every file
// and directory synced, then renamed into place. A target holding files
// is refused unless opts.Force, and then renamed aside, never deleted.
func Restore(from, target string, opts RestoreOptions) (RestoreResult, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = func(int64, int64) {}
	}
	from, target = path.Clean(from), path.Clean(target)
	m, err := Validate(opts.FS, from, opts.Progress)
	if err != nil {
		return RestoreResult{Manifest: m}, err
	}
	result := RestoreResult{Manifest: m}
	occupied, unlock, err := claimTarget(opts.FS, target, opts.Force)
	if err != nil {
		return result, err
	}
	defer unlock()
	staging := target + ".restore-tmp"
	if err := removeTree(opts.FS, staging); err != nil {
		return result, fmt.Errorf("backup: removing the leftover %s: %w", staging, err)
	}
	if err := writeStaging(opts.FS, from, staging, m, opts.Progress); err != nil {
		return result, err
	}
	parent := path.Dir(target)
	if occupied {
		result.MovedAside = target + ".before-restore-" + strconv.FormatInt(opts.Now().Unix(), 10)
		if err := opts.FS.Rename(target, result.MovedAside); err != nil {
			return result, fmt.Errorf("backup: moving the old %s aside: %w", target, err)
		}
	} else if _, err := opts.FS.Stat(target); err == nil {
		// An empty directory: rename cannot replace it portably.
		if err := opts.FS.Remove(target); err != nil {
			return result, err
		}
	}
	if err := opts.FS.Rename(staging, target); err != nil {
		return result, fmt.Errorf("backup: moving the restored directory into place: %w", err)
	}
	return result, opts.FS.SyncDir(parent)
}

// claimTarget checks the target: whether it holds files (refused without
// force) and that no broker holds it. The returned function releases the
// lock.
func claimTarget(fsys vfs.FS, target string, force bool) (bool, func(), error) {
	names, err := fsys.List(target)
	if errors.Is(err, fs.ErrNotExist) {
		return false, func() {}, vfs.MkdirAllDurable(fsys, path.Dir(target))
	}
	if err != nil {
		return false, nil, err
	}
	lock, err := fsys.Lock(target, true)
	if err != nil {
		return false, nil, fmt.Errorf("backup: %s: %w", target, err)
	}
	unlock := func() { _ = lock.Close() }
	if len(names) > 0 && !force {
		unlock()
		return true, nil, fmt.Errorf("%w: %s holds %d entries", ErrNotEmpty, target, len(names))
	}
	return len(names) > 0, unlock, nil
}

// writeStaging copies every file of the manifest into staging, checking
// each copy against the manifest again (the backup could change between
// the check and the copy), and syncs every directory it made.
func writeStaging(fsys vfs.FS, from, staging string, m Manifest, progress func(done, total int64)) error {
	dirs := map[string]bool{}
	var done int64
	for _, file := range m.Files {
		to := path.Join(staging, file.Path)
		if err := vfs.MkdirAllDurable(fsys, path.Dir(to)); err != nil {
			return err
		}
		dirs[path.Dir(to)] = true
		// Checked again: the backup could have changed since Validate.
		if err := confined(fsys, from, path.Join(DataDirName, file.Path)); err != nil {
			return err
		}
		if _, err := copyFile(fsys, path.Join(from, DataDirName, file.Path), to, -1, func(n int64) {
			done += n
			progress(done, m.Bytes)
		}); err != nil {
			return fmt.Errorf("backup: restoring %s: %w", file.Path, err)
		}
		size, crc, err := checksum(fsys, to)
		if err != nil {
			return err
		}
		if size != file.Size || crc != file.CRC32C {
			return fmt.Errorf("%w: %s changed while it was restored", ErrMismatch, file.Path)
		}
	}
	for dir := range dirs {
		if err := fsys.SyncDir(dir); err != nil {
			return err
		}
	}
	return fsys.SyncDir(staging)
}
