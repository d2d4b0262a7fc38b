package main

import (
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/backup"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/cmd/ironbus/internal/topview"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/internal/termscreen"
	"github.com/ironbus/ironbus/monitor"
	"github.com/ironbus/ironbus/segment/vfs"
)

const topSchema = "ironbus.cli.top.v1"

type topOptions struct {
	healthAddr string
	tokenFile  string
	dataDir    string
	interval   time.Duration
	once       bool
	sort       string
	filter     string
	reverse    bool
}

// topOutput is the --json form of `ironbus top`: the snapshot, and the
// rates over --interval when two snapshots were taken (null otherwise).
type topOutput struct {
	Schema     string         `json:"schema"`
	Mode       string         `json:"mode"`
	HealthAddr string         `json:"health_addr,omitempty"`
	DataDir    string         `json:"data_dir,omitempty"`
	Note       string         `json:"note,omitempty"`
	Rates      *monitor.Rates `json:"rates"`
	Admin      *health.Admin  `json:"admin"`
}

func newTopCmd(opts *globalOptions) *cobra.Command {
	top := &topOptions{}
	cmd := &cobra.Command{
		Use:   "top [--health-addr A | --data-dir DIR]",
		Short: "Watch a running broker live: throughput, lag, fsync latency, RAM and disk, recovery",
		Long: `A live, full-screen view of a running broker, refreshed every --interval
from its /admin document (serve --health-addr, default ` + defaultHealthAddr + `):

  header      version, uptime, readiness, io backend, durability
  throughput  records/s and bytes/s produced, records/s delivered and acked,
              with a sparkline of the last 120 intervals
  fsync       p50/p99/max latency of the latest syncs, records per fsync
  RAM, disk   budget against the ceiling and headroom; bytes of logs, dead
              letters and quarantine; file system use
  streams     records, offsets, bytes, segments, records/s, dead letters, state
  groups      lag, in flight, members, delivered, redelivered, acked,
              dead-lettered, sorted by the column you choose
  recovery    the logs whose recovery found a torn tail, loss or a frozen log

Keys: s sorts the groups by the next column (lag, in flight, redelivered,
dead-lettered, name), r reverses, / filters streams and groups by name
(enter keeps it, esc clears it), ? shows help, q quits. A broker that stops
answering is shown as such and asked again every interval.

For scripts: --once prints one plain-text screen and exits; --json prints
one object (schema ` + topSchema + `). Rates need two snapshots, so both take
two, --interval apart; --interval 0 takes one and shows totals only. An
unreachable broker exits 5.

Offline, --data-dir reads a data directory instead (no rates): read-only
under its lock, like verify; if a broker holds the lock, without it, like
scrub, and then without groups. Offline the screen is read once; g reads
again. docs/OBSERVABILITY.md describes every figure.`,
		Example: `  ironbus top
  ironbus top --health-addr 10.0.0.5:7778 --interval 2s
  ironbus top --once --sort dead-lettered
  ironbus top --json | jq '.rates.produced_records_per_second'
  ironbus top --data-dir /var/lib/ironbus --once`,
		Args: cobra.NoArgs,
	}
	addHealthClientFlags(cmd.Flags(), &top.healthAddr, &top.tokenFile)
	cmd.Flags().StringVar(&top.dataDir, "data-dir", "", "read this data directory instead of a running broker (offline, no rates)")
	cmd.Flags().DurationVar(&top.interval, "interval", time.Second, "time between snapshots (with --once and --json: between the two taken)")
	cmd.Flags().BoolVar(&top.once, "once", false, "print one plain-text screen and exit, for scripts and logs")
	cmd.Flags().StringVar(&top.sort, "sort", "lag", "initial group order: lag, in-flight, redelivered, dead-lettered or name")
	cmd.Flags().BoolVar(&top.reverse, "reverse", false, "reverse the group order")
	cmd.Flags().StringVar(&top.filter, "filter", "", "show only streams and groups whose name contains this")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+topSchema+") and exit")
	cmd.RunE = classified(func() error { return runTop(cmd.Context(), opts, top) })
	return cmd
}

func runTop(ctx context.Context, opts *globalOptions, top *topOptions) error {
	column, ok := topview.ParseSortColumn(top.sort)
	if !ok {
		return exitErrorf(exitUsage, "--sort %q: want lag, in-flight, redelivered, dead-lettered or name", top.sort)
	}
	if top.interval < 0 || top.interval > maxTopInterval {
		return exitErrorf(exitUsage, "--interval %s: want a duration from 0 to %s, like 1s (0 with --once/--json for totals only)",
			top.interval, maxTopInterval)
	}
	options := topview.TableOptions{Sort: column, Reverse: top.reverse, Filter: top.filter}
	fetch, source, note := topSource(opts, top)
	if top.once || opts.json {
		return runTopOnce(ctx, opts, top, options, fetch, source, note)
	}
	if top.interval == 0 {
		return exitErrorf(exitUsage, "--interval 0 only makes sense with --once or --json; the live screen needs a refresh interval")
	}
	terminal, isFile := opts.stdout.(*os.File)
	if !isFile || !isTerminal(terminal) {
		return exitErrorf(exitUsage, "top draws a full screen and needs a terminal; for a pipe or a file use --once or --json")
	}
	offline := top.dataDir != ""
	model := topview.NewModel(topview.Config{Fetch: fetch, Source: source, Interval: top.interval, Note: note,
		Manual: offline, Offline: offline, Options: options})
	// SIGINT or SIGTERM while watching (ctx ends) is how a user leaves
	// too, not a failure of top.
	if err := termscreen.Run(ctx, model, opts.stdin, terminal); err != nil {
		return exitErrorf(exitInternal, "the top screen failed: %w", err)
	}
	return nil
}

func isTerminal(file *os.File) bool {
	info, err := file.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// topSource picks the live or offline reader. note reports what the
// latest offline read could see (empty live).
func topSource(opts *globalOptions, top *topOptions) (fetch topview.Fetcher, source string, note func() string) {
	if top.dataDir == "" {
		return func(ctx context.Context) (*health.Admin, error) {
				return fetchAdmin(ctx, top.healthAddr, top.tokenFile)
			},
			"live " + top.healthAddr, func() string { return "" }
	}
	// The screen reads the note while the next fetch may be writing it.
	var latest atomic.Pointer[string]
	empty := ""
	latest.Store(&empty)
	return func(ctx context.Context) (*health.Admin, error) {
		doc, text, err := offlineSnapshot(ctx, opts, top.dataDir)
		latest.Store(&text)
		return doc, err
	}, "offline " + top.dataDir, func() string { return *latest.Load() }
}

// maxTopInterval bounds --interval: --once waits one interval for its
// rates, and a refresh rarer than this watches nothing.
const maxTopInterval = time.Hour

// runTopOnce takes one snapshot, or two --interval apart for the rates,
// and prints them as one screen or one JSON object.
func runTopOnce(ctx context.Context, opts *globalOptions, top *topOptions, options topview.TableOptions,
	fetch topview.Fetcher, source string, note func() string) error {
	first, err := fetch(ctx)
	if err != nil {
		return err
	}
	sample := monitor.Sample{At: time.Now(), Admin: first}
	var history monitor.History
	if top.dataDir == "" && top.interval > 0 {
		select {
		case <-time.After(top.interval):
		case <-ctx.Done():
			return nil // interrupted (SIGINT, SIGTERM): leaving, as from the screen
		}
		second, err := fetch(ctx)
		if err != nil {
			return err
		}
		next := monitor.Sample{At: time.Now(), Admin: second}
		if rates, ok := monitor.ComputeRates(sample, next); ok {
			history.Add(rates)
		}
		sample = next
	}
	if opts.json {
		return writeJSON(opts.stdout, topJSON(top, sample.Admin, &history, options, note()))
	}
	screen := topview.Screen{Source: source, Admin: sample.Admin, History: &history, Interval: top.interval, Options: options,
		Note: note(), Plain: true, Offline: top.dataDir != ""}
	_, err = io.WriteString(opts.stdout, topview.Render(screen))
	return err
}

// topJSON is the --json object; --filter and --sort apply to its streams
// and groups as they do to the screen.
func topJSON(top *topOptions, doc *health.Admin, history *monitor.History, options topview.TableOptions, note string) topOutput {
	out := topOutput{Schema: topSchema, Mode: "live", HealthAddr: top.healthAddr, Note: note}
	if top.dataDir != "" {
		out.Mode, out.HealthAddr, out.DataDir = "offline", "", top.dataDir
	}
	if rates, ok := history.Latest(); ok {
		out.Rates = &rates
	}
	shown := *doc
	shown.Streams = topview.Streams(doc.Streams, options.Filter)
	shown.Groups = topview.Groups(doc.Groups, options)
	shown.Recovery = nonNil(doc.Recovery)
	out.Admin = &shown
	return out
}

// offlineSnapshot reads a data directory as top draws it (datadir.Snapshot);
// the note says whether it was read under the directory's lock.
func offlineSnapshot(ctx context.Context, opts *globalOptions, dataDir string) (*health.Admin, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	doc, unlocked, err := datadir.Snapshot(vfs.OS{}, dataDir, opts.logger())
	note := "offline: read under the directory's lock; no live rates"
	if unlocked {
		note = "offline: a broker runs here (directory locked), so no groups; run `ironbus top` against its --health-addr for the live view"
	}
	switch {
	case err == nil:
		return doc, note, nil
	case errors.Is(err, backup.ErrNotDataDir):
		return nil, note, exitErrorf(exitNotFound, "%w; check --data-dir: it must name the broker's data directory", err)
	}
	return nil, note, openDirError(dataDir, err)
}
