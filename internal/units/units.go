package units

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// sizeUnits are the binary units sizes accept, largest first so "MiB"
// matches before "B".
var sizeUnits = []struct {
	suffix     string
	multiplier int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1},
}

// ParseSize reads a size like "64MiB", "512KiB" or "4096B" (a bare number
// is bytes).
func ParseSize(text string) (int64, error) {
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

// FormatSize prints bytes with the largest unit that divides them.
func FormatSize(bytes int64) string {
	for _, unit := range sizeUnits {
		if bytes != 0 && bytes%unit.multiplier == 0 {
			return strconv.FormatInt(bytes/unit.multiplier, 10) + unit.suffix
		}
	}
	return "0B"
}

// maxAgeDays bounds an age in days, far below where it would overflow.
const maxAgeDays = 100 * 365

// ParseAge reads a non-negative duration, with "d" for days beside Go's
// units; "" is zero.
func ParseAge(text string) (time.Duration, error) {
	if text == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(text, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 32)
		if err == nil && n <= maxAgeDays {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	age, err := time.ParseDuration(text)
	if err != nil || age < 0 {
		return 0, fmt.Errorf("age %q: want a duration like 90m, 72h or 7d", text)
	}
	return age, nil
}
