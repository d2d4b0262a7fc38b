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
