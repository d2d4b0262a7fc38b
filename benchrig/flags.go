package benchrig

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// ParseSizes reads a comma-separated list of positive byte counts, the
// -sizes flag the benchmark commands share.
func ParseSizes(text string) ([]int, error) {
	var sizes []int
	for _, field := range strings.Split(text, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || size <= 0 {
			return nil, fmt.Errorf("-sizes %q: want positive byte counts", text)
		}
		sizes = append(sizes, size)
	}
	return sizes, nil
}

// ParseDuration reads a positive length of time given as seconds ("5",
// "2.5") or as a Go duration ("5s", "1m"). Its error names the text and
// the two forms; the caller prefixes the flag.
func ParseDuration(text string) (time.Duration, error) {
	if seconds, err := strconv.ParseFloat(text, 64); err == nil && seconds > 0 {
		return time.Duration(seconds * float64(time.Second)), nil
	}
	if length, err := time.ParseDuration(text); err == nil && length > 0 {
		return length, nil
	}
	return 0, fmt.Errorf("%q: want seconds (10) or a duration (10s, 1m)", text)
}

// StartCPUProfile writes a CPU profile to path (nothing when path is
// empty) until the returned function is called.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	file, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		_ = file.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = file.Close()
	}, nil
}
