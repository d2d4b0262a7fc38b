package topview

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
)

func admin(uptime float64, produced, bytes, delivered uint64, busy float64) *health.Admin {
	return &health.Admin{Schema: health.AdminSchema, Version: "test", UptimeSeconds: uptime,
		Readiness: health.Readiness{Ready: true},
		Totals:    health.Totals{ProducedRecords: produced, ProducedBytes: bytes, DeliveredRecords: delivered, AckedRecords: delivered},
		Streams:   []health.Stream{{Name: "orders", ProducedRecords: produced, Records: produced, NextOffset: produced}},
		Groups: []health.Group{
			{Stream: "orders", Name: "billing", Type: "work", Lag: 5, InFlight: 1, Redelivered: 9},
			{Stream: "orders", Name: "audit", Type: "work", Lag: 50, InFlight: 3, DeadLettered: 2},
			{Stream: "events", Name: "mailer", Type: "broadcast", Lag: 0, InFlight: 7},
		},
		Reactors: []health.Reactor{{Index: 0, BusySeconds: busy}},
		Fsync:    health.Fsync{Syncs: produced / 10, P50Seconds: 0.0005, P99Seconds: 0.004, RecordsPerSync: 10},
		Memory:   health.Memory{BudgetBytes: 32 << 20, CeilingBytes: 64 << 20, HeadroomBytes: 32 << 20},
		Storage:  health.Storage{DiskBudgetBytes: 200 << 20, DiskHeadroomBytes: 10 << 20, DiskUsedBytes: 50 << 20},
	}
}

func TestSparkline(t *testing.T) {
	for _, c := range []struct {
		values []float64
		width  int
		want   string
	}{
		{[]float64{0, 1, 2, 4, 8}, 10, "▁▂▃▅█"},
		{[]float64{0, 0, 0}, 10, "▁▁▁"},
		{[]float64{1, 2, 3, 4}, 2, "▇█"},
		{[]float64{math.NaN(), -1, math.Inf(1), 5}, 10, "▁▁██"},
		{nil, 10, ""},
		{[]float64{1}, 0, ""},
	} {
		if got := Sparkline(c.values, c.width); got != c.want {
			t.Errorf("Sparkline(%v, %d) = %q, want %q", c.values, c.width, got, c.want)
		}
	}
}

func FuzzSparkline(f *testing.F) {
	f.Add(1.0, 2.0, -3.0, 40)
	f.Add(math.NaN(), math.Inf(1), math.Inf(-1), 1)
	f.Fuzz(func(t *testing.T, a, b, c float64, width int) {
		width %= 200
		line := Sparkline([]float64{a, b, c}, width)
		if !utf8.ValidString(line) || utf8.RuneCountInString(line) != min(max(width, 0), 3) {
			t.Fatalf("Sparkline(%v %v %v, %d) = %q", a, b, c, width, line)
		}
	})
}

func groupNames(groups []health.Group) []string {
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.Name
	}
	return names
}

func TestGroupsSortAndFilter(t *testing.T) {
	groups := admin(1, 1, 1, 1, 0).Groups
	for _, c := range []struct {
		options TableOptions
		want    []string
	}{
		{TableOptions{Sort: SortLag}, []string{"audit", "billing", "mailer"}},
		{TableOptions{Sort: SortLag, Reverse: true}, []string{"mailer", "billing", "audit"}},
		{TableOptions{Sort: SortInFlight}, []string{"mailer", "audit", "billing"}},
		{TableOptions{Sort: SortRedelivered}, []string{"billing", "mailer", "audit"}},
		{TableOptions{Sort: SortDeadLettered}, []string{"audit", "mailer", "billing"}},
		{TableOptions{Sort: SortName}, []string{"mailer", "audit", "billing"}},
		{TableOptions{Sort: SortLag, Filter: "ORD"}, []string{"audit", "billing"}},
		{TableOptions{Sort: SortLag, Filter: "mail"}, []string{"mailer"}},
		{TableOptions{Sort: SortLag, Filter: "nothing"}, []string{}},
	} {
		if got := groupNames(Groups(groups, c.options)); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.options, got, c.want)
		}
	}
	if groups[0].Name != "billing" {
		t.Error("Groups reordered its input")
	}
}

func TestSortColumnsCycleAndParse(t *testing.T) {
	column := SortLag
	seen := map[SortColumn]bool{}
	for range sortColumns {
		seen[column] = true
		parsed, ok := ParseSortColumn(strings.ReplaceAll(column.String(), " ", "-"))
		if !ok || parsed != column {
			t.Errorf("ParseSortColumn(%q) = %v, %v", column.String(), parsed, ok)
		}
		column = column.Next()
	}
	if column != SortLag || len(seen) != int(sortColumns) {
		t.Errorf("s does not cycle through every column: %v", seen)
	}
	if _, ok := ParseSortColumn("size"); ok {
		t.Error("an unknown column parsed")
	}
}

func FuzzParseSortColumn(f *testing.F) {
	f.Add("lag")
	f.Add("Dead-Lettered")
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, name string) {
		column, ok := ParseSortColumn(name)
		if ok && (column < 0 || column >= sortColumns) {
			t.Fatalf("%q parsed to %d", name, column)
		}
		_ = column.String()
	})
}

func liveScreen(t *testing.T) Screen {
	t.Helper()
	start := time.Unix(1000, 0)
	var history monitor.History
	rates, ok := monitor.ComputeRates(monitor.Sample{At: start, Admin: admin(10, 1000, 100_000, 500, 1)},
		monitor.Sample{At: start.Add(time.Second), Admin: admin(11, 3000, 300_000, 900, 1.5)})
	if !ok {
		t.Fatal("no rates")
	}
	history.Add(rates)
	return Screen{Source: "live test", Admin: admin(11, 3000, 300_000, 900, 1.5), History: &history, Interval: time.Second, Plain: true}
}

func TestRenderShowsEverySection(t *testing.T) {
	text := Render(liveScreen(t))
	for _, want := range []string{"IronBus top · live test · version test", "ready", "Throughput", "2000 rec/s", "Fsync", "p99 4ms",
		"RAM        budget 32 MiB of 64 MiB ceiling, 32 MiB headroom", "Disk       budget 50 MiB of 200 MiB used (25%, 10 MiB headroom) · logs", "Streams (1 of 1)", "orders/0", "Groups (3 of 3) · sorted by lag ↓",
		"audit", "mailer", "Recovery · 0 logs clean", "reactors busy 50% now"} {
		if !strings.Contains(text, want) {
			t.Errorf("screen lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b[") {
		t.Error("a plain screen carries escape codes")
	}
}

func TestRenderMarksAStaleOrMissingBroker(t *testing.T) {
	screen := liveScreen(t)
	screen.Err = errors.New("no broker answers")
	if text := Render(screen); !strings.Contains(text, "STALE (showing the last snapshot): no broker answers; retrying every 1s") ||
		!strings.Contains(text, "orders/0") {
		t.Errorf("stale screen:\n%s", text)
	}
	screen.Admin = nil
	if text := Render(screen); !strings.Contains(text, "UNREACHABLE: no broker answers") {
		t.Errorf("unreachable screen:\n%s", text)
	}
}

func TestRenderClipsToTheTerminal(t *testing.T) {
	screen := liveScreen(t)
	screen.Width, screen.Height = 40, 10
	lines := strings.Split(Render(screen), "\n")
	if len(lines) != 10 {
		t.Errorf("%d lines on a 10-line terminal", len(lines))
	}
	for _, line := range lines {
		if utf8.RuneCountInString(line) > 40 {
			t.Errorf("line wider than 40: %q", line)
		}
	}
	if !strings.Contains(lines[len(lines)-2], "more lines") || !strings.HasPrefix(lines[len(lines)-1], "s sort") {
		t.Errorf("clipped screen should end with the count and the keys:\n%s", strings.Join(lines, "\n"))
	}
}

func key(text string) tea.KeyPressMsg {
	switch text {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	r, _ := utf8.DecodeRuneInString(text)
	return tea.KeyPressMsg{Code: r, Text: text}
}

func press(t *testing.T, m Model, keys ...string) (Model, tea.Cmd) {
	t.Helper()
	var cmd tea.Cmd
	for _, k := range keys {
		var next tea.Model
		next, cmd = m.Update(key(k))
		m = next.(Model)
	}
	return m, cmd
}

func TestModelKeys(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := NewModel(Config{Source: "test", Now: func() time.Time { return clock }})
	next, _ := m.Update(snapshotMsg{sample: monitor.Sample{At: clock, Admin: admin(10, 1, 1, 1, 0)}})
	m = next.(Model)
	m, _ = press(t, m, "s", "s", "r")
	if m.options.Sort != SortRedelivered || !m.options.Reverse {
		t.Errorf("after s s r: %+v", m.options)
	}
	m, _ = press(t, m, "/", "b", "i", "x", "backspace", "enter")
	if m.options.Filter != "bi" || m.editingFilter {
		t.Errorf("filter %q, editing %v", m.options.Filter, m.editingFilter)
	}
	if text := Render(m.Screen()); !strings.Contains(text, "Groups (1 of 3)") || strings.Contains(text, "mailer") {
		t.Errorf("filtered screen:\n%s", text)
	}
	m, _ = press(t, m, "/", "z", "esc")
	if m.options.Filter != "" {
		t.Errorf("esc in the filter should clear it, got %q", m.options.Filter)
	}
	if _, cmd := press(t, m, "q"); cmd == nil {
		t.Fatal("q gave no command")
	} else if _, quit := cmd().(tea.QuitMsg); !quit {
		t.Error("q does not quit")
	}
}

func TestModelKeepsTheLastSnapshotWhenAFetchFails(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := NewModel(Config{Source: "test", Interval: time.Second, Now: func() time.Time { return clock }})
	for i, msg := range []snapshotMsg{
		{sample: monitor.Sample{At: clock, Admin: admin(10, 100, 1, 1, 0)}},
		{sample: monitor.Sample{At: clock.Add(time.Second), Admin: admin(11, 300, 1, 1, 0)}},
		{err: errors.New("connection refused")},
	} {
		next, cmd := m.Update(msg)
		m = next.(Model)
		if cmd == nil {
			t.Fatalf("message %d: no next refresh scheduled", i)
		}
	}
	if m.current.Admin == nil || m.err == nil || m.history.Len() != 1 {
		t.Fatalf("after a failure: admin %v, err %v, %d rates", m.current.Admin != nil, m.err, m.history.Len())
	}
	if text := Render(m.Screen()); !strings.Contains(text, "STALE") || !strings.Contains(text, "200 rec/s") {
		t.Errorf("screen after a failure:\n%s", text)
	}
}

// BenchmarkRenderThousandGroups is one frame of a broker with 1000 groups:
// the cost of a refresh, which runs every interval and on every key.
func BenchmarkRenderThousandGroups(b *testing.B) {
	doc := admin(10, 1, 1, 1, 0)
	for i := range 1000 {
		doc.Groups = append(doc.Groups, health.Group{Stream: "orders", Name: "group-" + strings.Repeat("x", i%7), Lag: uint64(i)})
	}
	screen := Screen{Source: "bench", Admin: doc, History: &monitor.History{}, Width: 200, Height: 60}
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(screen)
	}
}

func TestRenderFormatsAScreenfulOfGroups(t *testing.T) {
	doc := admin(10, 1, 1, 1, 0)
	for i := range 1000 {
		doc.Groups = append(doc.Groups, health.Group{Stream: "bulk", Name: "g", Lag: uint64(i)})
	}
	text := Render(Screen{Source: "test", Admin: doc, History: &monitor.History{}, Height: 200, Plain: true})
	if strings.Count(text, "\n") != 199 || !strings.Contains(text, "more lines") || !strings.Contains(text, "Groups (1003 of 1003)") {
		t.Errorf("a screenful of 1003 groups:\n%s", text)
	}
}
