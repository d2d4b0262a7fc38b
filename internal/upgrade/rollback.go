package upgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Rollback puts dest.previous back at dest, and keeps the binary it
// replaces as dest.previous, so a second rollback undoes the first. It
// finishes or restarts a rollback a crash interrupted (doc.go).
func Rollback(dest string, opts Options) (Result, error) {
	paths := PathsFor(dest)
	dir := filepath.Dir(dest)
	hasPrevious := exists(paths.Previous)
	if exists(paths.Rollback) {
		if !hasPrevious {
			// Interrupted after restore: dest is already the old binary.
			if err := renameDurably(paths.Rollback, paths.Previous, dir); err != nil {
				return Result{}, fmt.Errorf("upgrade: finishing the interrupted rollback: %w", err)
			}
			result, err := describe(paths, true)
			if err == nil {
				err = opts.after(StepResume, "finished an interrupted rollback: renamed %s to %s", paths.Rollback, paths.Previous)
			}
			return result, err
		}
		// Interrupted after hold: nothing was swapped yet; start again.
		if err := os.Remove(paths.Rollback); err != nil {
			return Result{}, fmt.Errorf("upgrade: %w", err)
		}
	}
	if !hasPrevious {
		return Result{}, fmt.Errorf("%w: %s does not exist (only a binary installed by `ironbus upgrade` has one)",
			ErrNoPrevious, paths.Previous)
	}
	// A staged binary that was never swapped in is not what the operator
	// runs; it must not be mistaken for one later.
	if err := os.Remove(paths.New); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Result{}, fmt.Errorf("upgrade: %w", err)
	}
	if exists(dest) {
		if err := linkOrCopy(dest, paths.Rollback); err != nil {
			return Result{}, fmt.Errorf("upgrade: holding %s as %s: %w", dest, paths.Rollback, err)
		}
		if err := syncDir(dir); err != nil {
			return Result{}, fmt.Errorf("upgrade: %w", err)
		}
		if err := opts.after(StepHold, "linked the installed binary to %s", paths.Rollback); err != nil {
			return Result{}, err
		}
	}
	if err := renameDurably(paths.Previous, dest, dir); err != nil {
		return Result{}, fmt.Errorf("upgrade: restoring %s: %w", paths.Previous, err)
	}
	if err := opts.after(StepRestore, "renamed %s to %s", paths.Previous, dest); err != nil {
		return Result{}, err
	}
	if exists(paths.Rollback) {
		if err := renameDurably(paths.Rollback, paths.Previous, dir); err != nil {
			return Result{}, fmt.Errorf("upgrade: keeping the replaced binary: %w", err)
		}
		if err := opts.after(StepKeep, "kept the replaced binary as %s", paths.Previous); err != nil {
			return Result{}, err
		}
	}
	return describe(paths, false)
}

// describe reports what is installed now.
func describe(paths Paths, resumed bool) (Result, error) {
	digest, size, err := fileDigest(paths.Dest)
	if err != nil {
		return Result{}, fmt.Errorf("upgrade: %w", err)
	}
	result := Result{Dest: paths.Dest, SHA256: digest, Bytes: size, Resumed: resumed}
	if exists(paths.Previous) {
		result.Previous = paths.Previous
	}
	return result, nil
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}
