package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/ironbus/ironbus/internal/testbroker"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
)

// TestNewerDataDirIsRefusedUntouched plays a downgrade onto a directory a
// newer IronBus wrote. A newer FORMAT (the layout version): every command,
// serve included, refuses with exit 4, names the versions, says to
// upgrade. A newer segment header under a known layout: the offline tools
// refuse the same way, and serve starts (the broker always starts, I3)
// with that log frozen read-only and the reason in its log. Either way
// every byte stays as it was.
func TestNewerDataDirIsRefusedUntouched(t *testing.T) {
	newer := segment.EncryptedDataFormatVersion + 1
	t.Run("FORMAT", func(t *testing.T) {
		dataDir := copyTestdata(t, "demo")
		formatFile := fmt.Sprintf(`{"format":"ironbus-data","version":%d}`+"\n", newer)
		if err := os.WriteFile(filepath.Join(dataDir, "FORMAT"), []byte(formatFile), 0o644); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("data directory format %d, this binary knows %d", newer, segment.EncryptedDataFormatVersion)
		expectRefusedUntouched(t, dataDir, want, "serve", "verify", "dump")
	})
	t.Run("segment header", func(t *testing.T) {
		dataDir := copyTestdata(t, "demo")
		bumpSegmentVersion(t, filepath.Join(dataDir, "streams", "default", "0", "00000000000000000000.seg"))
		want := fmt.Sprintf("segment format version %d (this binary knows %d)", format.SegmentFormatVersion+1, format.SegmentFormatVersion)
		expectRefusedUntouched(t, dataDir, want, "verify", "dump")
		before := treeDigest(t, dataDir)
		broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
		if code := broker.Stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("serve stopped with %d:\n%s", code, broker.Logs())
		}
		if logs := broker.Logs(); !strings.Contains(logs, want) {
			t.Errorf("the broker log should say why the log is frozen (%q):\n%s", want, logs)
		}
		after := treeDigest(t, dataDir)
		// The broker's own notes beside the data: who held the lock, the
		// recovery report that records the frozen log (I3), the
		// wall-clock high-water retention keeps and the broker clock's
		// floor (I6), and the stream catalog that adopts the logs it
		// found (docs/STREAMS.md).
		delete(after, "OWNER")
		delete(after, "streams.json")
		delete(after, "recovery-report.json")
		delete(after, "wallclock")
		delete(after, "clock")
		if !maps.Equal(before, after) {
			t.Fatalf("serve changed the newer data:\nbefore %v\nafter  %v", before, after)
		}
	})
}

func expectRefusedUntouched(t *testing.T, dataDir, want string, commands ...string) {
	t.Helper()
	before := treeDigest(t, dataDir)
	for _, command := range commands {
		args := []string{command, "--data-dir", dataDir}
		if command == "serve" {
			args = append(args, "--addr", "127.0.0.1:0")
		}
		result := runCLI(t, args...)
		expectCode(t, result, exitUnreadable)
		if said := result.stdout + result.stderr; !strings.Contains(said, want) || !strings.Contains(said, "upgrade") {
			t.Errorf("%s: the refusal should name the versions (%q) and say to upgrade:\n%s", command, want, result.stderr)
		}
		if after := treeDigest(t, dataDir); !maps.Equal(before, after) {
			t.Fatalf("%s changed the newer data directory:\nbefore %v\nafter  %v", command, before, after)
		}
	}
}

// bumpSegmentVersion rewrites a segment header as a newer format would:
// version + 1 under a valid checksum, so only the version is unknown.
func bumpSegmentVersion(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[8], data[9] = byte(format.SegmentFormatVersion+1), 0
	crc := format.CRC(data[0:60])
	data[60], data[61], data[62], data[63] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeThenDowngradeOnOneDataDir runs an older release of this
// repository (the first commit with serve, same on-disk format) on a data
// directory this binary wrote, then this binary again on what the older
// one added: the older binary must read it and write to it, or refuse it
// with a clear error, and never damage it.
func TestUpgradeThenDowngradeOnOneDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an older release from git history")
	}
	older := buildOlderRelease(t)
	dataDir := t.TempDir()

	current := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	publishThrough(t, ironbus.Command("pub", "--addr", current.Addr(), "--stream", "orders"), "new", 100)
	if code := current.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("current broker stopped with %d:\n%s", code, current.Logs())
	}

	before := treeDigest(t, dataDir)
	verified := runOlder(t, older, "verify", "--data-dir", dataDir)
	if verified.code != exitClean {
		// Refusing is allowed; touching is not, and the reason must be clear.
		if after := treeDigest(t, dataDir); !maps.Equal(before, after) {
			t.Fatalf("the older binary refused (%d) but changed the directory:\n%s", verified.code, verified.stderr)
		}
		if verified.code != exitUnreadable || !strings.Contains(verified.stderr, "newer") {
			t.Fatalf("the older binary failed without a clear refusal (exit %d):\n%s", verified.code, verified.stderr)
		}
		t.Skipf("the older binary refuses this directory cleanly: %s", verified.stderr)
	}
	previous := testbroker.StartProcess(t, ironbus.CommandOf(older, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0"))
	publishThrough(t, ironbus.CommandOf(older, "pub", "--addr", previous.Addr(), "--stream", "orders"), "old", 50)
	if code := previous.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("older broker stopped with %d:\n%s", code, previous.Logs())
	}

	expectCode(t, runCLI(t, "verify", "--data-dir", dataDir), exitClean)
	dump := runCLI(t, "dump", "--data-dir", dataDir, "--stream", "orders")
	expectCode(t, dump, exitClean)
	lines := strings.Split(strings.TrimSpace(dump.stdout), "\n")
	if len(lines) != 150 || !strings.Contains(lines[0], `"new-0"`) || !strings.Contains(lines[149], `"old-49"`) {
		t.Fatalf("after the round trip dump shows %d records, first %q last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}

// publishThrough publishes prefix-0 … prefix-(n-1) through a pub command.
func publishThrough(t *testing.T, pub *exec.Cmd, prefix string, n int) {
	t.Helper()
	var input strings.Builder
	for i := range n {
		fmt.Fprintf(&input, "%s-%d\n", prefix, i)
	}
	pub.Stdin = strings.NewReader(input.String())
	var stderr bytes.Buffer
	pub.Stderr = &stderr
	out, err := pub.Output()
	if err != nil || len(strings.Fields(string(out))) != n {
		t.Fatalf("pub %s: %v, %d offsets printed\n%s", prefix, err, len(strings.Fields(string(out))), stderr.String())
	}
}

func runOlder(t *testing.T, binary string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	command := ironbus.CommandOf(binary, args...)
	command.Stdout, command.Stderr = &stdout, &stderr
	err := command.Run()
	result := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		result.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running the older binary: %v", err)
	}
	return result
}

// buildOlderRelease builds ironbus as of the first commit that had serve.
// A shallow or missing git history (some CI checkouts) skips the test and
// says so.
func buildOlderRelease(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: cannot build an older release")
	}
	out, err := exec.Command("git", "log", "--diff-filter=A", "--format=%H", "--", "serve.go").Output()
	commits := strings.Fields(string(out))
	if err != nil || len(commits) == 0 {
		t.Skipf("no git history with cmd/ironbus/serve.go here (shallow clone?): %v; fetch the full history to run this test", err)
	}
	commit := commits[len(commits)-1]
	source := t.TempDir()
	archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", commit, source)
	archive.Dir = filepath.Join("..", "..") // from a subdirectory git archives only that subtree
	if output, err := archive.CombinedOutput(); err != nil {
		t.Skipf("cannot extract commit %s: %v %s", commit, err, output)
	}
	binary := filepath.Join(buildDir, "ironbus-"+commit[:12])
	build := exec.Command("go", "build", "-o", binary, "./cmd/ironbus")
	build.Dir = source
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := build.CombinedOutput(); err != nil {
		if ironbus.Emulator() != "" {
			// The first releases did not compile for 32-bit arm (an int
			// compared with math.MaxUint32): there is no older armv7 binary.
			t.Skipf("the older release %s does not build for %s: %v\n%s", commit[:12], runtime.GOARCH, err, output)
		}
		t.Fatalf("building the older release %s: %v\n%s", commit, err, output)
	}
	t.Logf("older release: commit %s", commit[:12])
	return binary
}
