package profiling

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStartStopWritesBothProfiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	run, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.TempDir()); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second profile while one runs: %v", err)
	}
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu.pprof", "heap.pprof"} {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.Size() == 0 {
			t.Fatalf("%s: %v", name, err)
		}
	}
	again, err := Start(dir)
	if err != nil {
		t.Fatalf("a profile after the first stopped: %v", err)
	}
	if err := again.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartRefusesAFileAsTheDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(file); err == nil || errors.Is(err, ErrBusy) {
		t.Fatalf("a regular file as the directory: %v", err)
	}
}
