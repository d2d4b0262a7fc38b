package benchrig

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
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
