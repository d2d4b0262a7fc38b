package arena

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// statusPath is where Linux reports this process's memory counters.
const statusPath = "/proc/self/status"

// ReadAnonymousOf is ReadAnonymous for another process: how benchmarks and
// tests watch a broker they started.
func ReadAnonymousOf(pid int) (int64, error) {
	return readStatusFieldAt(fmt.Sprintf("/proc/%d/status", pid), "RssAnon")
}

// ReadRSS returns the resident set size of this process in bytes (VmRSS in
// /proc/self/status): heap, stacks, binary and off-heap mappings alike.
// Tests and benchmarks use it to check that memory follows configuration.
func ReadRSS() (int64, error) {
	return readStatusField("VmRSS")
}

// ReadAnonymous returns the resident anonymous memory of this process in
// bytes (RssAnon, Linux 4.5+): RSS without the mapped binary and files, so
// it moves with slabs and the heap only. On older kernels it returns an
// error wrapping ErrUnsupported.
func ReadAnonymous() (int64, error) {
	return readStatusField("RssAnon")
}

// readStatusField reads one "Name:   1234 kB" line of /proc/self/status,
// in bytes.
func readStatusField(field string) (int64, error) {
	return readStatusFieldAt(statusPath, field)
}

func readStatusFieldAt(statusPath, field string) (int64, error) {
	status, err := os.ReadFile(statusPath)
	if err != nil {
		return 0, fmt.Errorf("arena: read %s: %w", statusPath, err)
	}
	for line := range strings.Lines(string(status)) {
		value, found := strings.CutPrefix(line, field+":")
		if !found {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("arena: unexpected %s line in %s: %q", field, statusPath, strings.TrimSpace(line))
		}
		kibibytes, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("arena: parse %s in %s: %w", field, statusPath, err)
		}
		return kibibytes * 1024, nil
	}
	return 0, fmt.Errorf("%w: no %s line in %s (kernel too old?)", ErrUnsupported, field, statusPath)
}
