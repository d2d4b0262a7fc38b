package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/server"
)

func addMemoryFlags(cmd *cobra.Command, serve *serveOptions) {
	flags, cfg := cmd.Flags(), &serve.cfg
	flags.Var(sizeValue{&cfg.RAMCeiling}, "ram-ceiling", "refuse to start unless the RAM budget fits in this (64MiB); also the Go runtime's memory limit")
	flags.BoolVar(&serve.edge, "edge", false, "deprecated: the same as --profile edge-tiny")
	flags.BoolVar(&serve.printBudget, "print-budget", false, "print the RAM budget line by line and exit")
	flags.Var(sizeValue{&cfg.MaxFrame}, "max-frame", "largest frame a client may send (a record plus about 100 bytes)")
	flags.Var(sizeValue{&cfg.LargeFramePool}, "large-frame-pool", "memory shared by frames larger than the 64KiB read buffer (default two largest frames)")
	flags.IntVar(&cfg.Window, "window", cfg.Window, "produce requests a connection may have unacknowledged")
	flags.Var(sizeValue{&cfg.ConnectionOutput}, "connection-output", "reply bytes queued per connection before it stops reading")
	flags.IntVar(&cfg.MaxStreams, "max-streams", cfg.MaxStreams, "streams served; more are refused")
	flags.IntVar(&cfg.MaxGroups, "max-groups", cfg.MaxGroups, "consumer groups across all streams; more are refused")
	flags.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "deliveries a consumer group may have leased and unacknowledged")
	flags.Var(sizeValue{&cfg.StagingBytes}, "staging-bytes", "records a stream buffers while its previous batch is written")
	flags.IntVar(&cfg.MaxBatchRecords, "max-batch-records", cfg.MaxBatchRecords, "records of one atomic batch (pub --atomic); more are refused")
	flags.Var(sizeValue{&cfg.MaxBatchBytes}, "max-batch-bytes", "record bytes of one atomic batch (default 1MiB, or what --staging-bytes and --segment-bytes hold if less)")
}

// budgetOutput is the --json form of serve --print-budget.
type budgetOutput struct {
	Schema  string       `json:"schema"`
	Lines   []budgetLine `json:"lines"`
	Total   int64        `json:"total_bytes"`
	Ceiling int64        `json:"ceiling_bytes"`
	Fits    bool         `json:"fits"`
}

type budgetLine struct {
	Name  string `json:"name"`
	Knob  string `json:"knob"`
	Bytes int64  `json:"bytes"`
}

func printBudget(opts *globalOptions, budget server.Budget) error {
	if opts.json {
		out := budgetOutput{Schema: "ironbus.cli.budget.v1", Total: budget.Total, Ceiling: budget.Ceiling, Fits: budget.Fits()}
		for _, line := range budget.Lines {
			out.Lines = append(out.Lines, budgetLine(line))
		}
		return writeJSON(opts.stdout, out)
	}
	for _, line := range budget.Lines {
		fmt.Fprintf(opts.stdout, "  %-44s %10s  (%s)\n", line.Name, arena.FormatBytes(line.Bytes), line.Knob)
	}
	ceiling := "none"
	if budget.Ceiling > 0 {
		ceiling = arena.FormatBytes(budget.Ceiling)
	}
	fmt.Fprintf(opts.stdout, "  %-44s %10s  (ceiling %s)\n", "total", arena.FormatBytes(budget.Total), ceiling)
	if !budget.Fits() {
		return exitErrorf(exitUsage, "the budget does not fit the ceiling; lower a knob above or raise --ram-ceiling")
	}
	return nil
}
