package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
)

// reportSection is one `report` subcommand: its name, what it says, and
// how it renders its part of the /admin document.
type reportSection struct {
	name, short string
	data        func(doc *health.Admin) any
	table       func(w io.Writer, doc *health.Admin)
}

func newReportCmd(opts *globalOptions) *cobra.Command {
	addr, tokenFile := defaultHealthAddr, ""
	cmd := &cobra.Command{
		Use:   "report groups|streams|storage|recovery|connections",
		Short: "Show a running broker's groups, streams, storage, recovery or connections",
		Long: `Ask a running broker what it is doing, through its health endpoints
(serve --health-addr, default ` + defaultHealthAddr + `). Each report is one part of the
/admin document (docs/OBSERVABILITY.md):

  groups       every open consumer group: cursor, lag, in flight, deliveries,
               redeliveries, acks and dead letters since it opened
  streams      every stream: offsets, records, bytes on disk, records produced
               since start, its dead-letter queue, frozen or writable
  storage      the data directory: bytes per kind, quarantine, file system use,
               fsync latency (p50/p99 of the latest syncs), RAM budget
  recovery     what recovery found in every log when the broker started, and
               damage reads found since
  connections  open, accepted and refused connections, and reactor load

Tables are for people; --json prints the same data under a versioned schema
(ironbus.cli.report.<name>.v1) for scripts. A broker that is not reachable
exits 5; the broker is never changed.`,
		Example: `  ironbus report groups
  ironbus report streams --health-addr 127.0.0.1:7778
  ironbus report recovery --json | jq '.recovery[].report.outcome'`,
		Args: cobra.NoArgs,
	}
	addHealthClientFlags(cmd.PersistentFlags(), &addr, &tokenFile)
	for _, section := range reportSections() {
		cmd.AddCommand(newReportSectionCmd(opts, section, &addr, &tokenFile))
	}
	return cmd
}

func newReportSectionCmd(opts *globalOptions, section reportSection, addr, tokenFile *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     section.name,
		Short:   section.short,
		Long:    section.short + ", from the running broker's /admin document.",
		Example: fmt.Sprintf("  ironbus report %s\n  ironbus report %s --json", section.name, section.name),
		Args:    cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, fmt.Sprintf("print JSON (schema ironbus.cli.report.%s.v1)", section.name))
	cmd.RunE = classified(func() error {
		doc, err := fetchAdmin(context.Background(), *addr, *tokenFile)
		if err != nil {
			return err
		}
		if opts.json {
			object, err := sectionJSON(section, doc, *addr)
			if err != nil {
				return err
			}
			return writeJSON(opts.stdout, object)
		}
		if !doc.Readiness.Ready {
			fmt.Fprintf(opts.stdout, "broker %s\n\n", readinessText(doc.Readiness))
		}
		table := tabwriter.NewWriter(opts.stdout, 2, 4, 2, ' ', 0)
		section.table(table, doc)
		return table.Flush()
	})
	return cmd
}

// sectionJSON is one object with the common fields first and the
// section under its own name: {"schema", "health_addr", "readiness",
// "<section>"}. json.RawMessage keeps the order a map would sort away.
func sectionJSON(section reportSection, doc *health.Admin, addr string) (json.RawMessage, error) {
	head, err := json.Marshal(struct {
		Schema     string           `json:"schema"`
		HealthAddr string           `json:"health_addr"`
		Readiness  health.Readiness `json:"readiness"`
	}{"ironbus.cli.report." + section.name + ".v1", addr, doc.Readiness})
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(section.data(doc))
	if err != nil {
		return nil, err
	}
	name, _ := json.Marshal(section.name)
	object := append(head[:len(head)-1:len(head)-1], ',')
	object = append(append(append(object, name...), ':'), body...)
	return append(object, '}'), nil
}

func reportSections() []reportSection {
	return []reportSection{
		{name: "groups", short: "Consumer groups: cursor, lag, in flight and delivery counts",
			data: func(doc *health.Admin) any { return nonNil(doc.Groups) }, table: groupsTable},
		{name: "streams", short: "Streams: offsets, records, bytes, produced since start, dead letters",
			data: func(doc *health.Admin) any { return nonNil(doc.Streams) }, table: streamsTable},
		{name: "storage", short: "Storage: bytes on disk, quarantine, file system, fsync latency, RAM budget",
			data: func(doc *health.Admin) any {
				return map[string]any{"storage": doc.Storage, "fsync": doc.Fsync, "memory": doc.Memory}
			}, table: storageTable},
		{name: "recovery", short: "Recovery: what each log's recovery found, and damage found since",
			data: func(doc *health.Admin) any { return nonNil(doc.Recovery) }, table: recoveryTable},
		{name: "connections", short: "Connections: open, accepted, refused by reason, reactor load",
			data: func(doc *health.Admin) any {
				return map[string]any{"connections": doc.Connections, "reactors": nonNil(doc.Reactors)}
			}, table: connectionsTable},
	}
}

func nonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}

func groupsTable(w io.Writer, doc *health.Admin) {
	if len(doc.Groups) == 0 {
		fmt.Fprintln(w, "no consumer groups open")
		return
	}
	fmt.Fprintln(w, "STREAM\tGROUP\tTYPE\tCOMMITTED\tEND\tLAG\tIN FLIGHT\tMEMBERS\tDELIVERED\tREDELIVERED\tACKED\tDEAD-LETTERED")
	for _, g := range doc.Groups {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", monitor.StreamLabel(g.Stream, g.Partition), g.Name, g.Type,
			g.CommittedOffset, g.LogEnd, g.Lag, g.InFlight, g.Members, g.Delivered, g.Redelivered, g.Acked, g.DeadLettered)
	}
}

func streamsTable(w io.Writer, doc *health.Admin) {
	if len(doc.Streams) == 0 {
		fmt.Fprintln(w, "no streams")
		return
	}
	fmt.Fprintln(w, "STREAM\tFIRST\tNEXT\tRECORDS\tDISK\tSEGMENTS\tPRODUCED\tDEAD LETTERS\tSTATE")
	for _, s := range doc.Streams {
		deadLetters := "-"
		if s.DeadLetter != nil {
			deadLetters = fmt.Sprintf("%d (%s)", s.DeadLetter.NextOffset-min(s.DeadLetter.FirstOffset, s.DeadLetter.NextOffset),
				arena.FormatBytes(s.DeadLetter.DiskBytes))
		}
		state := "writable"
		if s.Frozen != "" {
			state = "FROZEN: " + s.Frozen
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", monitor.StreamLabel(s.Name, s.Partition), s.FirstOffset, s.NextOffset,
			s.Records, arena.FormatBytes(s.DiskBytes), s.Segments, s.ProducedRecords, deadLetters, state)
	}
}

func storageTable(w io.Writer, doc *health.Admin) {
	s, f, m := doc.Storage, doc.Fsync, doc.Memory
	rows := [][2]string{
		{"data directory", fmt.Sprintf("%s (durability %s, io %s)", s.DataDir, s.Durability, s.IOMode)},
		{"logs", arena.FormatBytes(s.LogBytes)},
		{"dead letters", arena.FormatBytes(s.DeadLetterBytes)},
		{"quarantine", arena.FormatBytes(s.QuarantineBytes)},
		{"frozen logs", fmt.Sprint(s.FrozenLogs)},
		{"file system", filesystemText(s)},
		{"fsyncs", fmt.Sprintf("%d in %d cycles, %.1f records each", f.Syncs, f.Cycles, f.RecordsPerSync)},
		{"fsync latency", fmt.Sprintf("p50 %s, p99 %s, max %s (latest %d)", seconds(f.P50Seconds), seconds(f.P99Seconds), seconds(f.MaxSeconds), f.RecentSamples)},
		{"RAM budget", memoryText(m)},
		{"resident", arena.FormatBytes(m.ResidentBytes)},
	}
	if f.RunningSeconds > 0 {
		rows = append(rows, [2]string{"fsync running", seconds(f.RunningSeconds)})
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
	}
}

func recoveryTable(w io.Writer, doc *health.Admin) {
	if len(doc.Recovery) == 0 {
		fmt.Fprintln(w, "no logs opened")
		return
	}
	fmt.Fprintln(w, "DIRECTORY\tLOG\tOUTCOME\tSEGMENTS\tNEXT\tTORN TAIL\tLOST BYTES\tLOST RECORDS\tEVENTS\tFROZEN")
	for _, entry := range doc.Recovery {
		r := entry.Report
		reasons := make([]string, 0, len(r.Events))
		for _, ev := range r.Events {
			reasons = append(reasons, ev.Reason.String())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", entry.Directory, monitor.StreamLabel(r.Stream, r.Partition), r.Outcome,
			r.Segments, r.NextOffset, arena.FormatBytes(r.TornTailBytes), arena.FormatBytes(r.LossBytes), r.LossRecords,
			orDash(strings.Join(reasons, ",")), orDash(r.Frozen))
	}
}

func connectionsTable(w io.Writer, doc *health.Admin) {
	c := doc.Connections
	fmt.Fprintf(w, "open\t%d of %d\n", c.Open, c.Max)
	fmt.Fprintf(w, "accepted\t%d\n", c.Accepted)
	for _, reason := range slices.Sorted(maps.Keys(c.Rejected)) {
		fmt.Fprintf(w, "refused (%s)\t%d\n", reason, c.Rejected[reason])
	}
	uptime := time.Duration(doc.UptimeSeconds * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(w, "uptime\t%s\n", uptime)
	for _, r := range doc.Reactors {
		fmt.Fprintf(w, "reactor %d\tbusy %.1f%% since start\n", r.Index, 100*r.BusyRatio)
	}
}

func filesystemText(s health.Storage) string {
	if s.FilesystemBytes == 0 {
		return "unknown on this platform"
	}
	return fmt.Sprintf("%.1f%% used, %s free of %s", s.FilesystemUsedPercent,
		arena.FormatBytes(int64(s.FilesystemFreeBytes)), arena.FormatBytes(int64(s.FilesystemBytes)))
}

func memoryText(m health.Memory) string {
	if m.CeilingBytes == 0 {
		return arena.FormatBytes(m.BudgetBytes) + " (no --ram-ceiling)"
	}
	return fmt.Sprintf("%s of %s ceiling, %s headroom", arena.FormatBytes(m.BudgetBytes), arena.FormatBytes(m.CeilingBytes),
		arena.FormatBytes(m.HeadroomBytes))
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
