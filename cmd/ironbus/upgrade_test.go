package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// installFixture puts an "installed" ironbus at bin/ironbus that differs
// from the binary under test only by trailing bytes (an ELF runs the same
// with them), so upgrade has a distinct old binary that still runs.
func installFixture(t *testing.T) (dest string) {
	t.Helper()
	if ironbus.Emulator() != "" {
		t.Skip("upgrade runs `X version --json` directly, which needs binfmt_misc for a binary under emulation")
	}
	content, err := os.ReadFile(ironbus.Path())
	if err != nil {
		t.Fatal(err)
	}
	dest = filepath.Join(t.TempDir(), "ironbus")
	if err := os.WriteFile(dest, append(content, "older build"...), 0o755); err != nil {
		t.Fatal(err)
	}
	return dest
}

func TestUpgradeAndRollbackCommands(t *testing.T) {
	dest := installFixture(t)
	dataDir := copyTestdata(t, "demo")

	upgraded := runCLI(t, "upgrade", "--new-binary", ironbus.Path(), "--dest", dest, "--data-dir", dataDir, "--json")
	expectCode(t, upgraded, exitClean)
	var output upgradeOutput
	if err := json.Unmarshal([]byte(upgraded.stdout), &output); err != nil {
		t.Fatalf("upgrade --json: %v\n%s", err, upgraded.stdout)
	}
	if output.Schema != upgradeSchema || output.Previous != dest+".previous" || output.DataDirFormat != 1 ||
		strings.Join(output.Steps, ",") != "stage,keep,swap" {
		t.Fatalf("upgrade --json: %+v", output)
	}
	expectSameBytes(t, dest, ironbus.Path())

	rolled := runCLI(t, "rollback", "--dest", dest, "--data-dir", dataDir)
	expectCode(t, rolled, exitClean)
	if !strings.Contains(rolled.stdout, "restore") || !strings.Contains(rolled.stdout, "installed "+dest) {
		t.Fatalf("rollback should show its steps:\n%s", rolled.stdout)
	}
	expectSameBytes(t, dest+".previous", ironbus.Path())
	if version := runCLIWith(t, dest, "version"); !strings.Contains(version, "formats:") {
		t.Fatalf("the rolled-back binary does not run: %q", version)
	}
}

func TestUpgradeRefusals(t *testing.T) {
	dest := installFixture(t)
	installed, _ := os.ReadFile(dest)

	missing := runCLI(t, "upgrade", "--new-binary", dest+".missing", "--dest", dest)
	expectCode(t, missing, exitNotFound)

	script := filepath.Join(t.TempDir(), "not-ironbus")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notIronbus := runCLI(t, "upgrade", "--new-binary", script, "--dest", dest)
	expectCode(t, notIronbus, exitUnreadable)
	if !strings.Contains(notIronbus.stderr, "SHA256SUMS") {
		t.Errorf("the refusal should say what to check:\n%s", notIronbus.stderr)
	}

	newer := t.TempDir()
	if err := os.WriteFile(filepath.Join(newer, "FORMAT"), []byte(`{"format":"ironbus-data","version":99}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tooOld := runCLI(t, "upgrade", "--new-binary", ironbus.Path(), "--dest", dest, "--data-dir", newer)
	expectCode(t, tooOld, exitUnreadable)
	if !strings.Contains(tooOld.stderr, "format 99") {
		t.Errorf("the refusal should name the directory's format:\n%s", tooOld.stderr)
	}

	noPrevious := runCLI(t, "rollback", "--dest", dest)
	expectCode(t, noPrevious, exitNotFound)
	expectCode(t, runCLI(t, "upgrade", "--dest", dest), exitUsage)

	if after, _ := os.ReadFile(dest); string(after) != string(installed) {
		t.Fatal("a refused upgrade changed the installed binary")
	}
}

func expectSameBytes(t *testing.T, a, b string) {
	t.Helper()
	left, errLeft := os.ReadFile(a)
	right, errRight := os.ReadFile(b)
	if errLeft != nil || errRight != nil || string(left) != string(right) {
		t.Fatalf("%s and %s differ (%v, %v)", a, b, errLeft, errRight)
	}
}

// runCLIWith runs another ironbus binary and returns its stdout.
func runCLIWith(t *testing.T, binary string, args ...string) string {
	t.Helper()
	out, err := ironbus.CommandOf(binary, args...).Output()
	if err != nil {
		t.Fatalf("%s %q: %v", binary, args, err)
	}
	return string(out)
}
