//go:build linux && !arm && !386

package lazyfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// mounted serves a fresh disk at a temporary directory, or skips where
// FUSE mounts cannot be made.
func mounted(t *testing.T) (*Disk, string) {
	t.Helper()
	disk, dir := New(nil), t.TempDir()
	if err := disk.Mount(dir); err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("no FUSE here (%v): the lazyfs tests need Linux, /dev/fuse and root", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = disk.Unmount() })
	return disk, dir
}

func writeFile(t *testing.T, name string, data []byte, sync func(*os.File) error) {
	t.Helper()
	file, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync != nil {
		if err := sync(file); err != nil {
			t.Fatal(err)
		}
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	file, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
}

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

func TestCutKeepsSyncedAndDropsTheRest(t *testing.T) {
	disk, dir := mounted(t)
	synced, unsynced := filepath.Join(dir, "synced"), filepath.Join(dir, "unsynced")
	unlisted := filepath.Join(dir, "unlisted")
	writeFile(t, synced, []byte("durable"), fdatasync)
	writeFile(t, unsynced, []byte("page cache only"), nil)
	syncDir(t, dir)
	// Synced data, but the directory entry is not: lost with the cut.
	writeFile(t, unlisted, []byte("no dir sync"), (*os.File).Sync)
	// An append after the sync is not durable either.
	file, err := os.OpenFile(synced, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte(" and more")); err != nil {
		t.Fatal(err)
	}
	_ = file.Close()

	exposed, err := disk.CutPower(Cut{Mode: DropUnsynced, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The unsynced file's write, the append, and the unlisted entry.
	if exposed.Writes < 2 || exposed.DirChanges < 1 {
		t.Fatalf("the cut saw %+v unsynced; want at least 2 writes and 1 directory change", exposed)
	}
	if got, err := os.ReadFile(synced); err != nil || string(got) != "durable" {
		t.Fatalf("synced file after the cut: %q, %v", got, err)
	}
	if got, err := os.ReadFile(unsynced); err != nil || len(got) != 0 {
		t.Fatalf("unsynced file after the cut: %q, %v (want present and empty)", got, err)
	}
	if _, err := os.Stat(unlisted); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file whose directory was never synced survived: %v", err)
	}
}

func TestRenameIsDurableOnlyAfterDirectorySync(t *testing.T) {
	disk, dir := mounted(t)
	writeFile(t, filepath.Join(dir, "a.tmp"), []byte("new"), (*os.File).Sync)
	syncDir(t, dir)
	if err := os.Rename(filepath.Join(dir, "a.tmp"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := disk.CutPower(Cut{Mode: DropUnsynced}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unsynced rename survived a cut: %v", err)
	}
	if err := os.Rename(filepath.Join(dir, "a.tmp"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	if _, err := disk.CutPower(Cut{Mode: DropUnsynced}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(got) != "new" {
		t.Fatalf("a synced rename after the cut: %q, %v", got, err)
	}
}

// TestFallocateAndTruncate covers the calls the broker makes on a segment
// besides write and sync. Not mmap: a page fault on the mount from the
// process that serves it can deadlock against a garbage collection (the
// faulting thread never reaches a safe point while the stopped FUSE server
// is the only one who can answer it). The broker maps segments from its
// own process, which the power-cut harness exercises on this mount.
func TestFallocateAndTruncate(t *testing.T) {
	_, dir := mounted(t)
	name := filepath.Join(dir, "segment")
	file, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := unix.Fallocate(int(file.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if info, _ := file.Stat(); info.Size() != 1<<20 {
		t.Fatalf("size after fallocate %d", info.Size())
	}
	if _, err := file.WriteAt([]byte("sealed"), 4096); err != nil {
		t.Fatal(err)
	}
	read := make([]byte, 6)
	if _, err := file.ReadAt(read, 4096); err != nil || !bytes.Equal(read, []byte("sealed")) {
		t.Fatalf("read back %q, %v", read, err)
	}
	if err := file.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	if info, _ := file.Stat(); info.Size() != 8192 {
		t.Fatalf("size after truncate %d", info.Size())
	}
}

func TestFaults(t *testing.T) {
	disk, dir := mounted(t)
	name := filepath.Join(dir, "log")
	writeFile(t, name, []byte("before"), fdatasync)
	syncDir(t, dir)
	disk.SetFault(FailSync)
	file, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt([]byte("AFTER!"), 0); err != nil {
		t.Fatalf("writes still work under fail-sync: %v", err)
	}
	if err := fdatasync(file); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fdatasync under fail-sync: %v, want EIO", err)
	}
	disk.SetFault(DeadDisk)
	if _, err := file.ReadAt(make([]byte, 6), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read on a dead disk: %v, want EIO", err)
	}
	_ = file.Close()
	disk.SetFault(Healthy)
	if _, err := disk.CutPower(Cut{Mode: DropUnsynced}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(name); err != nil || string(got) != "before" {
		t.Fatalf("after a failed sync and a cut: %q, %v (want the synced bytes only)", got, err)
	}
}

func TestPlanCutIsReplayable(t *testing.T) {
	seen := map[CutMode]bool{}
	for seed := range uint64(64) {
		if PlanCut(seed) != PlanCut(seed) {
			t.Fatalf("seed %d planned two different cuts", seed)
		}
		seen[PlanCut(seed).Mode] = true
	}
	if len(seen) != int(cutModes) {
		t.Fatalf("64 seeds chose only the modes %v", seen)
	}
}
