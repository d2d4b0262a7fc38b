package vfs

import (
	"errors"
	"io/fs"
	"testing"
)

func writeFile(t *testing.T, m FS, name string, data []byte, sync bool) File {
	t.Helper()
	f, err := m.OpenFile(name, ReadWrite|Create)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.SyncData(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func readString(t *testing.T, m FS, name string) string {
	t.Helper()
	data, err := ReadFile(m, name)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(data)
}

func TestMemFSCrashKeepsOnlySyncedState(t *testing.T) {
	m := NewMemFS()
	if err := MkdirAllDurable(m, "/d"); err != nil {
		t.Fatal(err)
	}
	f := writeFile(t, m, "/d/a", []byte("synced"), true)
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XXXXXXXXXX"), 3); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/d/b", []byte("never in a synced directory"), true)

	crashed := m.CrashClone(CrashOptions{})
	if got := readString(t, crashed, "/d/a"); got != "synced" {
		t.Fatalf("after the cut /d/a = %q, want the synced contents", got)
	}
	if _, err := crashed.Stat("/d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file whose directory entry was never synced survived: %v", err)
	}
	if got := readString(t, m, "/d/a"); got != "synXXXXXXXXXX" {
		t.Fatalf("the original changed: %q", got)
	}
}

func TestMemFSSyncDataDoesNotPersistShrink(t *testing.T) {
	m := NewMemFS()
	f := writeFile(t, m, "/a", []byte("0123456789"), true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, m.CrashClone(CrashOptions{}), "/a"); got != "0123456789" {
		t.Fatalf("fdatasync persisted a shrink: %q", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, m.CrashClone(CrashOptions{}), "/a"); got != "0123" {
		t.Fatalf("fsync did not persist the shrink: %q", got)
	}
}

func TestMemFSRenameIsAtomicAcrossCrash(t *testing.T) {
	for seed := uint64(0); seed < 64; seed++ {
		m := NewMemFS()
		writeFile(t, m, "/old", []byte("old"), true)
		writeFile(t, m, "/tmp", []byte("new"), true)
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		if err := m.Rename("/tmp", "/old"); err != nil {
			t.Fatal(err)
		}
		crashed := m.CrashClone(CrashOptions{Seed: seed, KeepUnsynced: 0.5})
		got := readString(t, crashed, "/old")
		_, tmpErr := crashed.Stat("/tmp")
		switch {
		case got == "new" && errors.Is(tmpErr, fs.ErrNotExist):
		case got == "old" && tmpErr == nil:
		default:
			t.Fatalf("seed %d: half a rename survived: /old=%q /tmp err=%v", seed, got, tmpErr)
		}
	}
}

func TestMemFSTornWriteKeepsSectors(t *testing.T) {
	m := NewMemFS()
	f := writeFile(t, m, "/a", make([]byte, 4096), true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	ones := make([]byte, 4096)
	for i := range ones {
		ones[i] = 1
	}
	if _, err := f.WriteAt(ones, 0); err != nil {
		t.Fatal(err)
	}
	sawPartial := false
	for seed := uint64(0); seed < 32; seed++ {
		data := readString(t, m.CrashClone(CrashOptions{Seed: seed, KeepUnsynced: 1, Tear: true}), "/a")
		for sector := 0; sector < 8; sector++ {
			chunk := data[sector*512 : (sector+1)*512]
			if chunk != string(ones[:512]) && chunk != string(make([]byte, 512)) {
				t.Fatalf("seed %d: sector %d torn inside itself", seed, sector)
			}
		}
		if data != string(ones) {
			sawPartial = true
		}
	}
	if !sawPartial {
		t.Fatal("tearing never kept a partial write")
	}
}

func TestMemFSProcessCrashKeepsPageCache(t *testing.T) {
	m := NewMemFS()
	f := writeFile(t, m, "/a", []byte("durable"), true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("cached!"), 0); err != nil {
		t.Fatal(err)
	}
	killed := m.ProcessCrashClone()
	if got := readString(t, killed, "/a"); got != "cached!" {
		t.Fatalf("a killed process lost the page cache: %q", got)
	}
	if got := readString(t, killed.CrashClone(CrashOptions{}), "/a"); got != "durable" {
		t.Fatalf("a power cut after the kill kept unsynced data: %q", got)
	}
}

func TestMemFSCapacityAndLocks(t *testing.T) {
	m := NewMemFS()
	m.SetCapacity(100)
	f, err := m.OpenFile("/a", ReadWrite|Create)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 101), 0); !IsNoSpace(err) {
		t.Fatalf("write past capacity: %v", err)
	}
	if err := f.Allocate(0, 100); err != nil {
		t.Fatal(err)
	}
	lock, err := m.Lock("/a", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock("/a", false); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	_ = lock.Close()
	if _, err := m.Lock("/a", false); err != nil {
		t.Fatalf("lock after release: %v", err)
	}
}

func TestMemFSDirectAlignment(t *testing.T) {
	m := NewMemFS()
	f, err := m.OpenFile("/a", ReadWrite|Create|Direct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 100), 0); !errors.Is(err, ErrMisaligned) {
		t.Fatalf("misaligned direct write: %v", err)
	}
	if _, err := f.WriteAt(AlignedBuffer(DirectAlignment), DirectAlignment); err != nil {
		t.Fatalf("aligned direct write: %v", err)
	}
}

func TestInjectShortWriteAndToggle(t *testing.T) {
	m := NewMemFS()
	toggle := &Toggle{Match: KindIs(OpWrite), Err: &ShortWrite{Err: InjectedEIO}}
	fsys := Inject(m, toggle)
	f, err := fsys.OpenFile("/a", ReadWrite|Create)
	if err != nil {
		t.Fatal(err)
	}
	toggle.Set(true)
	n, err := f.WriteAt([]byte("abcdefgh"), 0)
	if n != 4 || !errors.Is(err, ErrInjected) {
		t.Fatalf("short write: n=%d err=%v", n, err)
	}
	toggle.Set(false)
	if _, err := f.WriteAt([]byte("abcdefgh"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, m, "/a"); got != "abcdefgh" {
		t.Fatalf("contents %q", got)
	}
}

func TestOSFileBasics(t *testing.T) {
	dir := t.TempDir()
	var fsys OS
	if err := MkdirAllDurable(fsys, dir+"/x/y"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(fsys, dir+"/x/y/f", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, fsys, dir+"/x/y/f"); got != "hello" {
		t.Fatalf("got %q", got)
	}
	f, err := fsys.OpenFile(dir+"/x/y/g", ReadWrite|Create)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Allocate(0, 1<<20); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(dir + "/x/y")
	if err != nil || len(names) != 2 {
		t.Fatalf("list: %v %v", names, err)
	}
	lock, err := fsys.Lock(dir+"/x/y/f", true)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
}
