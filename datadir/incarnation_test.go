package datadir

import (
	"bytes"
	"errors"
	"log/slog"
	"path"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func openIncarnation(t *testing.T, fsys vfs.FS, random []byte, logger *slog.Logger) Incarnation {
	t.Helper()
	logs, err := segment.Open(fsys, root, storage())
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	opts := IncarnationOptions{Logger: logger}
	if random != nil {
		opts.Random = bytes.NewReader(random)
	}
	inc, err := OpenIncarnation(fsys, logs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

func TestIncarnationIsMadeOnceAndKept(t *testing.T) {
	mem := vfs.NewMemFS()
	first := openIncarnation(t, mem, nil, nil)
	if first.ID == 0 || first.Reason != IncarnationNew || !first.Created() {
		t.Fatalf("first open: %+v", first)
	}
	again := openIncarnation(t, mem, nil, nil)
	if again.ID != first.ID || again.Reason != IncarnationKept || again.Created() {
		t.Fatalf("second open: %+v, first %+v", again, first)
	}
	if got, err := ReadIncarnation(mem, root); err != nil || got != first.ID {
		t.Fatalf("ReadIncarnation = %08x, %v; want %08x", got, err, first.ID)
	}
}

func TestIncarnationSkipsZero(t *testing.T) {
	inc := openIncarnation(t, vfs.NewMemFS(), []byte{0, 0, 0, 0, 7, 0, 0, 0}, nil)
	if inc.ID != 7 {
		t.Fatalf("id %d, want 7 (zero is never an id)", inc.ID)
	}
}

func TestReadIncarnationCreatesNothing(t *testing.T) {
	mem := vfs.NewMemFS()
	if _, err := ReadIncarnation(mem, root); !errors.Is(err, ErrNoIncarnation) {
		t.Fatalf("missing directory: %v", err)
	}
	if _, err := mem.Stat(path.Join(root, IncarnationFileName)); err == nil {
		t.Fatal("ReadIncarnation wrote a file")
	}
}

// A directory that holds streams but has no id was restored or copied: it
// gets a new id, and says so, rather than passing for a new directory.
func TestIncarnationOfAForeignDirectory(t *testing.T) {
	mem := seed(t)
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	inc := openIncarnation(t, mem, nil, logger)
	if inc.Reason != IncarnationForeign || inc.ID == 0 {
		t.Fatalf("restored directory: %+v", inc)
	}
	if !strings.Contains(logged.String(), "reason=foreign") {
		t.Fatalf("not logged: %q", logged.String())
	}
	// A catalog alone is enough to tell a used directory.
	bare := vfs.NewMemFS()
	if err := vfs.MkdirAllDurable(bare, root); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(bare, path.Join(root, catalog.FileName), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if inc := openIncarnation(t, bare, nil, slog.New(slog.DiscardHandler)); inc.Reason != IncarnationForeign {
		t.Fatalf("directory with a catalog only: %+v", inc)
	}
}

func TestDamagedIncarnationIsReplaced(t *testing.T) {
	mem := vfs.NewMemFS()
	first := openIncarnation(t, mem, []byte{1, 0, 0, 0}, nil)
	name := path.Join(root, IncarnationFileName)
	data, err := vfs.ReadFile(mem, name)
	if err != nil {
		t.Fatal(err)
	}
	// A digit flipped by the disk: still JSON, no longer the id it was.
	flipped := bytes.Replace(data, []byte(`"incarnation":1`), []byte(`"incarnation":3`), 1)
	if bytes.Equal(flipped, data) {
		t.Fatalf("unexpected file %s", data)
	}
	if err := vfs.WriteFileAtomic(mem, name, flipped); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIncarnation(mem, root); !errors.Is(err, ErrNoIncarnation) {
		t.Fatalf("damaged file read as %v", err)
	}
	inc := openIncarnation(t, mem, []byte{9, 0, 0, 0}, slog.New(slog.DiscardHandler))
	if inc.Reason != IncarnationDamaged || inc.ID != 9 || inc.ID == first.ID {
		t.Fatalf("after damage: %+v (was %+v)", inc, first)
	}
}

// TestCrashDuringIncarnationCreation cuts power at every write of the
// creation: a restart finds either no id (none was ever handed out, so a
// new one is right) or the whole id, never a damaged file, and the id
// handed out survives.
func TestCrashDuringIncarnationCreation(t *testing.T) {
	base := vfs.NewMemFS()
	logs, err := segment.Open(base, root, storage())
	if err != nil {
		t.Fatal(err)
	}
	_ = logs.Close()
	random := []byte{0x44, 0x33, 0x22, 0x11}
	const want = 0x11223344
	sawNone, sawID := false, false
	for cut := int64(0); ; cut++ {
		var options []vfs.CrashOptions
		for seed := range uint64(3) {
			keep := float64(seed) / 2
			options = append(options, vfs.CrashOptions{Seed: seed, KeepUnsynced: keep, Reorder: keep > 0, Tear: keep > 0})
		}
		power := crashtest.CutAtWrite(base.CrashClone(vfs.CrashOptions{}), cut, options...)
		power.Pause()
		logs, err := segment.Open(power.FS(), root, storage())
		if err != nil {
			t.Fatal(err)
		}
		power.Count()
		inc, err := OpenIncarnation(power.FS(), logs, IncarnationOptions{Random: bytes.NewReader(random)})
		_ = logs.Close()
		if !power.Cut() {
			if err != nil || inc.ID != want {
				t.Fatalf("uncut open: %+v, %v", inc, err)
			}
			if cut < 3 || !sawNone || !sawID {
				t.Fatalf("%d cuts; saw no id %v, the id %v", cut, sawNone, sawID)
			}
			t.Logf("%d cuts", cut)
			return
		}
		for i, image := range power.Images() {
			got, err := ReadIncarnation(image, root)
			switch {
			case err == nil && got == want:
				sawID = true
			case errors.Is(err, ErrNoIncarnation) && !fileExists(image, path.Join(root, IncarnationFileName)):
				sawNone = true
			default:
				t.Fatalf("cut %d image %d: %08x, %v", cut, i, got, err)
			}
			again := openIncarnation(t, image, []byte{5, 0, 0, 0}, nil)
			if (err == nil && again != Incarnation{ID: want, Reason: IncarnationKept}) ||
				(err != nil && again != Incarnation{ID: 5, Reason: IncarnationNew}) {
				t.Fatalf("cut %d image %d: reopened as %+v", cut, i, again)
			}
		}
	}
}

func fileExists(fsys vfs.FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}
