package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

type backupJSON struct {
	Schema   string `json:"schema"`
	ExitCode int    `json:"exit_code"`
	Files    int    `json:"files"`
	Logs     []struct {
		Dir        string `json:"dir"`
		Stream     string `json:"stream"`
		NextOffset uint64 `json:"next_offset"`
		Segments   int    `json:"segments"`
	} `json:"logs"`
}

// TestBackupOfLiveBrokerRestoresEveryAcknowledgedRecord: a backup taken
// while a producer writes holds every record acknowledged before it
// started, only records acknowledged by its end, as one gapless prefix;
// the restore passes verify and scrub and a broker serves it.
func TestBackupOfLiveBrokerRestoresEveryAcknowledgedRecord(t *testing.T) {
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "64KiB")
	before := produceUntil(t, broker.Addr(), 3_000, 256, 0, nil)
	var during map[uint64]string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		during = produceUntil(t, broker.Addr(), 6_000, 64, 0, nil)
	}()
	out := filepath.Join(base, "backup")
	result := runCLI(t, "backup", "--data-dir", dataDir, "--out", out, "--json")
	wg.Wait()
	expectCode(t, result, exitClean)
	var made backupJSON
	if err := json.Unmarshal([]byte(result.stdout), &made); err != nil || made.Schema != backupSchema || len(made.Logs) == 0 {
		t.Fatalf("backup --json: %v\n%s", err, result.stdout)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker stop exited %d", code)
	}
	next := made.Logs[0].NextOffset
	if next < uint64(len(before)) {
		t.Fatalf("backup holds offsets below %d; %d were acknowledged before it started", next, len(before))
	}
	target := filepath.Join(base, "restored")
	expectCode(t, runCLI(t, "restore", "--from", out, "--data-dir", target), exitClean)
	expectCode(t, runCLI(t, "verify", "--data-dir", target), exitClean)
	expectCode(t, runCLI(t, "scrub", "--data-dir", target), exitClean)
	restored := ironbus.Serve(t, "serve", "--data-dir", target, "--addr", "127.0.0.1:0")
	stored := readAllRecords(t, restored.Addr())
	if uint64(len(stored)) != next {
		t.Fatalf("restored broker serves %d records, the backup holds %d", len(stored), next)
	}
	for i, message := range stored {
		if message.Offset != uint64(i) {
			t.Fatalf("record %d has offset %d: the backup is not a gapless prefix", i, message.Offset)
		}
	}
	checkAcknowledged(t, before, stored)
	for _, message := range stored[len(before):] {
		if payload, ok := during[message.Offset]; !ok || payload != string(message.Payload) {
			t.Fatalf("the backup holds offset %d (%q), never acknowledged by its end", message.Offset, message.Payload)
		}
	}
	t.Logf("%d acknowledged before the backup, %d during; the backup holds %d in %d segments",
		len(before), len(during), next, made.Logs[0].Segments)
	restored.Stop(syscall.SIGTERM)
}

func TestRestoreRefusesTamperedBackupAndFullTarget(t *testing.T) {
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "64KiB")
	produceUntil(t, broker.Addr(), 2_000, 256, 0, nil)
	broker.Stop(syscall.SIGTERM)
	out := filepath.Join(base, "backup")
	expectCode(t, runCLI(t, "backup", "--data-dir", dataDir, "--out", out, "--no-link"), exitClean)
	expectCode(t, runCLI(t, "backup", "--data-dir", dataDir, "--out", out), exitUsage)
	expectCode(t, runCLI(t, "restore", "--from", out, "--data-dir", dataDir), exitUsage)
	segments, _ := filepath.Glob(filepath.Join(out, "data", "streams", "orders", "0", "*.seg"))
	if len(segments) < 2 {
		t.Fatalf("backup holds %d segments", len(segments))
	}
	flipFileByte(t, segments[0], 5000)
	target := filepath.Join(base, "restored")
	result := runCLI(t, "restore", "--from", out, "--data-dir", target, "--json")
	expectCode(t, result, exitUnreadable)
	if !strings.Contains(result.stdout, "does not match the manifest") {
		t.Fatalf("restore of a tampered backup says:\n%s", result.stdout)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("restore wrote %s before refusing: %v", target, err)
	}
	expectCode(t, runCLI(t, "restore", "--from", filepath.Join(base, "nothing"), "--data-dir", target), exitNotFound)
}

func TestScrubExitCodes(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "64KiB")
	produceUntil(t, broker.Addr(), 2_000, 256, 0, nil)
	// scrub takes no lock: it runs beside the broker.
	live := runCLI(t, "scrub", "--data-dir", dataDir, "--json")
	expectCode(t, live, exitClean)
	if !strings.Contains(live.stdout, `"schema":"`+scrubSchema+`"`) {
		t.Fatalf("scrub --json:\n%s", live.stdout)
	}
	broker.Stop(syscall.SIGTERM)
	segments, _ := filepath.Glob(filepath.Join(dataDir, "streams", "orders", "0", "*.seg"))
	flipFileByte(t, segments[0], 4096+300)
	result := runCLI(t, "scrub", "--data-dir", dataDir)
	expectCode(t, result, exitDamage)
	if !strings.Contains(result.stdout, "damaged") || !strings.Contains(result.stdout, "lost") {
		t.Fatalf("scrub of a damaged directory says:\n%s", result.stdout)
	}
	expectCode(t, runCLI(t, "scrub", "--data-dir", filepath.Join(dataDir, "missing")), exitNotFound)
	expectCode(t, runCLI(t, "scrub"), exitUsage)
}

func flipFileByte(t *testing.T, name string, at int64) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0x08
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
