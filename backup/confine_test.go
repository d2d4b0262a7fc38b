package backup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// symlinkedBackup makes a backup, then replaces one of its segments by a
// symbolic link to a file outside it holding the same bytes: the
// manifest's sizes and checksums all still match.
func symlinkedBackup(t *testing.T) (base, out, outside string) {
	t.Helper()
	base = t.TempDir()
	source := filepath.Join(base, "data")
	liveDir(t, source, 500)
	out = filepath.Join(base, "backup")
	result, err := Create(source, out, Options{NoLink: true})
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, file := range result.Manifest.Files {
		if file.Kind == KindSegment {
			victim = filepath.Join(out, DataDirName, file.Path)
		}
	}
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	outside = filepath.Join(base, "outside.seg")
	if err := os.WriteFile(outside, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, victim); err != nil {
		t.Fatal(err)
	}
	return base, out, outside
}

func TestValidateAndRestoreRefuseSymlinkedFiles(t *testing.T) {
	base, out, _ := symlinkedBackup(t)
	if _, err := Validate(vfs.OS{}, out, nil); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("validate of a backup holding a symbolic link: %v", err)
	}
	target := filepath.Join(base, "restored")
	if _, err := Restore(out, target, RestoreOptions{}); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("restore of a backup holding a symbolic link: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore wrote %s before refusing: %v", target, err)
	}
}

func TestValidateRefusesSymlinkedDirectory(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	liveDir(t, source, 100)
	out := filepath.Join(base, "backup")
	if _, err := Create(source, out, Options{NoLink: true}); err != nil {
		t.Fatal(err)
	}
	// The streams directory moves outside and a link takes its place:
	// every file still reads the same through it.
	streams := filepath.Join(out, DataDirName, streamsDirName)
	moved := filepath.Join(base, "elsewhere")
	if err := os.Rename(streams, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, streams); err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(vfs.OS{}, out, nil); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("validate through a symlinked directory: %v", err)
	}
}

func TestRestoreNeverDeletesThroughALeftoverLink(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	liveDir(t, source, 100)
	out := filepath.Join(base, "backup")
	if _, err := Create(source, out, Options{NoLink: true}); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(base, "precious")
	if err := os.MkdirAll(precious, 0o700); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(precious, "keep.txt")
	if err := os.WriteFile(keep, []byte("not the broker's"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "restored")
	// A "leftover staging directory" that is a link to somewhere else.
	if err := os.Symlink(precious, target+".restore-tmp"); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(out, target, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("restore deleted a file outside the target: %v", err)
	}
	if got := readLog(t, target); got != 100 {
		t.Fatalf("restored %d records", got)
	}
}

func TestCreateRefusesSymlinksInTheSource(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	dir, _ := liveDir(t, source, 10)
	_ = dir.Close()
	secret := filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("outside the data directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkpoints := filepath.Join(source, streamsDirName, "orders", "0", "checkpoints")
	if err := os.MkdirAll(checkpoints, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(checkpoints, "group-x.ckpt")); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(source, filepath.Join(base, "backup"), Options{}); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("backup of a data directory holding a symbolic link: %v", err)
	}
	report, err := Scrub(nil, source, nil)
	if err != nil || report.Damaged != 1 {
		t.Fatalf("scrub of a data directory holding a symbolic link: %+v %v", report, err)
	}
}
