package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// groupRow is one group in the --json output of group ls and group info.
type groupRow struct {
	Stream         string `json:"stream"`
	Partition      uint32 `json:"partition"`
	Group          string `json:"group"`
	Type           string `json:"type"`
	Committed      uint64 `json:"committed"`
	AckedAhead     uint64 `json:"acked_ahead"`
	Unsettled      int    `json:"unsettled"`
	MostDeliveries uint32 `json:"most_deliveries"`
	PendingMoves   int    `json:"pending_dead_letter_moves"`
	LogEnd         uint64 `json:"log_end"`
	// Live figures, through --addr only: the group's connected consumers
	// and their leases (0 offline, where nothing is live).
	Members int `json:"members"`
	Leased  int `json:"leased"`
}

type groupsOutput struct {
	Schema string     `json:"schema"`
	Groups []groupRow `json:"groups"`
}

type groupOptions struct {
	logSelection
	addr      string
	group     string
	allStream bool
}

func newGroupCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group ls|info|reset|rm",
		Short: "Show, reset or delete consumer groups (live or offline)",
		Long: `Show what each consumer group's last checkpoint holds: its type, its
cursor (every offset below it is done), the offsets acknowledged ahead of the
cursor, the records delivered and not yet settled with the highest delivery
count among them (how close the worst one is to the dead-letter queue), and
dead-letter moves in progress.

Without --data-dir they ask the running broker at --addr, which reports the
live state of the groups it has open (with their connected consumers and
leases). With --data-dir they read the checkpoints read-only, like verify,
so the broker must be stopped.

group reset moves a group's cursor and group rm deletes a group; both need
the group's consumers stopped.`,
		Example: `  ironbus group ls
  ironbus group info --stream orders --group billing --addr 10.0.0.5:7654
  ironbus group ls --data-dir ./data --stream orders --json
  ironbus group reset --stream orders --group billing --to earliest
  ironbus group rm --stream orders --group billing`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newGroupListCmd(opts), newGroupInfoCmd(opts), newGroupResetCmd(opts), newGroupRemoveCmd(opts))
	return cmd
}

func newGroupListCmd(opts *globalOptions) *cobra.Command {
	group := &groupOptions{}
	cmd := &cobra.Command{
		Use:   "ls [--addr A | --data-dir DIR] [--stream S]",
		Short: "List the consumer groups of every stream, or of one",
		Example: `  ironbus group ls
  ironbus group ls --stream orders --json
  ironbus group ls --data-dir ./data`,
		Args: cobra.NoArgs,
	}
	addLogFlags(cmd, &group.logSelection)
	addAddrFlag(cmd, &group.addr)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.groups.v1)")
	cmd.RunE = classified(func() error {
		group.allStream = !cmd.Flags().Changed("stream")
		return runGroups(cmd.Context(), opts, group)
	})
	return cmd
}

func newGroupInfoCmd(opts *globalOptions) *cobra.Command {
	group := &groupOptions{}
	cmd := &cobra.Command{
		Use:   "info [--addr A | --data-dir DIR] --stream S --group G",
		Short: "Show one consumer group",
		Example: `  ironbus group info --stream orders --group billing
  ironbus group info --data-dir ./data --stream orders --group billing --json`,
		Args: cobra.NoArgs,
	}
	addLogFlags(cmd, &group.logSelection)
	addAddrFlag(cmd, &group.addr)
	cmd.Flags().StringVar(&group.group, "group", "", "group to show (required)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.groups.v1)")
	cmd.RunE = classified(func() error {
		if group.group == "" {
			return exitErrorf(exitUsage, "--group is required")
		}
		return runGroups(cmd.Context(), opts, group)
	})
	return cmd
}

func runGroups(ctx context.Context, opts *globalOptions, group *groupOptions) error {
	if err := validateStream(group.stream); err != nil {
		return err
	}
	out := groupsOutput{Schema: "ironbus.cli.groups.v1", Groups: []groupRow{}}
	var rows []groupRow
	var err error
	if group.dataDir == "" {
		rows, err = liveRows(ctx, opts, group)
	} else {
		rows, err = offlineRows(opts, group)
	}
	if err != nil {
		return err
	}
	out.Groups = append(out.Groups, rows...)
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	if len(out.Groups) == 0 {
		fmt.Fprintln(opts.stdout, "no consumer groups")
	}
	for _, row := range out.Groups {
		fmt.Fprintf(opts.stdout, "%s/%d %s: %s, committed %d of %d, %d acked ahead, %d unsettled (most deliveries %d)",
			row.Stream, row.Partition, row.Group, row.Type, row.Committed, row.LogEnd, row.AckedAhead, row.Unsettled, row.MostDeliveries)
		if row.PendingMoves > 0 {
			fmt.Fprintf(opts.stdout, ", %d dead-letter moves pending", row.PendingMoves)
		}
		if row.Members > 0 {
			fmt.Fprintf(opts.stdout, ", %d consumers holding %d leases", row.Members, row.Leased)
		}
		fmt.Fprintln(opts.stdout)
	}
	return nil
}

// offlineRows reads the groups from the checkpoints of a stopped
// broker's directory, opened shared.
func offlineRows(opts *globalOptions, group *groupOptions) ([]groupRow, error) {
	dir, rec, err := datadir.Open(vfs.OS{}, group.dataDir, datadir.Options{Logger: opts.logger()})
	if err != nil {
		return nil, openOfflineError(group.dataDir, rec, err)
	}
	defer func() { _ = dir.Close() }()
	ids := []segment.LogID{group.logID()}
	if group.allStream {
		if ids, err = dir.Logs(); err != nil {
			return nil, exitErrorf(exitUnreadable, "listing the logs of %s: %w", group.dataDir, err)
		}
	}
	var out []groupRow
	for _, id := range ids {
		rows, err := groupRows(dir, group, id)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// groupRows reads the groups of one log (or the one asked for).
func groupRows(dir *datadir.Dir, group *groupOptions, id segment.LogID) ([]groupRow, error) {
	var summaries []consumer.Summary
	var end uint64
	var err error
	if group.group != "" {
		var summary consumer.Summary
		summary, end, err = dir.Group(id, group.group)
		summaries = []consumer.Summary{summary}
	} else {
		summaries, end, err = dir.Groups(id)
	}
	switch {
	case errors.Is(err, segment.ErrNotFound):
		return nil, openLogError(group.dataDir, id, err)
	case errors.Is(err, datadir.ErrNoSuchGroup):
		return nil, exitErrorf(exitNotFound, "log %s has no group %q; `ironbus group ls --data-dir %s` lists them (%w)",
			id.String(), group.group, group.dataDir, consumer.ErrNoGroup)
	case err != nil:
		return nil, exitErrorf(exitUnreadable, "%w", err)
	}
	rows := make([]groupRow, 0, len(summaries))
	for _, s := range summaries {
		rows = append(rows, groupRow{Stream: id.Stream, Partition: id.Partition, Group: s.Name, Type: s.Type.String(),
			Committed: s.Committed, AckedAhead: s.AckedAhead, Unsettled: s.Unsettled, MostDeliveries: s.MostDeliveries,
			PendingMoves: s.PendingMoves, LogEnd: end})
	}
	return rows, nil
}
