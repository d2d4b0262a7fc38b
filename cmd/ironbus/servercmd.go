package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
)

// server check exits with the Nagios plugin codes (monitor.Level), the
// monitoring contract: they deliberately differ from the CLI's own codes
// (exitcodes.go), because Nagios, Icinga, Sensu and friends read them
// this way.

type serverOptions struct {
	addr       string
	tokenFile  string
	thresholds monitor.Thresholds
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
	addHealthClientFlags(cmd.PersistentFlags(), &server.addr, &server.tokenFile)
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
		doc, err := fetchAdmin(context.Background(), server.addr, server.tokenFile)
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
				return &exitError{code: int(monitor.Unknown), err: fmt.Errorf("server check takes no arguments, got %q", args)}
			}
			return nil
		},
	}
	flags := cmd.Flags()
	flags.Uint64Var(&server.thresholds.LagWarn, "lag-warn", 10_000, "WARNING when a group's lag reaches this many records (0: off)")
	flags.Uint64Var(&server.thresholds.LagCrit, "lag-crit", 1_000_000, "CRITICAL when a group's lag reaches this many records (0: off)")
	flags.Float64Var(&server.thresholds.DiskWarn, "disk-warn", 80, "WARNING when the data directory's file system is this % full (0: off)")
	flags.Float64Var(&server.thresholds.DiskCrit, "disk-crit", 90, "CRITICAL when the data directory's file system is this % full (0: off)")
	flags.BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.server.check.v1) instead of the plugin line")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: int(monitor.Unknown), err: err}
	})
	cmd.RunE = func(*cobra.Command, []string) error {
		result := runServerCheck(context.Background(), server)
		if opts.json {
			if err := writeJSON(opts.stdout, result); err != nil {
				return &exitError{code: int(monitor.Unknown), err: err}
			}
		} else {
			fmt.Fprintln(opts.stdout, result.line())
		}
		if result.Code == int(monitor.OK) {
			return nil
		}
		return &exitError{code: result.Code, err: errors.New(result.Summary), reported: true}
	}
	return cmd
}

// checkResult is the --json form of server check.
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

// runServerCheck fetches the broker's /admin document and judges it
// (monitor.Check). A broker that does not answer is CRITICAL; an answer
// that cannot be judged is UNKNOWN.
func runServerCheck(ctx context.Context, server *serverOptions) checkResult {
	result := monitor.Result{Problems: []string{}, Perfdata: []string{}}
	doc, err := fetchAdmin(ctx, server.addr, server.tokenFile)
	if err != nil {
		level := monitor.Unknown
		var exit *exitError
		if errors.As(err, &exit) && exit.code == exitUnreachable {
			level = monitor.Critical
		}
		result.Raise(level, err.Error())
	} else {
		endpoint, _ := healthEndpoint(server.addr, server.tokenFile) // fetchAdmin read it
		result = monitor.Check(ctx, endpoint, doc, server.thresholds)
	}
	return checkResult{Schema: "ironbus.cli.server.check.v1", Status: result.Level.String(), Code: int(result.Level),
		Summary: result.Summary, Problems: result.Problems, Perfdata: result.Perfdata}
}
