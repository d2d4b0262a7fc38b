package main

import (
	"bufio"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// distMachines is the ELF machine and word size each release name promises.
var distMachines = map[string]struct {
	machine elf.Machine
	class   elf.Class
}{
	"amd64": {elf.EM_X86_64, elf.ELFCLASS64},
	"arm64": {elf.EM_AARCH64, elf.ELFCLASS64},
	"armv7": {elf.EM_ARM, elf.ELFCLASS32},
}

// TestDistBinariesAreStatic checks what `make dist` produced: every binary
// is a static ELF (no program interpreter, no shared libraries) for the
// architecture in its name, and SHA256SUMS lists each one. A dynamic binary
// would fail on an edge box without the build machine's libc. It runs only
// when make dist names the directory in IRONBUS_DIST_DIR.
func TestDistBinariesAreStatic(t *testing.T) {
	dir := os.Getenv("IRONBUS_DIST_DIR")
	if dir == "" {
		t.Skip("IRONBUS_DIST_DIR is not set: run `make dist`")
	}
	binaries, err := filepath.Glob(filepath.Join(dir, "ironbus-*-linux-*"))
	if err != nil || len(binaries) == 0 {
		t.Fatalf("no ironbus-*-linux-* binaries in %s (%v)", dir, err)
	}
	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	for _, path := range binaries {
		name := filepath.Base(path)
		arch := name[strings.LastIndex(name, "-")+1:]
		want, ok := distMachines[arch]
		if !ok {
			t.Errorf("%s: unknown architecture %q", name, arch)
			continue
		}
		checkStaticELF(t, path, want.machine, want.class)
		if !sums[name] {
			t.Errorf("%s is missing from SHA256SUMS", name)
		}
	}
}

func checkStaticELF(t *testing.T, path string, machine elf.Machine, class elf.Class) {
	t.Helper()
	file, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	defer file.Close()
	if file.Machine != machine || file.Class != class {
		t.Errorf("%s: %v %v, want %v %v", path, file.Machine, file.Class, machine, class)
	}
	for _, program := range file.Progs {
		if program.Type == elf.PT_INTERP || program.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has a %v program header: it is dynamically linked", path, program.Type)
		}
	}
	if libraries, _ := file.ImportedLibraries(); len(libraries) > 0 {
		t.Errorf("%s: needs shared libraries %v", path, libraries)
	}
}

// readSums returns the file names SHA256SUMS lists.
func readSums(t *testing.T, path string) map[string]bool {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading the checksums: %v", err)
	}
	defer file.Close()
	names := map[string]bool{}
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 2 && len(fields[0]) == 64 {
			names[strings.TrimPrefix(fields[1], "*")] = true
		}
	}
	return names
}
