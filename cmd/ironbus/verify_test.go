package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestVerifyDemoIsClean(t *testing.T) {
	t.Parallel()
	result := runCLI(t, "verify", "--data-dir", copyTestdata(t, "demo"))
	expectCode(t, result, exitClean)
	if !strings.Contains(result.stdout, "default/0  clean") || strings.Contains(result.stdout, "hint:") {
		t.Fatalf("want a clean report without hints:\n%s", result.stdout)
	}
}

func TestVerifyDamagedNamesTheLoss(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "damaged")
	report, _ := engineReport(t, dataDir)
	result := runCLI(t, "verify", "--data-dir", dataDir)
	expectCode(t, result, exitDamage)
	var found bool
	for _, event := range report.Events {
		if event.Reason != segment.ReasonCorruptRecordBody {
			continue
		}
		found = true
		for _, want := range []string{"corrupt_record_body", event.Segment,
			fmt.Sprintf("offsets %d..%d lost", event.FirstOffset, event.LastOffset),
			fmt.Sprintf("at byte %d", event.ByteStart)} {
			if !strings.Contains(result.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, result.stdout)
			}
		}
	}
	if !found {
		t.Fatalf("the engine reports no corrupt_record_body event in the damaged test data: %+v", report)
	}
	if !strings.Contains(result.stdout, "ironbus repair --data-dir "+dataDir) {
		t.Errorf("output lacks the repair hint:\n%s", result.stdout)
	}
}

func TestVerifyJSON(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		name     string
		wantCode int
		wantLoss bool
	}{
		{"demo", exitClean, false},
		{"damaged", exitDamage, true},
	} {
		result := runCLI(t, "verify", "--json", "--data-dir", copyTestdata(t, test.name))
		expectCode(t, result, test.wantCode)
		var output struct {
			Schema   string              `json:"schema"`
			OK       bool                `json:"ok"`
			ExitCode int                 `json:"exit_code"`
			Logs     []segment.LogReport `json:"logs"`
		}
		if err := json.Unmarshal([]byte(result.stdout), &output); err != nil {
			t.Fatalf("%s: stdout is not one JSON object: %s\n%s", test.name, err.Error(), result.stdout)
		}
		if output.Schema != verifySchema || output.ExitCode != test.wantCode || output.OK != (test.wantCode == exitClean) {
			t.Errorf("%s: schema %q exit_code %d ok %v", test.name, output.Schema, output.ExitCode, output.OK)
		}
		if len(output.Logs) != 1 || output.Logs[0].HasDataLoss() != test.wantLoss {
			t.Errorf("%s: logs %+v, want one with data loss %v", test.name, output.Logs, test.wantLoss)
		}
	}
}

func TestVerifyMissingDirectory(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	result := runCLI(t, "verify", "--data-dir", missing)
	expectCode(t, result, exitNotFound)
	if !strings.HasPrefix(result.stderr, "ironbus: ") || !strings.Contains(result.stderr, "check --data-dir") {
		t.Errorf("stderr does not say what to do: %q", result.stderr)
	}
	result = runCLI(t, "verify", "--json", "--data-dir", missing)
	expectCode(t, result, exitNotFound)
	var output errorOutput
	if err := json.Unmarshal([]byte(result.stdout), &output); err != nil || output.Schema != errorSchema || output.ExitCode != exitNotFound {
		t.Errorf("stdout is not an error object: %q", result.stdout)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("verify created %s", missing)
	}
}

func TestVerifyUnreadable(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"too new":    `{"format":"ironbus-data","version":999}`,
		"unreadable": `not json`,
	} {
		dataDir := copyTestdata(t, "demo")
		if err := os.WriteFile(filepath.Join(dataDir, "FORMAT"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		result := runCLI(t, "verify", "--data-dir", dataDir)
		if result.code != exitUnreadable {
			t.Errorf("%s: exit code %d, want %d; stderr %q", name, result.code, exitUnreadable, result.stderr)
		}
	}
}

// TestLockedByBroker holds the directory the way a broker does, from this
// process: flock locks belong to open file descriptions, so the child's
// shared lock conflicts with it exactly as with another broker process.
func TestLockedByBroker(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	broker, err := segment.Open(vfs.OS{}, dataDir, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	for _, args := range [][]string{
		{"verify", "--data-dir", dataDir},
		{"peek", "--data-dir", dataDir},
		{"dump", "--data-dir", dataDir},
	} {
		result := runCLI(t, args...)
		expectCode(t, result, exitLocked)
		if !strings.Contains(result.stderr, lockedMessage) {
			t.Errorf("%s: stderr %q lacks %q", args[0], result.stderr, lockedMessage)
		}
	}
}

// TestOfflineCommandsChangeNothing checks the promise every offline command
// makes: the directory is byte-for-byte the same afterwards, damaged or not.
func TestOfflineCommandsChangeNothing(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"demo", "damaged"} {
		dataDir := copyTestdata(t, name)
		before := treeDigest(t, dataDir)
		for _, args := range [][]string{
			{"verify", "--data-dir", dataDir},
			{"verify", "--json", "--data-dir", dataDir},
			{"peek", "--data-dir", dataDir, "--limit", "0"},
			{"dump", "--data-dir", dataDir},
			{"scrub", "--data-dir", dataDir},
			{"scrub", "--json", "--data-dir", dataDir},
			{"backup", "--data-dir", dataDir, "--out", filepath.Join(t.TempDir(), "backup")},
		} {
			runCLI(t, args...)
			if after := treeDigest(t, dataDir); !maps.Equal(before, after) {
				t.Fatalf("%s: ironbus %s changed the directory:\nbefore %v\nafter  %v", name, args[0], before, after)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	for _, test := range []struct {
		args []string
		want string
	}{
		{[]string{"verify"}, "--data-dir is required"},
		{[]string{"peek"}, "--data-dir is required"},
		{[]string{"dump", "--json"}, "--data-dir is required"},
		{[]string{"verify", "--data-dir", dataDir, "--bogus"}, "unknown flag"},
		{[]string{"peek", "--data-dir", dataDir, "--limit", "-1"}, "--limit"},
		{[]string{"peek", "--data-dir", dataDir, "--stream", "../etc"}, "--stream"},
		{[]string{"verify", "--data-dir", dataDir, "extra"}, "unknown command"},
		{[]string{"frobnicate"}, "unknown command"},
	} {
		result := runCLI(t, test.args...)
		if result.code != exitUsage || !strings.Contains(result.stderr, test.want) {
			t.Errorf("ironbus %q: exit %d stderr %q; want exit %d mentioning %q",
				test.args, result.code, result.stderr, exitUsage, test.want)
		}
	}
}

func TestHelpTeaches(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"version", "verify", "peek", "dump"} {
		result := runCLI(t, command, "--help")
		expectCode(t, result, exitClean)
		for _, want := range []string{"Examples:", "ironbus " + command, "Flags:"} {
			if !strings.Contains(result.stdout, want) {
				t.Errorf("%s --help lacks %q:\n%s", command, want, result.stdout)
			}
		}
	}
}

// TestVerifyReportsSymlinksAsDamage: the broker never makes a link, and
// one in a data directory leads outside it (a restore used to copy
// through it); verify calls it damage even when the bytes it leads to
// are a sound segment.
func TestVerifyReportsSymlinksAsDamage(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	logDir := filepath.Join(dataDir, "streams", "default", "0")
	names, err := filepath.Glob(filepath.Join(logDir, "*.seg"))
	if err != nil || len(names) < 2 {
		t.Fatalf("segments of the demo: %v %v", names, err)
	}
	first := names[0]
	outside := filepath.Join(t.TempDir(), "outside.seg")
	if err := os.Rename(first, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, first); err != nil {
		t.Fatal(err)
	}
	result := runCLI(t, "verify", "--data-dir", dataDir)
	expectCode(t, result, exitDamage)
	rel, _ := filepath.Rel(dataDir, first)
	if !strings.Contains(result.stdout, filepath.ToSlash(rel)) || !strings.Contains(result.stdout, "symbolic link") {
		t.Fatalf("verify does not name the link:\n%s", result.stdout)
	}
}
