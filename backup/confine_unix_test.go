//go:build unix

package backup

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestValidateRefusesAFIFO: a FIFO in place of a file would block the
// reader forever; it is refused before it is opened.
func TestValidateRefusesAFIFO(t *testing.T) {
	base := t.TempDir()
	source := filepath.Join(base, "data")
	liveDir(t, source, 10)
	out := filepath.Join(base, "backup")
	if _, err := Create(source, out, Options{NoLink: true}); err != nil {
		t.Fatal(err)
	}
	wallclock := filepath.Join(out, DataDirName, "FORMAT")
	if err := os.Remove(wallclock); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(wallclock, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	if _, err := Validate(vfs.OS{}, out, nil); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("validate of a backup holding a FIFO: %v", err)
	}
}
