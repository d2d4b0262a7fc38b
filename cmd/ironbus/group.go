package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
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
}

type groupsOutput struct {
	Schema string     `json:"schema"`
	Groups []groupRow `json:"groups"`
}

type groupOptions struct {
	logSelection
	group     string
	allStream bool
}

func newGroupCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group ls|info",
		Short: "Show consumer groups from their checkpoints (offline)",
		Long: `Show what each consumer group's last checkpoint holds: its type, its
cursor (every offset below it is done), the offsets acknowledged ahead of the
cursor, the records delivered and not yet settled with the highest delivery
count among them (how close the worst one is to the dead-letter queue), and
dead-letter moves in progress.

These read the data directory read-only, like verify, so the broker must be
stopped. The live forms (through --addr) and group reset/rm arrive with the
broker's admin verbs.`,
		Example: `  ironbus group ls --data-dir /var/lib/ironbus
  ironbus group ls --data-dir ./data --stream orders --json
  ironbus group info --data-dir ./data --stream orders --group billing`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newGroupListCmd(opts), newGroupInfoCmd(opts))
	return cmd
}

func newGroupListCmd(opts *globalOptions) *cobra.Command {
	group := &groupOptions{}
	cmd := &cobra.Command{
		Use:     "ls --data-dir DIR [--stream S]",
		Short:   "List the consumer groups of every log, or of one stream",
		Example: `  ironbus group ls --data-dir ./data`,
		Args:    cobra.NoArgs,
	}
	addLogFlags(cmd, &group.logSelection)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.groups.v1)")
	cmd.RunE = classified(func() error {
		group.allStream = !cmd.Flags().Changed("stream")
		return runGroups(opts, group)
	})
	return cmd
}

func newGroupInfoCmd(opts *globalOptions) *cobra.Command {
	group := &groupOptions{}
	cmd := &cobra.Command{
		Use:     "info --data-dir DIR --stream S --group G",
		Short:   "Show one consumer group",
		Example: `  ironbus group info --data-dir ./data --stream orders --group billing`,
		Args:    cobra.NoArgs,
	}
	addLogFlags(cmd, &group.logSelection)
	cmd.Flags().StringVar(&group.group, "group", "", "group to show (required)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.groups.v1)")
	cmd.RunE = classified(func() error {
		if group.group == "" {
			return exitErrorf(exitUsage, "--group is required")
		}
		return runGroups(opts, group)
	})
	return cmd
}

func runGroups(opts *globalOptions, group *groupOptions) error {
	if err := group.validate(); err != nil {
		return err
	}
	dir, err := openDataDir(opts, group.dataDir)
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	ids := []segment.LogID{group.logID()}
	if group.allStream {
		if ids, err = dir.Logs(); err != nil {
			return exitErrorf(exitUnreadable, "listing the logs of %s: %w", group.dataDir, err)
		}
	}
	out := groupsOutput{Schema: "ironbus.cli.groups.v1", Groups: []groupRow{}}
	for _, id := range ids {
		rows, err := groupRows(dir, group, id)
		if err != nil {
			return err
		}
		out.Groups = append(out.Groups, rows...)
	}
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
		fmt.Fprintln(opts.stdout)
	}
	return nil
}

// groupRows reads the groups of one log (or the one asked for).
func groupRows(dir *segment.Dir, group *groupOptions, id segment.LogID) ([]groupRow, error) {
	log, err := dir.OpenLog(id)
	if err != nil {
		return nil, openLogError(group.dataDir, id, err)
	}
	var summaries []consumer.Summary
	if group.group != "" {
		summary, err := consumer.InspectGroup(log, group.group)
		if errors.Is(err, consumer.ErrNoGroup) {
			return nil, exitErrorf(exitNotFound, "log %s has no group %q; `ironbus group ls --data-dir %s` lists them (%w)",
				id.String(), group.group, group.dataDir, err)
		}
		if err != nil {
			return nil, exitErrorf(exitUnreadable, "%w", err)
		}
		summaries = []consumer.Summary{summary}
	} else if summaries, err = consumer.Inspect(log); err != nil {
		return nil, exitErrorf(exitUnreadable, "%w", err)
	}
	rows := make([]groupRow, 0, len(summaries))
	for _, s := range summaries {
		rows = append(rows, groupRow{Stream: id.Stream, Partition: id.Partition, Group: s.Name, Type: s.Type.String(),
			Committed: s.Committed, AckedAhead: s.AckedAhead, Unsettled: s.Unsettled, MostDeliveries: s.MostDeliveries,
			PendingMoves: s.PendingMoves, LogEnd: log.Committed()})
	}
	return rows, nil
}

// deadLetterDir is where the broker keeps the dead-letter queues of a
// data directory (a data directory of its own).
func deadLetterDir(dataDir string) (string, bool) {
	path := filepath.Join(dataDir, "deadletters")
	_, err := os.Stat(filepath.Join(path, "FORMAT"))
	return path, err == nil
}
