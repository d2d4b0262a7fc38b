package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ironbus/ironbus/internal/testbroker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// ironbus is the binary under test, built once by TestMain: the tests run
// it as a real process, so exit codes, stdout/stderr separation and file
// locks behave exactly as they do for an operator.
var ironbus *testbroker.Binary

// buildDir is where TestMain puts the binaries it builds for the tests.
var buildDir string

func TestMain(m *testing.M) {
	if backend := os.Getenv("IRONBUS_TEST_LOOP"); backend != "" {
		if err := loop.Available(backend); err != nil {
			// Said loudly, and not a failure: CI machines differ in what
			// their kernels and sandboxes allow.
			fmt.Fprintf(os.Stderr, "SKIP: the %s backend does not run here: %v\n", backend, err)
			os.Exit(0)
		}
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ironbus-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	buildDir = dir
	if ironbus, err = testbroker.BuildBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if ironbus.Prebuilt() {
		fmt.Fprintf(os.Stderr, "testing the prebuilt %s (run through %q)\n", ironbus.Path(), ironbus.Emulator())
		return m.Run()
	}
	// No test may pick up the developer's own current context.
	_ = os.Setenv("IRONBUS_CONFIG_DIR", filepath.Join(dir, "config"))
	return m.Run()
}

// cliResult is what one run of the binary produced.
type cliResult struct {
	stdout string
	stderr string
	code   int
}

func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	command := ironbus.Command(args...)
	command.Stdout, command.Stderr = &stdout, &stderr
	err := command.Run()
	result := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		result.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running ironbus %q: %s", args, err.Error())
	}
	return result
}

// expectCode fails the test, showing both streams, unless the run exited
// with want.
func expectCode(t *testing.T, result cliResult, want int) {
	t.Helper()
	if result.code != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", result.code, want, result.stdout, result.stderr)
	}
}

// copyTestdata copies a checked-in data directory of the segment package
// to a temporary directory, so no test can touch the originals.
func copyTestdata(t *testing.T, name string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(target, os.DirFS(filepath.Join("..", "..", "segment", "testdata", name))); err != nil {
		t.Fatal(err)
	}
	return target
}

// engineReport asks the storage engine itself what is in the log, so the
// tests check the CLI against the engine rather than against numbers that
// change whenever the test data is regenerated.
func engineReport(t *testing.T, dataDir string) (segment.LogReport, uint64) {
	t.Helper()
	dir, err := segment.Open(vfs.OS{}, dataDir, segment.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	log, err := dir.OpenLog(segment.LogID{Stream: segment.DefaultStream})
	if err != nil {
		t.Fatal(err)
	}
	report, err := log.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return report, log.Committed()
}

// treeDigest names every file and directory under root with its mode and,
// for files, the SHA-256 of its content.
func treeDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	digest := map[string]string{}
	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := entry.Info()
		if err != nil {
			return err
		}
		relative, _ := filepath.Rel(root, path)
		if entry.IsDir() {
			digest[relative] = "dir " + info.Mode().String()
			return nil
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(content)
		digest[relative] = info.Mode().String() + " " + hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return digest
}
