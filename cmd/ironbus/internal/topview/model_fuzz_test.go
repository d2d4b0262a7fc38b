package topview

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ironbus/ironbus/monitor"
)

// fuzzKey turns one rune of the fuzzer's input into a key press: a few
// control characters become the keys they stand for, the rest is text.
func fuzzKey(r rune) tea.KeyPressMsg {
	switch r {
	case '\r':
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case 0x1b:
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case 0x7f:
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	return tea.KeyPressMsg{Code: r, Text: string(r)}
}

func FuzzModelKeys(f *testing.F) {
	f.Add("ssr/bi\x7f\r?", 80, 24)
	f.Add("/字字字字字字字字字字字字字字字字字字字字字字字字字字字字\r", 20, 5)
	f.Add("/\x1b?g", 0, 0)
	f.Fuzz(func(t *testing.T, keys string, width, height int) {
		width, height = width%400, height%200
		clock := time.Unix(1000, 0)
		m := NewModel(Config{Source: "fuzz", Now: func() time.Time { return clock }})
		next, _ := m.Update(snapshotMsg{sample: monitor.Sample{At: clock, Admin: admin(10, 1, 1, 1, 0)}})
		next, _ = next.Update(tea.WindowSizeMsg{Width: width, Height: height})
		for _, r := range keys {
			if r == utf8.RuneError {
				continue
			}
			next, _ = next.Update(fuzzKey(r))
		}
		model := next.(Model)
		if utf8.RuneCountInString(model.options.Filter) > maxFilterRunes {
			t.Fatalf("filter grew to %d runes", utf8.RuneCountInString(model.options.Filter))
		}
		lines := strings.Split(Render(model.Screen()), "\n")
		if height > 2 && len(lines) > height {
			t.Fatalf("%d lines on a terminal of %d", len(lines), height)
		}
		for _, line := range lines {
			if width > 0 && ansi.StringWidth(line) > width {
				t.Fatalf("line of %d cells on a terminal of %d: %q", ansi.StringWidth(line), width, line)
			}
		}
		_ = model.View()
	})
}
