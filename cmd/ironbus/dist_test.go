package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
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

// TestSystemdUnitVerifies runs systemd-analyze verify on the packaged unit,
// with ExecStart pointed at the binary under test (verify insists the
// command exists), and checks the settings the operator docs promise.
func TestSystemdUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join("..", "..", "packaging", "systemd", "ironbus.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/usr/local/bin/ironbus serve --config /etc/ironbus/ironbus.toml\n",
		"ExecReload=/bin/kill -HUP $MAINPID\n", "Restart=on-failure\n", "NoNewPrivileges=yes\n",
		"ProtectSystem=strict\n", "ReadWritePaths=/var/lib/ironbus\n", "PrivateTmp=yes\n", "MemoryMax=",
		"LimitNOFILE=",
	} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	path := filepath.Join(t.TempDir(), "ironbus.service")
	local := strings.Replace(string(unit), "ExecStart=/usr/local/bin/ironbus ", "ExecStart="+ironbus.Path()+" ", 1)
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
