package topview

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
)

// Screen is everything one frame shows.
type Screen struct {
	// Source says where the figures come from: "live 127.0.0.1:7778" or
	// "offline /var/lib/ironbus".
	Source string
	Admin  *health.Admin
	// History holds the rates so far; empty offline and after one sample.
	History *monitor.History
	// Interval is the refresh interval, shown beside the sparklines;
	// Manual means there is none (offline: `g` reads again).
	Interval time.Duration
	Manual   bool
	// Offline marks a document read from a data directory: it has no
	// uptime, readiness, counters, fsync or RAM figures to show.
	Offline bool
	Options TableOptions
	// Err is the last fetch failure; with Admin set, the figures are the
	// last good ones and are marked stale.
	Err error
	// Note is an extra line under the header (offline limitations).
	Note string
	// EditingFilter shows the filter prompt; Help the key help.
	EditingFilter bool
	Help          bool
	// Plain turns styling off (for --once and pipes); Width and Height,
	// when not zero, clip the frame to the terminal.
	Plain         bool
	Width, Height int
}

// slowFsyncSeconds is how long a running fsync must take to be flagged.
const slowFsyncSeconds = 1.0

// sparkWidth is how many intervals a sparkline shows.
const sparkWidth = 40

// The three styles of the frame, as the SGR sequences that start them:
// bold, bold in the terminal's red, and faint. Three fixed sequences need
// no styling library; lipgloss, which wrote these same bytes, cost 0.14 MB
// of the binary (docs/PACKAGING.md).
const (
	titleStyle = "\x1b[1m"
	alertStyle = "\x1b[1;31m"
	dimStyle   = "\x1b[2m"
	styleReset = "\x1b[m"
)

// style wraps each line of text in style, tabs as four spaces so that a
// cell count holds on any terminal.
func (s Screen) style(style, text string) string {
	if s.Plain {
		return text
	}
	lines := strings.Split(strings.ReplaceAll(text, "\t", "    "), "\n")
	for i, line := range lines {
		lines[i] = style + line + styleReset
	}
	return strings.Join(lines, "\n")
}

// Render draws the frame as text, one line per row of the terminal.
func Render(s Screen) string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	lines = append(lines, s.header())
	if s.Err != nil {
		state := "UNREACHABLE"
		if s.Admin != nil {
			state = "STALE (showing the last snapshot)"
		}
		retry := "retrying every " + s.Interval.String()
		if s.Manual {
			retry = "press g to read again"
		}
		lines = append(lines, s.style(alertStyle, fmt.Sprintf("%s: %s; %s", state, s.Err, retry)))
	}
	if s.Note != "" {
		lines = append(lines, s.style(dimStyle, s.Note))
	}
	if s.Help {
		lines = append(lines, "", helpText)
	}
	if s.Admin == nil {
		if s.Err == nil {
			add("waiting for the first snapshot…")
		}
		return s.clip(lines)
	}
	lines = append(lines, "")
	if s.Offline {
		lines = append(lines, s.offlineStorage())
	} else {
		lines = append(lines, s.throughput()...)
		lines = append(lines, s.resources()...)
	}
	lines = append(lines, "")
	lines = append(lines, s.streamTable()...)
	lines = append(lines, "")
	lines = append(lines, s.groupTable()...)
	lines = append(lines, "")
	lines = append(lines, s.recovery()...)
	return s.clip(lines)
}

const helpText = `keys: s  sort groups by the next column (lag, in flight, redelivered, dead-lettered, name)
      r  reverse the order        /  filter streams and groups by name (enter keeps, esc clears)
      g  read again (offline)     ?  this help                q  quit (also ctrl+c)`

func (s Screen) header() string {
	parts := []string{"IronBus top", s.Source}
	if a := s.Admin; a != nil && s.Offline {
		parts = append(parts, "io "+orDash(a.Storage.IOMode), "durability "+orDash(a.Storage.Durability))
	} else if a != nil {
		uptime := time.Duration(a.UptimeSeconds * float64(time.Second)).Round(time.Second)
		parts = append(parts, "version "+a.Version, "up "+uptime.String(), readiness(a.Readiness),
			"io "+orDash(a.Storage.IOMode), "durability "+orDash(a.Storage.Durability))
	}
	return s.style(titleStyle, strings.Join(parts, " · "))
}

func readiness(r health.Readiness) string {
	if r.Ready {
		return "ready"
	}
	return "NOT READY (" + r.Reason + ")"
}

func (s Screen) throughput() []string {
	latest, ok := s.History.Latest()
	if !ok {
		t := s.Admin.Totals
		return []string{
			s.style(titleStyle, "Totals since start") + s.style(dimStyle, " (rates need two snapshots)"),
			fmt.Sprintf("  produced   %d records, %s", t.ProducedRecords, arena.FormatBytes(int64(t.ProducedBytes))),
			fmt.Sprintf("  delivered  %d records, %d redelivered, %d acked, %d dead-lettered",
				t.DeliveredRecords, t.RedeliveredRecords, t.AckedRecords, t.DeadLetteredRecords),
		}
	}
	series := func(pick func(monitor.Rates) float64) string { return Sparkline(s.History.Series(pick), sparkWidth) }
	return []string{
		s.style(titleStyle, "Throughput") + s.style(dimStyle, fmt.Sprintf(" (per second; last %d × %s)", s.History.Len(), s.Interval)),
		fmt.Sprintf("  produced     %10s rec/s %s", count(latest.ProducedRecords), series(func(r monitor.Rates) float64 { return r.ProducedRecords })),
		fmt.Sprintf("  produced     %12s/s %s", arena.FormatBytes(int64(latest.ProducedBytes)), series(func(r monitor.Rates) float64 { return r.ProducedBytes })),
		fmt.Sprintf("  delivered    %10s rec/s %s", count(latest.DeliveredRecords), series(func(r monitor.Rates) float64 { return r.DeliveredRecords })),
		fmt.Sprintf("  acked        %10s rec/s %s", count(latest.AckedRecords), series(func(r monitor.Rates) float64 { return r.AckedRecords })),
		fmt.Sprintf("  redelivered  %10s rec/s, dead-lettered %s rec/s", count(latest.RedeliveredRecords), count(latest.DeadLetteredRecords)),
	}
}

func (s Screen) resources() []string {
	a := s.Admin
	f, m, st := a.Fsync, a.Memory, a.Storage
	fsync := fmt.Sprintf("Fsync      p50 %s  p99 %s  max %s (latest %d)  %.1f records per fsync",
		duration(f.P50Seconds), duration(f.P99Seconds), duration(f.MaxSeconds), f.RecentSamples, f.RecordsPerSync)
	if latest, ok := s.History.Latest(); ok {
		fsync += fmt.Sprintf("  %s fsyncs/s", count(latest.Syncs))
	}
	lines := []string{fsync}
	// An fsync in flight is normal; one running for a second is a device
	// in trouble (a hung sync never returns, and the writer waits on it).
	if f.RunningSeconds >= slowFsyncSeconds {
		lines = append(lines, s.style(alertStyle, "           an fsync has been running for "+duration(f.RunningSeconds)))
	}
	lines = append(lines,
		"RAM        "+memory(m),
		fmt.Sprintf("Disk       %slogs %s · dead letters %s · quarantine %s · %s", diskBudget(st), arena.FormatBytes(st.LogBytes),
			arena.FormatBytes(st.DeadLetterBytes), arena.FormatBytes(st.QuarantineBytes), filesystem(st)),
	)
	if len(a.Reactors) > 0 || a.Connections.Max > 0 {
		lines = append(lines, fmt.Sprintf("Load       %d of %d connections open · reactors busy %s",
			a.Connections.Open, a.Connections.Max, s.reactors()))
	}
	return lines
}

func (s Screen) offlineStorage() string {
	st := s.Admin.Storage
	return fmt.Sprintf("Disk       logs %s · dead letters %s · %d frozen logs", arena.FormatBytes(st.LogBytes),
		arena.FormatBytes(st.DeadLetterBytes), st.FrozenLogs)
}

func (s Screen) reactors() string {
	parts := make([]string, 0, len(s.Admin.Reactors))
	if latest, ok := s.History.Latest(); ok && len(latest.ReactorBusy) > 0 {
		for _, share := range latest.ReactorBusy {
			parts = append(parts, fmt.Sprintf("%.0f%%", 100*share))
		}
		return strings.Join(parts, " ") + " now"
	}
	for _, r := range s.Admin.Reactors {
		parts = append(parts, fmt.Sprintf("%.0f%%", 100*r.BusyRatio))
	}
	return orDash(strings.Join(parts, " ")) + " since start"
}

func memory(m health.Memory) string {
	text := "budget " + arena.FormatBytes(m.BudgetBytes)
	if m.CeilingBytes > 0 {
		text += fmt.Sprintf(" of %s ceiling, %s headroom", arena.FormatBytes(m.CeilingBytes), arena.FormatBytes(m.HeadroomBytes))
	} else if m.BudgetBytes > 0 {
		text += " (no --ram-ceiling)"
	}
	if m.ResidentBytes > 0 {
		text += " · resident " + arena.FormatBytes(m.ResidentBytes)
	}
	return text
}

// diskBudget is the budget part of the disk line, empty without one.
func diskBudget(st health.Storage) string {
	if st.DiskBudgetBytes <= 0 {
		return ""
	}
	return fmt.Sprintf("budget %s of %s used (%.0f%%, %s headroom) · ", arena.FormatBytes(st.DiskUsedBytes),
		arena.FormatBytes(st.DiskBudgetBytes), 100*float64(st.DiskUsedBytes)/float64(st.DiskBudgetBytes),
		arena.FormatBytes(st.DiskHeadroomBytes))
}

func filesystem(st health.Storage) string {
	if st.FilesystemBytes == 0 {
		return "file system size unknown"
	}
	return fmt.Sprintf("file system %.1f%% used, %s free", st.FilesystemUsedPercent, arena.FormatBytes(int64(st.FilesystemFreeBytes)))
}

// table aligns tab-separated rows into columns.
func table(rows []string) []string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(w, row)
	}
	_ = w.Flush()
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

func (s Screen) filterNote() string {
	if s.EditingFilter {
		return fmt.Sprintf(" · filter: %s▏", s.Options.Filter)
	}
	if s.Options.Filter != "" {
		return fmt.Sprintf(" · filter %q", s.Options.Filter)
	}
	return ""
}

func (s Screen) streamTable() []string {
	streams := Streams(s.Admin.Streams, s.Options.Filter)
	title := s.style(titleStyle, fmt.Sprintf("Streams (%d of %d)", len(streams), len(s.Admin.Streams))) + s.filterNote()
	if len(streams) == 0 {
		return []string{title, "  none"}
	}
	latest, live := s.History.Latest()
	rows := []string{"  STREAM\tRECORDS\tFIRST\tNEXT\tDISK\tSEGMENTS\tREC/S\tDLQ\tSTATE"}
	shown, hidden := s.visible(len(streams))
	for _, st := range streams[:shown] {
		label := monitor.StreamLabel(st.Name, st.Partition)
		rate := "-"
		if value, ok := latest.StreamRecords[label]; live && ok {
			rate = count(value)
		}
		deadLetters := "-"
		if st.DeadLetter != nil {
			deadLetters = fmt.Sprint(st.DeadLetter.NextOffset - min(st.DeadLetter.FirstOffset, st.DeadLetter.NextOffset))
		}
		state := "writable"
		if st.Frozen != "" {
			state = "FROZEN: " + st.Frozen
		}
		rows = append(rows, fmt.Sprintf("  %s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s", label, st.Records, st.FirstOffset, st.NextOffset,
			arena.FormatBytes(st.DiskBytes), st.Segments, rate, deadLetters, state))
	}
	return append(append([]string{title}, table(rows)...), s.hiddenRows(hidden, "streams")...)
}

func (s Screen) groupTable() []string {
	groups := Groups(s.Admin.Groups, s.Options)
	order := "↓"
	if s.Options.Reverse {
		order = "↑"
	}
	title := s.style(titleStyle, fmt.Sprintf("Groups (%d of %d)", len(groups), len(s.Admin.Groups))) +
		fmt.Sprintf(" · sorted by %s %s", s.Options.Sort, order) + s.filterNote()
	if len(groups) == 0 {
		return []string{title, "  none"}
	}
	rows := []string{"  STREAM\tGROUP\tTYPE\tLAG\tIN FLIGHT\tMEMBERS\tDELIVERED\tREDELIVERED\tACKED\tDEAD-LETTERED"}
	shown, hidden := s.visible(len(groups))
	for _, g := range groups[:shown] {
		rows = append(rows, fmt.Sprintf("  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d", monitor.StreamLabel(g.Stream, g.Partition), g.Name, g.Type,
			g.Lag, g.InFlight, g.Members, g.Delivered, g.Redelivered, g.Acked, g.DeadLettered))
	}
	return append(append([]string{title}, table(rows)...), s.hiddenRows(hidden, "groups")...)
}

// visible is how many of count table rows can show: all without a known
// height, at most a screenful with one, so a broker with thousands of
// groups costs a screenful of formatting per frame, not thousands.
func (s Screen) visible(count int) (shown, hidden int) {
	if s.Height <= 0 || count <= s.Height {
		return count, 0
	}
	return s.Height, count - s.Height
}

func (s Screen) hiddenRows(hidden int, what string) []string {
	if hidden == 0 {
		return nil
	}
	return []string{fmt.Sprintf("  … %d more %s (filter with /)", hidden, what)}
}

// recovery lists the logs whose recovery found something (a torn tail,
// loss, a frozen log); clean logs are only counted, to keep the screen
// for what needs a look.
func (s Screen) recovery() []string {
	var rows []string
	clean := 0
	for _, entry := range s.Admin.Recovery {
		r := entry.Report
		if len(r.Events) == 0 && r.Frozen == "" && r.LossBytes == 0 && r.TornTailBytes == 0 {
			clean++
			continue
		}
		reasons := make([]string, 0, len(r.Events))
		for _, event := range r.Events {
			reasons = append(reasons, event.Reason.String())
		}
		rows = append(rows, fmt.Sprintf("  %s\t%s\t%s\ttorn %s\tlost %s, %d records\t%s\t%s", entry.Directory,
			monitor.StreamLabel(r.Stream, r.Partition), r.Outcome, arena.FormatBytes(r.TornTailBytes), arena.FormatBytes(r.LossBytes),
			r.LossRecords, orDash(strings.Join(reasons, ",")), orDash(r.Frozen)))
	}
	title := s.style(titleStyle, "Recovery") + fmt.Sprintf(" · %d logs clean, %d with events", clean, len(rows))
	if s.Admin.Storage.FrozenLogs > 0 {
		title += s.style(alertStyle, fmt.Sprintf(" · %d FROZEN (ironbus repair)", s.Admin.Storage.FrozenLogs))
	}
	if len(rows) == 0 {
		return []string{title}
	}
	return append([]string{title}, table(rows)...)
}

// clip fits the frame to the terminal: long lines are cut, and when rows
// run out the tail is replaced by a count and the key line is kept.
func (s Screen) clip(lines []string) string {
	footer := s.style(dimStyle, "s sort · r reverse · / filter · ? help · q quit")
	// An entry may hold several rows (the help): count rows, not entries.
	lines = strings.Split(strings.Join(lines, "\n"), "\n")
	if s.Plain && s.Width == 0 && s.Height == 0 {
		return strings.Join(lines, "\n") + "\n"
	}
	if s.Height > 2 && len(lines) > s.Height-1 {
		hidden := len(lines) - (s.Height - 2)
		lines = append(lines[:s.Height-2], fmt.Sprintf("… %d more lines (a taller terminal, or filter with /)", hidden))
	}
	lines = append(lines, footer)
	if s.Width > 0 {
		// Cut by terminal cells, not bytes or runes: a styled title carries
		// escape codes and a filter may hold wide characters.
		for i, line := range lines {
			if ansi.StringWidth(line) > s.Width {
				lines[i] = ansi.Truncate(line, s.Width, "")
			}
		}
	}
	return strings.Join(lines, "\n")
}

func count(perSecond float64) string {
	switch {
	case perSecond >= 1e6:
		return fmt.Sprintf("%.1fM", perSecond/1e6)
	case perSecond >= 1e4:
		return fmt.Sprintf("%.1fk", perSecond/1e3)
	case perSecond >= 10 || perSecond == 0:
		return fmt.Sprintf("%.0f", perSecond)
	default:
		return fmt.Sprintf("%.1f", perSecond)
	}
}

func duration(seconds float64) string {
	return time.Duration(seconds * float64(time.Second)).Round(time.Microsecond).String()
}

func orDash(text string) string {
	if text == "" {
		return "-"
	}
	return text
}
