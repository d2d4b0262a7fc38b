package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The live forms of group and dlq (through a broker's admin verbs) and the
// commands that change a group: reset and rm, live or offline.

// liveRows lists groups through the broker: one group, or a stream's, or
// every stream's.
func liveRows(ctx context.Context, opts *globalOptions, group *groupOptions) ([]groupRow, error) {
	c, err := dialBroker(ctx, opts, group.addr, 1)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var states []client.GroupState
	if group.group != "" {
		state, err := c.GroupInfo(ctx, group.stream, group.group, group.partition)
		if err != nil {
			return nil, adminError(err, group.stream)
		}
		states = []client.GroupState{state}
	} else {
		stream := group.stream
		if group.allStream {
			stream = ""
		}
		if states, err = c.ListGroups(ctx, stream, group.partition); err != nil {
			return nil, adminError(err, stream)
		}
	}
	rows := make([]groupRow, 0, len(states))
	for _, s := range states {
		rows = append(rows, liveRow(s))
	}
	return rows, nil
}

func liveRow(s client.GroupState) groupRow {
	return groupRow{Stream: s.Stream, Partition: s.Partition, Group: s.Group, Type: groupTypeName(s.Type),
		Committed: s.Committed, AckedAhead: s.AckedAhead, Unsettled: s.Unsettled, MostDeliveries: s.MostDeliveries,
		PendingMoves: s.PendingMoves, LogEnd: s.LogEnd, Members: s.Members, Leased: s.Leased}
}

// groupTypeName names a group type as the offline tools do.
func groupTypeName(t client.GroupType) string { return consumer.Type(t).String() }

// adminError classifies what the broker answered (brokerError): a
// missing stream or group exits 2, a refusal 3 (live consumers: stop them
// first), a broken connection 5, refused credentials 6.
func adminError(err error, stream string) error {
	if errors.Is(err, client.ErrGroupActive) {
		return exitErrorf(exitRefused, "%w (stop the group's consumers, then run this again)", err)
	}
	return brokerError(err, stream)
}

type groupChangeOptions struct {
	groupOptions
	to string
}

func newGroupResetCmd(opts *globalOptions) *cobra.Command {
	change := &groupChangeOptions{}
	cmd := &cobra.Command{
		Use:   "reset --group G --to earliest|latest|OFFSET|TIME [--stream S] [--addr A | --data-dir DIR]",
		Short: "Move a consumer group's cursor (its consumers must be stopped)",
		Long: `Move a group's cursor to a new start, forgetting what was acknowledged ahead
of it and every delivery count: the group's next consumer reads from there.
--to is earliest, latest, an offset (clamped to what the stream holds) or an
RFC 3339 time (the first record stored at or after it).

The group must have no live consumers: the broker refuses (exit 3) while a
connection that consumed it is open. Live through --addr; with --data-dir
the broker must be stopped (exit 5 while it holds the directory).`,
		Example: `  ironbus group reset --stream orders --group billing --to earliest
  ironbus group reset --stream orders --group billing --to 1200 --json
  ironbus group reset --stream orders --group audit --to 2026-11-29T00:00:00Z
  ironbus group reset --data-dir ./data --stream orders --group billing --to latest`,
		Args: cobra.NoArgs,
	}
	addGroupChangeFlags(cmd, opts, &change.groupOptions)
	cmd.Flags().StringVar(&change.to, "to", "", "earliest, latest, an offset or an RFC 3339 time (required)")
	cmd.RunE = classified(func() error { return runGroupChange(cmd.Context(), opts, change, true) })
	return cmd
}

func newGroupRemoveCmd(opts *globalOptions) *cobra.Command {
	change := &groupChangeOptions{}
	cmd := &cobra.Command{
		Use:   "rm --group G [--stream S] [--addr A | --data-dir DIR]",
		Short: "Delete a consumer group (its consumers must be stopped)",
		Long: `Delete a group and its checkpoint. The next consumer of that name creates the
group afresh, with its own type and start position.

The group must have no live consumers: the broker refuses (exit 3) while a
connection that consumed it is open. Live through --addr; with --data-dir
the broker must be stopped (exit 5 while it holds the directory).`,
		Example: `  ironbus group rm --stream orders --group billing
  ironbus group rm --data-dir ./data --stream orders --group billing --json`,
		Args: cobra.NoArgs,
	}
	addGroupChangeFlags(cmd, opts, &change.groupOptions)
	cmd.RunE = classified(func() error { return runGroupChange(cmd.Context(), opts, change, false) })
	return cmd
}

func addGroupChangeFlags(cmd *cobra.Command, opts *globalOptions, group *groupOptions) {
	addLogFlags(cmd, &group.logSelection)
	addAddrFlag(cmd, &group.addr)
	cmd.Flags().StringVar(&group.group, "group", "", "the group (required)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.groups.v1): the group after the change")
}

// parseTarget reads --to.
func parseTarget(to string) (client.StartPosition, error) {
	switch to {
	case "earliest":
		return client.StartPosition{Kind: client.StartEarliest}, nil
	case "latest":
		return client.StartPosition{Kind: client.StartLatest}, nil
	case "":
		return client.StartPosition{}, exitErrorf(exitUsage, "--to is required: earliest, latest, an offset or an RFC 3339 time")
	}
	if offset, err := strconv.ParseUint(to, 10, 64); err == nil {
		return client.StartPosition{Kind: client.StartOffset, Offset: offset}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, to)
	if err != nil {
		return client.StartPosition{}, exitErrorf(exitUsage, "--to %q is not earliest, latest, an offset or an RFC 3339 time", to)
	}
	return client.StartPosition{Kind: client.StartTime, Time: at}, nil
}

func runGroupChange(ctx context.Context, opts *globalOptions, change *groupChangeOptions, reset bool) error {
	if change.group == "" {
		return exitErrorf(exitUsage, "--group is required")
	}
	if err := validateStream(change.stream); err != nil {
		return err
	}
	var target client.StartPosition
	if reset {
		var err error
		if target, err = parseTarget(change.to); err != nil {
			return err
		}
	}
	var row groupRow
	var err error
	if change.dataDir != "" {
		row, err = offlineGroupChange(opts, change, reset, target)
	} else {
		row, err = liveGroupChange(ctx, opts, change, reset, target)
	}
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.stdout, groupsOutput{Schema: "ironbus.cli.groups.v1", Groups: []groupRow{row}})
	}
	if reset {
		fmt.Fprintf(opts.stdout, "%s/%d %s: reset to %d (log end %d)\n", row.Stream, row.Partition, row.Group, row.Committed, row.LogEnd)
	} else {
		fmt.Fprintf(opts.stdout, "%s/%d %s: deleted (it was at %d of %d)\n", row.Stream, row.Partition, row.Group, row.Committed, row.LogEnd)
	}
	return nil
}

func liveGroupChange(ctx context.Context, opts *globalOptions, change *groupChangeOptions, reset bool, target client.StartPosition) (groupRow, error) {
	c, err := dialBroker(ctx, opts, change.addr, 1)
	if err != nil {
		return groupRow{}, err
	}
	defer c.Close()
	var state client.GroupState
	if reset {
		state, err = c.ResetGroup(ctx, change.stream, change.group, change.partition, target)
	} else {
		state, err = c.DeleteGroup(ctx, change.stream, change.group, change.partition)
	}
	if err != nil {
		return groupRow{}, adminError(err, change.stream)
	}
	return liveRow(state), nil
}

// offlineGroupChange changes a group in a stopped broker's directory,
// opened exclusive.
func offlineGroupChange(opts *globalOptions, change *groupChangeOptions, reset bool, target client.StartPosition) (groupRow, error) {
	dir, err := openExclusive(opts, change.dataDir)
	if err != nil {
		return groupRow{}, err
	}
	defer func() { _ = dir.Close() }()
	id := change.logID()
	var summary consumer.Summary
	var end uint64
	if reset {
		summary, end, err = dir.ResetGroup(id, change.group, startPosition(target))
	} else {
		summary, end, err = dir.RemoveGroup(id, change.group)
	}
	if err != nil {
		return groupRow{}, groupChangeError(change.dataDir, id, change.group, err)
	}
	return groupRow{Stream: id.Stream, Partition: id.Partition, Group: summary.Name, Type: summary.Type.String(),
		Committed: summary.Committed, AckedAhead: summary.AckedAhead, Unsettled: summary.Unsettled,
		MostDeliveries: summary.MostDeliveries, PendingMoves: summary.PendingMoves, LogEnd: end}, nil
}

// openExclusive opens an existing data directory exclusive, which takes
// its lock: a running broker makes it fail with exit 5, and no broker can
// start meanwhile.
func openExclusive(opts *globalOptions, dataDir string) (*datadir.Dir, error) {
	if err := requireExistingDataDir(dataDir); err != nil {
		return nil, err
	}
	dir, rec, err := datadir.Open(vfs.OS{}, dataDir, datadir.Options{Exclusive: true, Logger: opts.logger()})
	if err != nil {
		return nil, openOfflineError(dataDir, rec, err)
	}
	return dir, nil
}

// groupChangeError classifies a failure to change a group offline.
func groupChangeError(dataDir string, id segment.LogID, group string, err error) error {
	switch {
	case errors.Is(err, segment.ErrNotFound):
		return openLogError(dataDir, id, err)
	case errors.Is(err, datadir.ErrNoSuchGroup):
		return exitErrorf(exitNotFound, "log %s has no group %q (%w)", id.String(), group, consumer.ErrNoGroup)
	}
	return exitErrorf(exitUnreadable, "%w", err)
}

func startPosition(target client.StartPosition) consumer.StartPosition {
	start := consumer.StartPosition{Kind: consumer.StartKind(target.Kind), Offset: target.Offset}
	if target.Kind == client.StartTime {
		start.Time = target.Time.UnixNano()
	}
	return start
}
