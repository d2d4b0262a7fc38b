package upgrade

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Step names one completed step, as passed to Options.AfterStep.
type Step string

// The steps, in the order doc.go lists them.
const (
	StepStage   Step = "stage"
	StepKeep    Step = "keep"
	StepSwap    Step = "swap"
	StepHold    Step = "hold"
	StepRestore Step = "restore"
	StepResume  Step = "resume"
)

// Options are what a caller can add to a run.
type Options struct {
	// AfterStep is called after each step is durable, with a line saying
	// what it did. The CLI prints progress from it; tests return an error
	// to stop the run there, which leaves exactly what a crash at that
	// point would.
	AfterStep func(step Step, detail string) error
}

func (o Options) after(step Step, format string, args ...any) error {
	if o.AfterStep == nil {
		return nil
	}
	return o.AfterStep(step, fmt.Sprintf(format, args...))
}

// Paths are the names the swap uses beside the destination.
type Paths struct {
	Dest     string // the installed binary
	New      string // the staged new binary
	Previous string // the kept binary a rollback returns to
	Rollback string // the binary a rollback is replacing, while it runs
}

// PathsFor returns the names for dest.
func PathsFor(dest string) Paths {
	return Paths{Dest: dest, New: dest + ".new", Previous: dest + ".previous", Rollback: dest + ".rollback"}
}

// Result says what a run left installed.
type Result struct {
	Dest     string `json:"dest"`
	Previous string `json:"previous,omitempty"` // empty when nothing was replaced
	SHA256   string `json:"sha256"`             // of the binary now at Dest
	Bytes    int64  `json:"bytes"`
	// Resumed is true when rollback only finished an interrupted rollback.
	Resumed bool `json:"resumed,omitempty"`
}

// Upgrade installs source at dest through the stage, keep and swap steps;
// the binary it replaces becomes dest.previous. The caller has checked
// that source runs (Probe).
func Upgrade(source, dest string, opts Options) (Result, error) {
	paths := PathsFor(dest)
	if err := checkUpgradable(source, paths); err != nil {
		return Result{}, err
	}
	if result, done := alreadyInstalled(source, paths); done {
		return result, opts.after(StepSwap, "%s already holds this binary; nothing to do", dest)
	}
	dir := filepath.Dir(dest)
	digest, size, err := copyDurably(source, paths.New, installMode(dest))
	if err != nil {
		return Result{}, fmt.Errorf("upgrade: staging %s: %w", paths.New, err)
	}
	if err := opts.after(StepStage, "staged %s (%d bytes, fsynced)", paths.New, size); err != nil {
		return Result{}, err
	}
	result := Result{Dest: dest, SHA256: digest, Bytes: size}
	if _, err := os.Lstat(dest); err == nil {
		if err := keepPrevious(paths, dir); err != nil {
			return Result{}, fmt.Errorf("upgrade: keeping %s as %s: %w", dest, paths.Previous, err)
		}
		result.Previous = paths.Previous
		if err := opts.after(StepKeep, "kept the installed binary as %s", paths.Previous); err != nil {
			return Result{}, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Result{}, fmt.Errorf("upgrade: %w", err)
	}
	if err := renameDurably(paths.New, dest, dir); err != nil {
		return Result{}, fmt.Errorf("upgrade: swapping in %s: %w", dest, err)
	}
	if err := opts.after(StepSwap, "renamed %s to %s", paths.New, dest); err != nil {
		return Result{}, err
	}
	return result, nil
}

// alreadyInstalled is true when dest holds the same bytes as source: a
// rerun after a crash past the swap must not make the new binary its own
// previous one, which would lose the way back.
func alreadyInstalled(source string, paths Paths) (Result, bool) {
	installed, size, err := fileDigest(paths.Dest)
	if err != nil {
		return Result{}, false
	}
	wanted, _, err := fileDigest(source)
	if err != nil || wanted != installed {
		return Result{}, false
	}
	result, err := describe(paths, false)
	return result, err == nil && result.Bytes == size
}

func checkUpgradable(source string, paths Paths) error {
	info, err := os.Stat(source)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotBinary, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrNotBinary, source)
	}
	if installed, err := os.Stat(paths.Dest); err == nil && os.SameFile(info, installed) {
		return fmt.Errorf("%w: %s", ErrSameFile, paths.Dest)
	}
	if _, err := os.Lstat(paths.Rollback); err == nil {
		return fmt.Errorf("%w: %s exists; run `ironbus rollback --dest %s` to finish it first",
			ErrRollbackPending, paths.Rollback, paths.Dest)
	}
	return nil
}

// installMode keeps the installed binary's permission bits, or 0755 for a
// first install.
func installMode(dest string) fs.FileMode {
	if info, err := os.Stat(dest); err == nil {
		return info.Mode().Perm()
	}
	return 0o755
}

// keepPrevious makes dest.previous name the installed binary. The link
// goes to a temporary name first so an existing dest.previous is replaced
// by one rename, never left missing.
func keepPrevious(paths Paths, dir string) error {
	temporary := paths.Previous + ".tmp"
	if err := linkOrCopy(paths.Dest, temporary); err != nil {
		return err
	}
	return renameDurably(temporary, paths.Previous, dir)
}

// linkOrCopy hard-links from to to, or copies and fsyncs it where the file
// system has no hard links. A stale to is replaced.
func linkOrCopy(from, to string) error {
	if err := os.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Link(from, to); err == nil {
		return nil
	}
	info, err := os.Stat(from)
	if err != nil {
		return err
	}
	_, _, err = copyDurably(from, to, info.Mode().Perm())
	return err
}

// renameDurably renames within dir and fsyncs dir, so the new name
// survives a power cut.
func renameDurably(from, to, dir string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(dir)
}

// copyDurably copies from to to (truncating a stale to), fsyncs it and
// returns its SHA-256 and size.
func copyDurably(from, to string, mode fs.FileMode) (string, int64, error) {
	source, err := os.Open(from)
	if err != nil {
		return "", 0, err
	}
	defer source.Close()
	target, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return "", 0, err
	}
	hash := sha256.New()
	size, err := io.Copy(io.MultiWriter(target, hash), source)
	if err == nil {
		err = target.Chmod(mode) // O_CREATE's mode passes through the umask
	}
	if err == nil {
		err = target.Sync()
	}
	if closeErr := target.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = os.Remove(to)
		return "", 0, err
	}
	return hex.EncodeToString(hash.Sum(nil)), size, nil
}
