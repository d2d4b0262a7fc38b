package segment

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

func TestCheckpointRoundTripAndDamage(t *testing.T) {
	mem := vfs.NewMemFS()
	d := openDir(t, mem, testOptions(20))
	l := openLog(t, d)
	if _, err := l.ReadCheckpoint("orders"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing checkpoint: %v", err)
	}
	if err := l.WriteCheckpoint("orders", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteCheckpoint("orders", []byte("version two")); err != nil {
		t.Fatal(err)
	}
	got, err := l.ReadCheckpoint("orders")
	if err != nil || string(got) != "version two" {
		t.Fatalf("read %q %v", got, err)
	}
	names, _ := l.Checkpoints()
	if len(names) != 1 || names[0] != "orders" {
		t.Fatalf("names %v", names)
	}
	file := l.path + "/" + checkpointDirName + "/orders" + checkpointSuffix
	flipByte(t, mem, file, 12)
	// A damaged checkpoint falls back to the version its write replaced,
	// and the damage is reported and quarantined.
	if got, err := l.ReadCheckpoint("orders"); err != nil || string(got) != "v1" {
		t.Fatalf("damaged checkpoint: %q %v, want the previous version", got, err)
	}
	report := l.Report()
	if len(report.Events) != 1 || report.Events[0].Reason != ReasonCorruptCheckpoint ||
		report.Events[0].DataLoss || report.Events[0].Quarantine == "" {
		t.Fatalf("report after a damaged checkpoint: %+v", report.Events)
	}
	// The damaged file was removed, so the next write keeps the intact
	// copy as its previous one, not the damaged bytes.
	if err := l.WriteCheckpoint("orders", []byte("v3")); err != nil {
		t.Fatal(err)
	}
	flipByte(t, mem, file, 12)
	if got, err := l.ReadCheckpoint("orders"); err != nil || string(got) != "v1" {
		t.Fatalf("second damage: %q %v, want the intact copy v1", got, err)
	}
	flipByte(t, mem, file+previousSuffix, 12)
	if _, err := l.ReadCheckpoint("orders"); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("both copies damaged: %v", err)
	}
	if err := l.DeleteCheckpoint("orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadCheckpoint("orders"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted checkpoint came back: %v", err)
	}
	_ = d.Close()
}

func TestCrashCheckpointReplace(t *testing.T) {
	// A power cut at any write of a replace leaves the old or the new
	// version, never a mix or a corrupt file.
	for k := int64(0); ; k++ {
		c := newCrashRig(vfs.NewMemFS(), 1<<40, vfs.CrashOptions{})
		d := openDir(t, c.fs, testOptions(21))
		l := openLog(t, d)
		if err := l.WriteCheckpoint("g", []byte("old")); err != nil {
			t.Fatal(err)
		}
		c.ops.Store(0)
		c.crashAt = k
		c.crashOpts = vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5, Reorder: true, Tear: true}
		_ = l.WriteCheckpoint("g", []byte("new version"))
		_ = d.Close()
		if !c.crashed.Load() {
			t.Logf("%d crash points checked", k)
			return
		}
		d2 := openDir(t, c.image, testOptions(21))
		got, err := openLog(t, d2).ReadCheckpoint("g")
		if err != nil || (string(got) != "old" && string(got) != "new version") {
			t.Fatalf("crash at %d: checkpoint %q, %v", k, got, err)
		}
		_ = d2.Close()
	}
}

func TestCrashCheckpointDelete(t *testing.T) {
	// A power cut at any write of a delete leaves the checkpoint whole or
	// gone; once DeleteCheckpoint returns, it is gone for good.
	for k := int64(0); ; k++ {
		c := newCrashRig(vfs.NewMemFS(), 1<<40, vfs.CrashOptions{})
		d := openDir(t, c.fs, testOptions(22))
		l := openLog(t, d)
		if err := l.WriteCheckpoint("g", []byte("kept")); err != nil {
			t.Fatal(err)
		}
		c.ops.Store(0)
		c.crashAt = k
		c.crashOpts = vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5, Reorder: true}
		deleted := l.DeleteCheckpoint("g") == nil
		_ = d.Close()
		if !c.crashed.Load() {
			c.crashAt = 1 << 62 // reopening must not count as the cut
			if !deleted {
				t.Fatal("delete failed without a crash")
			}
			if _, err := openLog(t, openDir(t, c.fs, testOptions(22))).ReadCheckpoint("g"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after a delete: %v", err)
			}
			t.Logf("%d crash points checked", k)
			return
		}
		got, err := openLog(t, openDir(t, c.image, testOptions(22))).ReadCheckpoint("g")
		if err != nil && !errors.Is(err, ErrNotFound) || err == nil && string(got) != "kept" {
			t.Fatalf("crash at write %d: %q %v", k, got, err)
		}
	}
}

func TestDeleteCheckpointMissing(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(23))
	l := openLog(t, d)
	if err := l.DeleteCheckpoint("nothing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting a missing checkpoint: %v", err)
	}
	_ = d.Close()
}
