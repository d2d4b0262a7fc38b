package main

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the binary units sizes accept, largest first so "MiB"
// matches before "B".
var sizeUnits = []struct {
	suffix     string
	multiplier int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1},
}

// parseSize reads a size like "64MiB", "512KiB" or "4096B" (a bare number
// is bytes).
func parseSize(text string) (int64, error) {
	text = strings.TrimSpace(text)
	multiplier := int64(1)
	number := text
	for _, unit := range sizeUnits {
		if trimmed, ok := strings.CutSuffix(text, unit.suffix); ok {
			number, multiplier = strings.TrimSpace(trimmed), unit.multiplier
			break
		}
	}
	value, err := strconv.ParseInt(number, 10, 64)
	if err != nil || value < 0 || value > (1<<62)/multiplier {
		return 0, fmt.Errorf("size %q: want a whole number with an optional unit B, KiB, MiB, GiB or TiB (for example 64MiB)", text)
	}
	return value * multiplier, nil
}

// sizeValue is a pflag.Value for sizes with units.
type sizeValue struct{ bytes *int64 }

func (v sizeValue) String() string {
	// Empty for zero ("none", "the default"), so --help prints no
	// "(default 0B)" after a knob whose zero means something else.
	if v.bytes == nil || *v.bytes == 0 {
		return ""
	}
	return formatSize(*v.bytes)
}

func (v sizeValue) Set(text string) error {
	n, err := parseSize(text)
	if err != nil {
		return err
	}
	*v.bytes = n
	return nil
}

func (sizeValue) Type() string { return "size" }

// formatSize prints bytes with the largest unit that divides them.
func formatSize(bytes int64) string {
	for _, unit := range sizeUnits {
		if bytes != 0 && bytes%unit.multiplier == 0 {
			return strconv.FormatInt(bytes/unit.multiplier, 10) + unit.suffix
		}
	}
	return "0B"
}
