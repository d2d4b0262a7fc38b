package testbroker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Binary is an ironbus executable the tests run as a real process, so
// exit codes, stdout/stderr separation, signals and file locks behave
// exactly as they do for an operator.
type Binary struct {
	path string
	// emulator runs the binary when it is built for another architecture
	// (qemu-arm-static): without binfmt_misc the kernel cannot exec it.
	emulator string
	prebuilt bool
}

// BuildBinary builds cmd/ironbus into dir, once per test process: a
// TestMain calls it. IRONBUS_TEST_BINARY names a binary built elsewhere
// (make dist) to test instead, and IRONBUS_TEST_EXEC an emulator to run
// it through (`make test-arm` runs the tests as arm binaries under
// qemu-user).
func BuildBinary(dir string) (*Binary, error) {
	b := &Binary{path: filepath.Join(dir, "ironbus"), emulator: os.Getenv("IRONBUS_TEST_EXEC")}
	if runtime.GOOS == "windows" {
		b.path += ".exe"
	}
	if prebuilt := os.Getenv("IRONBUS_TEST_BINARY"); prebuilt != "" {
		b.path, b.prebuilt = prebuilt, true
		return b, nil
	}
	build := exec.Command("go", "build", "-o", b.path, "github.com/ironbus/ironbus/cmd/ironbus")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building ironbus: %w", err)
	}
	return b, nil
}

// Path is the binary's file.
func (b *Binary) Path() string { return b.path }

// Prebuilt reports whether the binary came from IRONBUS_TEST_BINARY.
func (b *Binary) Prebuilt() bool { return b.prebuilt }

// Emulator is the program the binaries run through ("" when they run
// natively).
func (b *Binary) Emulator() string { return b.emulator }

// Command is exec.Command for the binary with args.
func (b *Binary) Command(args ...string) *exec.Cmd { return b.CommandOf(b.path, args...) }

// CommandOf is exec.Command for another binary the tests built for the
// same architecture (an older release, a helper program), run through
// the emulator when there is one.
func (b *Binary) CommandOf(path string, args ...string) *exec.Cmd {
	if b.emulator != "" {
		return exec.Command(b.emulator, append([]string{path}, args...)...)
	}
	return exec.Command(path, args...)
}
