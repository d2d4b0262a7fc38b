package brokerproc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestStartReportsABrokerThatNeverServes: a binary that exits at once is
// ErrNotServing, and its temporary directories are gone.
func TestStartReportsABrokerThatNeverServes(t *testing.T) {
	exitAtOnce, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) on this system")
	}
	t.Setenv("TMPDIR", t.TempDir())
	if _, err := Start(Options{Binary: exitAtOnce, TLS: true}); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Start of false(1): %v", err)
	}
	if _, err := Start(Options{Binary: filepath.Join(t.TempDir(), "missing")}); err == nil || errors.Is(err, ErrNotServing) {
		t.Fatalf("Start of a missing binary: %v", err)
	}
	left, err := os.ReadDir(os.Getenv("TMPDIR"))
	if err != nil || len(left) != 0 {
		t.Fatalf("left behind: %v %v", left, err)
	}
}

func TestReadProcessField(t *testing.T) {
	if runtime.GOOS != "linux" {
		if readProcessField(os.Getpid(), "status", "VmRSS") != 0 {
			t.Fatal("a figure the system does not expose must read 0")
		}
		return
	}
	if rss := readProcessField(os.Getpid(), "status", "VmRSS"); rss < 1<<20 {
		t.Fatalf("VmRSS of this test %d bytes", rss)
	}
	if readProcessField(os.Getpid(), "status", "NoSuchField") != 0 || readProcessField(-1, "status", "VmRSS") != 0 {
		t.Fatal("an absent field or process must read 0")
	}
}
