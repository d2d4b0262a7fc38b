package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker/health"
)

// Nagios plugin exit codes: the monitoring contract of `server check`.
// They deliberately differ from the CLI's own codes (exitcodes.go),
// because Nagios, Icinga, Sensu and friends read them this way.
const (
	nagiosOK       = 0
	nagiosWarning  = 1
	nagiosCritical = 2
	nagiosUnknown  = 3
)

var nagiosNames = [...]string{nagiosOK: "OK", nagiosWarning: "WARNING", nagiosCritical: "CRITICAL", nagiosUnknown: "UNKNOWN"}

type serverOptions struct {
	addr     string
	lagWarn  uint64
	lagCrit  uint64
	diskWarn float64
	diskCrit float64
}

func newServerCmd(opts *globalOptions) *cobra.Command {
	server := &serverOptions{addr: defaultHealthAddr}
	cmd := &cobra.Command{
		Use:   "server info|check",
		Short: "Describe a running broker, or check it for monitoring (Nagios exit codes)",
		Long: `Ask a running broker about itself through its health endpoints
(serve --health-addr, default ` + defaultHealthAddr + `).

  info   version, uptime, readiness, and one line each for streams, groups,
         storage, fsync latency, memory and connections
  check  one Nagios plugin line and exit code, for Nagios, Icinga, Sensu or a
         cron job: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN

These exit codes of check are the Nagios plugin contract and differ from the
other commands' (docs/CLI.md).`,
		Example: `  ironbus server info
  ironbus server check --lag-warn 1000 --lag-crit 100000 --disk-warn 80 --disk-crit 90`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&server.addr, "health-addr", defaultHealthAddr, "the broker's health endpoints (serve --health-addr)")
	cmd.AddCommand(newServerInfoCmd(opts, server), newServerCheckCmd(opts, server))
	return cmd
}

func newServerInfoCmd(opts *globalOptions, server *serverOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Describe a running broker: version, readiness, streams, groups, storage",
		Long: `Describe a running broker in a few lines; --json prints its whole /admin
document (docs/OBSERVABILITY.md) inside ironbus.cli.server.info.v1. A broker
that is not reachable exits 5.`,
		Example: `  ironbus server info
  ironbus server info --json | jq .admin.fsync`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.server.info.v1)")
	cmd.RunE = classified(func() error {
		doc, err := fetchAdmin(context.Background(), server.addr)
		if err != nil {
			return err
		}
		if opts.json {
			return writeJSON(opts.stdout, map[string]any{"schema": "ironbus.cli.server.info.v1", "health_addr": server.addr, "admin": doc})
		}
		return printServerInfo(opts.stdout, doc)
	})
	return cmd
}

func printServerInfo(out io.Writer, doc *health.Admin) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	var lag uint64
	for _, g := range doc.Groups {
		lag = max(lag, g.Lag)
	}
	fmt.Fprintf(w, "version\t%s\n", doc.Version)
	fmt.Fprintf(w, "uptime\t%s\n", time.Duration(doc.UptimeSeconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(w, "state\t%s\n", readinessText(doc.Readiness))
	fmt.Fprintf(w, "streams\t%d (%d frozen), %d records produced since start\n", len(doc.Streams), doc.Storage.FrozenLogs, doc.Totals.ProducedRecords)
	fmt.Fprintf(w, "groups\t%d open, highest lag %d, %d delivered, %d acked, %d dead-lettered\n", len(doc.Groups), lag,
		doc.Totals.DeliveredRecords, doc.Totals.AckedRecords, doc.Totals.DeadLetteredRecords)
	fmt.Fprintf(w, "storage\t%s in logs, %s dead letters, %s quarantined; %s\n", arena.FormatBytes(doc.Storage.LogBytes),
		arena.FormatBytes(doc.Storage.DeadLetterBytes), arena.FormatBytes(doc.Storage.QuarantineBytes), filesystemText(doc.Storage))
	fmt.Fprintf(w, "fsync\tp50 %s, p99 %s, %.1f records each\n", seconds(doc.Fsync.P50Seconds), seconds(doc.Fsync.P99Seconds), doc.Fsync.RecordsPerSync)
	fmt.Fprintf(w, "memory\t%s, %s resident\n", memoryText(doc.Memory), arena.FormatBytes(doc.Memory.ResidentBytes))
	fmt.Fprintf(w, "connections\t%d open of %d\n", doc.Connections.Open, doc.Connections.Max)
	return w.Flush()
}

func newServerCheckCmd(opts *globalOptions, server *serverOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check [--lag-warn N --lag-crit N] [--disk-warn PCT --disk-crit PCT]",
		Short: "Check a running broker and exit with a Nagios code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)",
		Long: `Check a running broker and print one Nagios plugin line, with performance
data after the "|":

  IRONBUS OK - ready, 2 streams, 1 groups, max lag 0, disk 41.2% used | lag=0;1000;100000 ...

CRITICAL: the broker does not answer (it is down, as far as monitoring can
tell), /healthz reports it stuck, a log is frozen read-only (a failed fsync or
damage above the recovery caps: run ironbus verify and ironbus repair), or a
threshold's critical level is reached. WARNING: the broker is recovering or
draining, or a warning level is reached. UNKNOWN: bad flags, or an answer that
is not an IronBus admin document of this version.

Lag is a group's records between its cursor and the log's end (the highest
of all groups counts); disk is the used share of the file system holding the
data directory (skipped where the platform cannot tell). A level of 0 turns
that check off.`,
		Example: `  ironbus server check
  ironbus server check --health-addr 127.0.0.1:7778 --lag-warn 1000 --lag-crit 50000
  ironbus server check --disk-warn 75 --disk-crit 90 --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{code: nagiosUnknown, err: fmt.Errorf("server check takes no arguments, got %q", args)}
			}
			return nil
		},
	}
	flags := cmd.Flags()
	flags.Uint64Var(&server.lagWarn, "lag-warn", 10_000, "WARNING when a group's lag reaches this many records (0: off)")
	flags.Uint64Var(&server.lagCrit, "lag-crit", 1_000_000, "CRITICAL when a group's lag reaches this many records (0: off)")
	flags.Float64Var(&server.diskWarn, "disk-warn", 80, "WARNING when the data directory's file system is this % full (0: off)")
	flags.Float64Var(&server.diskCrit, "disk-crit", 90, "CRITICAL when the data directory's file system is this % full (0: off)")
	flags.BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.server.check.v1) instead of the plugin line")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: nagiosUnknown, err: err}
	})
	cmd.RunE = func(*cobra.Command, []string) error {
		result := runServerCheck(context.Background(), server)
		if opts.json {
			if err := writeJSON(opts.stdout, result); err != nil {
				return &exitError{code: nagiosUnknown, err: err}
			}
		} else {
			fmt.Fprintln(opts.stdout, result.line())
		}
		if result.Code == nagiosOK {
			return nil
		}
		return &exitError{code: result.Code, err: errors.New(result.Summary), reported: true}
	}
	return cmd
}

// checkResult is the outcome of server check (and its --json form).
type checkResult struct {
	Schema   string   `json:"schema"`
	Status   string   `json:"status"`
	Code     int      `json:"code"`
	Summary  string   `json:"summary"`
	Problems []string `json:"problems"`
	// Perfdata is the plugin line's performance data, "label=value;warn;crit".
	Perfdata []string `json:"perfdata"`
}

func (r checkResult) line() string {
	line := "IRONBUS " + r.Status + " - " + r.Summary
	if len(r.Perfdata) > 0 {
		line += " | " + strings.Join(r.Perfdata, " ")
	}
	return line
}

// raise records a problem at level, keeping the highest level (UNKNOWN
// is only ever raised alone: nothing else could be checked).
func (r *checkResult) raise(level int, problem string) {
	r.Problems = append(r.Problems, problem)
	r.Code = max(r.Code, level)
}

func runServerCheck(ctx context.Context, server *serverOptions) checkResult {
	result := checkResult{Schema: "ironbus.cli.server.check.v1", Problems: []string{}, Perfdata: []string{}}
	finish := func() checkResult {
		result.Status = nagiosNames[result.Code]
		if len(result.Problems) > 0 {
			result.Summary = strings.Join(result.Problems, "; ")
		}
		return result
	}
	doc, err := fetchAdmin(ctx, server.addr)
	if err != nil {
		level := nagiosUnknown
		var exit *exitError
		if errors.As(err, &exit) && exit.code == exitUnreachable {
			level = nagiosCritical
		}
		result.raise(level, err.Error())
		return finish()
	}
	checkReadiness(ctx, &result, server.addr, doc)
	checkThresholds(&result, server, doc)
	if result.Code == nagiosOK {
		result.Problems = result.Problems[:0]
		result.Summary = okSummary(doc)
	}
	return finish()
}

func checkReadiness(ctx context.Context, result *checkResult, addr string, doc *health.Admin) {
	switch reason := doc.Readiness.Reason; {
	case doc.Readiness.Ready:
	case strings.HasPrefix(reason, "frozen"):
		result.raise(nagiosCritical, reason+" (run ironbus verify, then ironbus repair)")
	default:
		result.raise(nagiosWarning, "not ready: "+reason)
	}
	if stuck := healthzProblem(ctx, addr); stuck != "" {
		result.raise(nagiosCritical, stuck)
	}
}

// healthzProblem asks /healthz; a broker that answered /admin but whose
// loops are stuck is critical.
func healthzProblem(ctx context.Context, addr string) string {
	response, body, err := healthGet(ctx, addr, "/healthz", 4096)
	if err != nil {
		return "liveness: " + err.Error()
	}
	if response.StatusCode == http.StatusOK {
		return ""
	}
	return "liveness: " + strings.TrimSpace(string(body))
}

func checkThresholds(result *checkResult, server *serverOptions, doc *health.Admin) {
	var lag uint64
	worst := ""
	for _, g := range doc.Groups {
		if g.Lag >= lag {
			lag, worst = g.Lag, g.Stream+"/"+g.Name
		}
	}
	switch {
	case server.lagCrit > 0 && lag >= server.lagCrit:
		result.raise(nagiosCritical, fmt.Sprintf("group %s lags %d records (critical at %d)", worst, lag, server.lagCrit))
	case server.lagWarn > 0 && lag >= server.lagWarn:
		result.raise(nagiosWarning, fmt.Sprintf("group %s lags %d records (warning at %d)", worst, lag, server.lagWarn))
	}
	result.Perfdata = append(result.Perfdata, fmt.Sprintf("lag=%d;%d;%d", lag, server.lagWarn, server.lagCrit))
	if used := doc.Storage.FilesystemUsedPercent; doc.Storage.FilesystemBytes > 0 {
		switch {
		case server.diskCrit > 0 && used >= server.diskCrit:
			result.raise(nagiosCritical, fmt.Sprintf("disk %.1f%% used (critical at %.0f%%)", used, server.diskCrit))
		case server.diskWarn > 0 && used >= server.diskWarn:
			result.raise(nagiosWarning, fmt.Sprintf("disk %.1f%% used (warning at %.0f%%)", used, server.diskWarn))
		}
		result.Perfdata = append(result.Perfdata, fmt.Sprintf("disk_used=%.1f%%;%g;%g;0;100", used, server.diskWarn, server.diskCrit))
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
