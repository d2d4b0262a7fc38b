package topview

import (
	"math"
	"strings"
)

// sparkBlocks are the eight heights of a sparkline cell, lowest first.
var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws the last width values as block characters scaled to the
// largest of them, so the shape shows the trend whatever the magnitude.
// All-zero input draws the lowest block (a flat line, not a blank: the
// reader sees there was data, and it was idle). NaN and negative values
// count as zero.
func Sparkline(values []float64, width int) string {
	if width <= 0 || len(values) == 0 {
		return ""
	}
	if len(values) > width {
		values = values[len(values)-width:]
	}
	peak := 0.0
	for _, v := range values {
		if v > peak && !math.IsInf(v, 1) {
			peak = v
		}
	}
	var b strings.Builder
	for _, v := range values {
		b.WriteRune(sparkBlocks[sparkLevel(v, peak)])
	}
	return b.String()
}

func sparkLevel(v, peak float64) int {
	if peak <= 0 || math.IsNaN(v) || v <= 0 {
		return 0
	}
	level := int(math.Ceil(min(v, peak) / peak * float64(len(sparkBlocks)-1)))
	return min(max(level, 0), len(sparkBlocks)-1)
}
