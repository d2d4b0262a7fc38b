package arena

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// Line is one entry of a Budget: the bytes one pool may ever hold and the
// configuration knob that decides them, so an operator reading a refusal
// knows which flag to turn.
type Line struct {
	Name  string // what the memory is for: "connection read buffers"
	Knob  string // what sets its size: "--max-connections × 64 KiB"
	Bytes int64
}

// Budget is the RAM budget of one process: every pool registers the bytes
// it may ever hold, and boot compares the total with --ram-ceiling. It is
// an ordinary value (tests build as many as they like) and safe for
// concurrent use.
//
// A Budget describes configuration, not current use: closing a pool does
// not remove its line, because the cap was configured for the life of the
// process.
type Budget struct {
	mu struct {
		sync.Mutex
		lines []Line
	}
}

// NewBudget returns an empty budget.
func NewBudget() *Budget {
	return &Budget{}
}

// Register records that the pool called name may hold bytes, sized by
// knob. A negative size would hide memory from the ceiling, so it panics:
// it can only be a programming error (the pool constructors validate their
// sizes before registering).
func (budget *Budget) Register(name, knob string, bytes int64) {
	if bytes < 0 {
		panic(fmt.Sprintf("arena: Register(%q) with negative bytes %d", name, bytes))
	}
	budget.mu.Lock()
	defer budget.mu.Unlock()
	budget.mu.lines = append(budget.mu.lines, Line{Name: name, Knob: knob, Bytes: bytes})
}

// Total returns the sum of every registered line. It saturates at
// math.MaxInt64 instead of wrapping, so an absurd configuration is still
// reported as over any ceiling.
func (budget *Budget) Total() int64 {
	budget.mu.Lock()
	defer budget.mu.Unlock()
	return totalOf(budget.mu.lines)
}

// Lines returns a copy of the registered lines in registration order.
func (budget *Budget) Lines() []Line {
	budget.mu.Lock()
	defer budget.mu.Unlock()
	return append([]Line(nil), budget.mu.lines...)
}

// Check returns nil when ceiling is 0 (no ceiling) or the total fits under
// it. Otherwise it returns an error wrapping ErrOverCeiling whose message
// lists every line with its knob, so the refusal at boot says what to
// change. A negative ceiling is an ErrInvalidArgument.
func (budget *Budget) Check(ceiling int64) error {
	if ceiling < 0 {
		return fmt.Errorf("%w: negative RAM ceiling %d", ErrInvalidArgument, ceiling)
	}
	lines := budget.Lines()
	total := totalOf(lines)
	if ceiling == 0 || total <= ceiling {
		return nil
	}
	var message strings.Builder
	fmt.Fprintf(&message, "the configured pools need %s but the ceiling (--ram-ceiling) is %s\n",
		formatBytesExact(total), formatBytesExact(ceiling))
	for _, line := range lines {
		fmt.Fprintf(&message, "  %s: %s", line.Name, FormatBytes(line.Bytes))
		if line.Knob != "" {
			fmt.Fprintf(&message, " (%s)", line.Knob)
		}
		message.WriteByte('\n')
	}
	fmt.Fprintf(&message, "  total: %s, over the ceiling by %s\n",
		formatBytesExact(total), formatBytesExact(total-ceiling))
	message.WriteString("lower one of these knobs, or raise --ram-ceiling")
	return fmt.Errorf("%w: %s", ErrOverCeiling, message.String())
}

// totalOf sums lines, saturating instead of overflowing.
func totalOf(lines []Line) int64 {
	var total int64
	for _, line := range lines {
		if total > math.MaxInt64-line.Bytes {
			return math.MaxInt64
		}
		total += line.Bytes
	}
	return total
}

// byteUnits are the binary units FormatBytes uses, smallest first.
var byteUnits = [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatBytes renders a byte count in binary units: "512 B", "64 MiB",
// "1.5 GiB". Whole multiples print without decimals; others keep up to two,
// trailing zeros dropped, so the result may be rounded (formatBytesExact
// adds the exact count where rounding could hide a difference).
func FormatBytes(bytes int64) string {
	sign := ""
	if bytes < 0 {
		sign = "-"
	}
	magnitude := magnitudeOf(bytes)
	unit := unitOf(magnitude)
	if unit == 0 {
		return sign + strconv.FormatUint(magnitude, 10) + " B"
	}
	divisor := uint64(1) << (10 * unit)
	if magnitude%divisor == 0 {
		return sign + strconv.FormatUint(magnitude/divisor, 10) + " " + byteUnits[unit]
	}
	scaled := math.Round(float64(magnitude)/float64(divisor)*100) / 100
	if scaled >= 1024 && unit < len(byteUnits)-1 {
		// 1023.999 KiB rounds to 1024 KiB; say 1 MiB instead.
		scaled, unit = scaled/1024, unit+1
	}
	value := strconv.FormatFloat(scaled, 'f', 2, 64)
	value = strings.TrimRight(strings.TrimRight(value, "0"), ".")
	return sign + value + " " + byteUnits[unit]
}

// formatBytesExact is FormatBytes plus the exact count when the rounded
// form is not exact, so "64 MiB" never hides one byte over a 64 MiB
// ceiling in a refusal message.
func formatBytesExact(bytes int64) string {
	magnitude := magnitudeOf(bytes)
	if magnitude%(uint64(1)<<(10*unitOf(magnitude))) == 0 {
		return FormatBytes(bytes)
	}
	return FormatBytes(bytes) + " (" + strconv.FormatInt(bytes, 10) + " bytes)"
}

// magnitudeOf returns |bytes| as an unsigned number; negating in uint64
// (two's complement) is correct even for math.MinInt64.
func magnitudeOf(bytes int64) uint64 {
	if bytes < 0 {
		return -uint64(bytes)
	}
	return uint64(bytes)
}

// unitOf returns the index in byteUnits of the largest unit not larger
// than magnitude (0, bytes, for anything under 1 KiB).
func unitOf(magnitude uint64) int {
	unit := 0
	for unit < len(byteUnits)-1 && magnitude >= uint64(1)<<(10*(unit+1)) {
		unit++
	}
	return unit
}
