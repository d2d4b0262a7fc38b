package segment

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// FuzzReadDataFormatVersion: whatever a FORMAT file holds, the reader
// returns a version or ErrInconsistent, and never panics; upgrade and
// rollback call it on directories they do not lock.
func FuzzReadDataFormatVersion(f *testing.F) {
	f.Add([]byte(`{"format":"ironbus-data","version":1}` + "\n"))
	f.Add([]byte(`{"format":"ironbus-data","version":99}`))
	f.Add([]byte(`{"format":"other","version":1}`))
	f.Add([]byte(`{"format":"ironbus-data","version":-1}`))
	f.Add([]byte(`{"format":"ironbus-data","version":1e40}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, content []byte) {
		fsys := vfs.NewMemFS()
		if err := fsys.MkdirAll("data"); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fsys, "data/FORMAT", content); err != nil {
			t.Fatal(err)
		}
		version, err := ReadDataFormatVersion(fsys, "data")
		if err != nil && !errors.Is(err, ErrInconsistent) {
			t.Fatalf("FORMAT %q: %v, want a version or ErrInconsistent", content, err)
		}
		if err != nil && version != 0 {
			t.Fatalf("FORMAT %q: version %d with an error", content, version)
		}
	})
}

func TestReadDataFormatVersionMissing(t *testing.T) {
	fsys := vfs.NewMemFS()
	if err := fsys.MkdirAll("data"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDataFormatVersion(fsys, "data"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no FORMAT: %v, want ErrNotFound", err)
	}
}
