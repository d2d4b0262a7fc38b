package crashtest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

// TestCutAtWrite: the k-th mutation takes the image of what came before
// it and fails, everything after fails too, and writes made while paused
// are not counted.
func TestCutAtWrite(t *testing.T) {
	mem := vfs.NewMemFS()
	cut := crashtest.CutAtWrite(mem, 2, vfs.CrashOptions{}, vfs.CrashOptions{KeepUnsynced: 1})
	cut.Pause()
	if err := cut.FS().MkdirAll("/paused"); err != nil {
		t.Fatal(err)
	}
	cut.Count()
	for i := range 2 {
		if err := cut.FS().MkdirAll(fmt.Sprint("/d", i)); err != nil {
			t.Fatalf("mutation %d before the cut: %v", i, err)
		}
	}
	if cut.Cut() || cut.Image() != nil {
		t.Fatal("the power went before the cut")
	}
	if err := cut.FS().MkdirAll("/d2"); !errors.Is(err, crashtest.ErrPowerCut) || !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("the cut mutation: %v", err)
	}
	if _, err := cut.FS().List("/"); !errors.Is(err, crashtest.ErrPowerCut) {
		t.Fatalf("a read after the cut: %v", err)
	}
	images := cut.Images()
	if !cut.Cut() || len(images) != 2 || cut.Image() != images[0] {
		t.Fatalf("cut %v, %d images", cut.Cut(), len(images))
	}
	// Nothing was synced: the image that keeps unsynced changes has the
	// directories made before the cut, and not the one the cut refused.
	names, err := images[1].List("/")
	if err != nil || fmt.Sprint(names) != "[d0 d1 paused]" {
		t.Fatalf("the image holds %v (%v)", names, err)
	}
}
