package brokerproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// readProcessField reads "Name: value" from /proc/PID/<file> ("kB" values
// in bytes); 0 where the system does not say (not Linux, no permission).
func readProcessField(pid int, file, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		rest, found := strings.CutPrefix(line, field+":")
		if !found {
			continue
		}
		words := strings.Fields(rest)
		if len(words) == 0 {
			return 0
		}
		value, err := strconv.ParseInt(words[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(words) > 1 && words[1] == "kB" {
			value <<= 10
		}
		return value
	}
	return 0
}
