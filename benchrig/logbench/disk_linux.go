package logbench

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// deviceWrittenBytes returns the bytes the block device holding dir has
// written since boot (sectors written, field 7 of its stat file), so a run
// can report what reached the device, journal and preallocation included.
func deviceWrittenBytes(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	path := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) < 7 {
		return 0, fmt.Errorf("%s: unexpected format", path)
	}
	sectors, err := strconv.ParseUint(fields[6], 10, 64)
	return sectors * 512, err
}
