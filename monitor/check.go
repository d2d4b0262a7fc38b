package monitor

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/ironbus/ironbus/broker/health"
)

// Level is a check's status as monitoring plugins (Nagios, Icinga,
// Sensu) report it; its value is the plugin's exit code.
type Level int

// The levels, least serious first.
const (
	OK Level = iota
	Warning
	Critical
	Unknown
)

var levelNames = [...]string{OK: "OK", Warning: "WARNING", Critical: "CRITICAL", Unknown: "UNKNOWN"}

func (l Level) String() string {
	if l < OK || l > Unknown {
		return fmt.Sprintf("level(%d)", int(l))
	}
	return levelNames[l]
}

// Thresholds are the levels Check compares a broker with; 0 turns one
// off.
type Thresholds struct {
	// LagWarn and LagCrit are records between a group's cursor and its
	// log's end; the highest lag of all groups counts.
	LagWarn, LagCrit uint64
	// DiskWarn and DiskCrit are the used percentage of the file system
	// holding the data directory (skipped where the platform cannot
	// tell).
	DiskWarn, DiskCrit float64
}

// Result is what a check found: its level, one problem per finding and
// the performance data ("label=value;warn;crit", the plugin convention).
type Result struct {
	Level    Level
	Problems []string
	Perfdata []string
	// Summary is the problems on one line, or a description of a broker
	// that is fine.
	Summary string
}

// Raise records a problem at level, keeping the highest level.
func (r *Result) Raise(level Level, problem string) {
	r.Problems = append(r.Problems, problem)
	r.Level = max(r.Level, level)
	r.Summary = strings.Join(r.Problems, "; ")
}

// Check judges the /admin document of the broker whose health endpoints
// are at addr, and asks its /healthz: critical when the broker is stuck,
// a log is frozen read-only or a critical threshold is reached; warning
// when it is not ready (recovering, draining) or a warning threshold is
// reached.
func Check(ctx context.Context, endpoint Endpoint, doc *health.Admin, thresholds Thresholds) Result {
	result := Result{Problems: []string{}, Perfdata: []string{}}
	checkReadiness(ctx, &result, endpoint, doc)
	checkThresholds(&result, thresholds, doc)
	if result.Level == OK {
		result.Problems = result.Problems[:0]
		result.Summary = okSummary(doc)
	}
	return result
}

func checkReadiness(ctx context.Context, result *Result, endpoint Endpoint, doc *health.Admin) {
	switch reason := doc.Readiness.Reason; {
	case doc.Readiness.Ready:
	case strings.HasPrefix(reason, "frozen"):
		result.Raise(Critical, reason+" (run ironbus verify, then ironbus repair)")
	default:
		result.Raise(Warning, "not ready: "+reason)
	}
	if stuck := livenessProblem(ctx, endpoint); stuck != "" {
		result.Raise(Critical, stuck)
	}
}

// livenessProblem asks /healthz; a broker that answered /admin but whose
// loops are stuck is critical.
func livenessProblem(ctx context.Context, endpoint Endpoint) string {
	response, err := Get(ctx, endpoint, "/healthz", 4096)
	if err != nil {
		return "liveness: " + err.Error()
	}
	if response.StatusCode == http.StatusOK {
		return ""
	}
	return "liveness: " + strings.TrimSpace(string(response.Body))
}

func checkThresholds(result *Result, t Thresholds, doc *health.Admin) {
	var lag uint64
	worst := ""
	for _, g := range doc.Groups {
		if g.Lag >= lag {
			lag, worst = g.Lag, g.Stream+"/"+g.Name
		}
	}
	switch {
	case t.LagCrit > 0 && lag >= t.LagCrit:
		result.Raise(Critical, fmt.Sprintf("group %s lags %d records (critical at %d)", worst, lag, t.LagCrit))
	case t.LagWarn > 0 && lag >= t.LagWarn:
		result.Raise(Warning, fmt.Sprintf("group %s lags %d records (warning at %d)", worst, lag, t.LagWarn))
	}
	result.Perfdata = append(result.Perfdata, fmt.Sprintf("lag=%d;%d;%d", lag, t.LagWarn, t.LagCrit))
	if used := doc.Storage.FilesystemUsedPercent; doc.Storage.FilesystemBytes > 0 {
		switch {
		case t.DiskCrit > 0 && used >= t.DiskCrit:
			result.Raise(Critical, fmt.Sprintf("disk %.1f%% used (critical at %.0f%%)", used, t.DiskCrit))
		case t.DiskWarn > 0 && used >= t.DiskWarn:
			result.Raise(Warning, fmt.Sprintf("disk %.1f%% used (warning at %.0f%%)", used, t.DiskWarn))
		}
		result.Perfdata = append(result.Perfdata, fmt.Sprintf("disk_used=%.1f%%;%g;%g;0;100", used, t.DiskWarn, t.DiskCrit))
	}
	result.Perfdata = append(result.Perfdata,
		fmt.Sprintf("frozen_logs=%d;;1", doc.Storage.FrozenLogs),
		fmt.Sprintf("fsync_p99=%.6fs", doc.Fsync.P99Seconds),
		fmt.Sprintf("connections=%d;;;0;%d", doc.Connections.Open, doc.Connections.Max))
}

func okSummary(doc *health.Admin) string {
	var lag uint64
	for _, g := range doc.Groups {
		lag = max(lag, g.Lag)
	}
	summary := fmt.Sprintf("ready, %d streams, %d groups, max lag %d", len(doc.Streams), len(doc.Groups), lag)
	if doc.Storage.FilesystemBytes > 0 {
		summary += fmt.Sprintf(", disk %.1f%% used", doc.Storage.FilesystemUsedPercent)
	}
	return summary
}
