package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestRepairPlanChangesNothing(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "damaged")
	before := treeDigest(t, dataDir)
	result := runCLI(t, "repair", "--data-dir", dataDir)
	expectCode(t, result, exitDamage)
	if !strings.Contains(result.stdout, "corrupt_record_body") || !strings.Contains(result.stdout, "--apply") {
		t.Fatalf("the plan should name the damage and how to apply it:\n%s", result.stdout)
	}
	if after := treeDigest(t, dataDir); !maps.Equal(before, after) {
		t.Fatal("repair without --apply changed the directory")
	}
}

func TestRepairApplyQuarantinesAndVerifiesClean(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "damaged")
	result := runCLI(t, "repair", "--data-dir", dataDir, "--apply", "--json")
	expectCode(t, result, exitClean)
	var output repairOutput
	if err := json.Unmarshal([]byte(result.stdout), &output); err != nil {
		t.Fatalf("repair --json: %v\n%s", err, result.stdout)
	}
	if output.Schema != repairSchema || !output.Applied || !output.OK || len(output.Logs) != 1 ||
		output.Logs[0].LossRecords != 1 || output.Logs[0].Events[0].Quarantine == "" {
		t.Fatalf("repair report: %s", result.stdout)
	}
	quarantined := filepath.Join(dataDir, output.Logs[0].Events[0].Quarantine)
	if info, err := os.Stat(quarantined); err != nil || info.Size() == 0 {
		t.Fatalf("quarantine copy %s: %v", quarantined, err)
	}
	verified := runCLI(t, "verify", "--data-dir", dataDir)
	expectCode(t, verified, exitClean)
	if !strings.Contains(verified.stdout, "known gaps: 1 offset") {
		t.Fatalf("verify after repair should show the known gap:\n%s", verified.stdout)
	}
}

func TestRepairRefusesWhileLocked(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	broker, err := segment.Open(vfs.OS{}, dataDir, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	expectCode(t, runCLI(t, "repair", "--data-dir", dataDir, "--apply"), exitLocked)
}

// TestRepairForceRewritesDamagedCheckpoints: verify reports a damaged
// checkpoint; --force without --apply is refused; --apply --force rewrites it
// from its previous copy, so verify is clean again and the damaged bytes
// are kept under quarantine/.
func TestRepairForceRewritesDamagedCheckpoints(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	dir, err := segment.Open(vfs.OS{}, dataDir, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := dir.OpenLog(segment.LogID{Stream: segment.DefaultStream})
	if err != nil {
		t.Fatal(err)
	}
	for _, cursor := range []string{"cursor one", "cursor two"} {
		if err := log.WriteCheckpoint("group-g", []byte(cursor)); err != nil {
			t.Fatal(err)
		}
	}
	if err := dir.Close(); err != nil {
		t.Fatal(err)
	}
	checkpoint := filepath.Join(dataDir, "streams", segment.DefaultStream, "0", "checkpoints", "group-g.ckpt")
	flipFileByte(t, checkpoint, 12)
	plan := runCLI(t, "verify", "--data-dir", dataDir)
	expectCode(t, plan, exitDamage)
	if !strings.Contains(plan.stdout, "corrupt_checkpoint") {
		t.Fatalf("verify does not name the damaged checkpoint:\n%s", plan.stdout)
	}
	expectCode(t, runCLI(t, "repair", "--data-dir", dataDir, "--force"), exitUsage)
	expectCode(t, runCLI(t, "repair", "--data-dir", dataDir, "--apply", "--force"), exitClean)
	expectCode(t, runCLI(t, "verify", "--data-dir", dataDir), exitClean)
	quarantined, _ := filepath.Glob(filepath.Join(dataDir, "quarantine", segment.DefaultStream, "0", "group-g.ckpt.damaged"))
	if len(quarantined) != 1 {
		t.Fatal("the damaged checkpoint was not kept under quarantine/")
	}
	dir, err = segment.Open(vfs.OS{}, dataDir, segment.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	log, err = dir.OpenLog(segment.LogID{Stream: segment.DefaultStream})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := log.ReadCheckpoint("group-g"); err != nil || string(data) != "cursor one" {
		t.Fatalf("repaired checkpoint: %q %v, want the previous copy", data, err)
	}
}
