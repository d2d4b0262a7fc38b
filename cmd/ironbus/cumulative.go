package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
)

type cumulativeOptions struct {
	addr      string
	dataDir   string
	stream    string
	group     string
	partition uint32
	upTo      uint64
	set       bool
}

// cumulativeSchema names the --json object of cumulative-ack.
const cumulativeSchema = "ironbus.cli.cumulative-ack.v1"

// cumulativeOutput is the --json form of cumulative-ack.
type cumulativeOutput struct {
	Schema    string `json:"schema"`
	Stream    string `json:"stream"`
	Group     string `json:"group"`
	Partition uint32 `json:"partition"`
	UpTo      uint64 `json:"up_to"`
	Status    string `json:"status"`
}

func newCumulativeAckCmd(opts *globalOptions) *cobra.Command {
	cumulative := &cumulativeOptions{}
	cmd := &cobra.Command{
		Use:   "cumulative-ack --group G --up-to OFFSET [--addr A | --data-dir DIR]",
		Short: "Move a broadcast group's cursor: every offset below --up-to is done",
		Long: `Settle a broadcast group up to an offset: every record below --up-to is
done for the group, and its next reader starts there. It is idempotent; an
offset past what the group's reader was given is refused (out_of_range).

A broadcast group has one reader at a time; run this between readers (or
let the reader settle with sub --broadcast --ack). With --data-dir it works
on a stopped broker's directory under its exclusive lock; there it only
moves the cursor forward (an --up-to at or below it changes nothing).`,
		Example: `  ironbus cumulative-ack --stream audit --group archive --up-to 1200
  ironbus cumulative-ack --group archive --up-to 1200 --json`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	addAddrFlag(cmd, &cumulative.addr)
	flags.StringVar(&cumulative.stream, "stream", segment.DefaultStream, "stream of the group")
	flags.StringVar(&cumulative.group, "group", "", "broadcast group to settle (required)")
	flags.Uint32Var(&cumulative.partition, "partition", 0, "partition of the stream")
	flags.Uint64Var(&cumulative.upTo, "up-to", 0, "first offset not settled: every offset below it is done (required)")
	flags.BoolVar(&opts.json, "json", false, "print one JSON object (schema "+cumulativeSchema+")")
	addDataDirFlag(cmd, &cumulative.dataDir)
	cmd.RunE = classified(func() error {
		cumulative.set = cmd.Flags().Changed("up-to")
		return runCumulativeAck(cmd.Context(), opts, cumulative)
	})
	return cmd
}

func runCumulativeAck(ctx context.Context, opts *globalOptions, cumulative *cumulativeOptions) error {
	switch {
	case cumulative.group == "":
		return exitErrorf(exitUsage, "--group is required")
	case !cumulative.set:
		return exitErrorf(exitUsage, "--up-to is required: the first offset that is not done")
	}
	status, err := cumulative.settle(ctx, opts)
	if err != nil {
		return err
	}
	if opts.json {
		if err := writeJSON(opts.stdout, cumulativeOutput{Schema: cumulativeSchema, Stream: cumulative.stream, Group: cumulative.group,
			Partition: cumulative.partition, UpTo: cumulative.upTo, Status: status.String()}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(opts.stdout, "%s/%s partition %d: settled below %d (%s)\n", cumulative.stream, cumulative.group,
			cumulative.partition, cumulative.upTo, status)
	}
	if status != client.AckOK {
		return exitErrorf(exitDamage, "the broker answered %s for --up-to %d", status, cumulative.upTo)
	}
	return nil
}

// settle moves the group's cursor through the broker, or offline.
func (cumulative *cumulativeOptions) settle(ctx context.Context, opts *globalOptions) (client.AckStatus, error) {
	if cumulative.dataDir != "" {
		return cumulative.settleOffline(opts)
	}
	c, err := dialBroker(ctx, opts, cumulative.addr, 1)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.OpenGroup(ctx, cumulative.stream, cumulative.group, client.GroupOptions{Type: client.GroupBroadcast}); err != nil {
		return 0, brokerError(err, cumulative.stream)
	}
	status, err := c.CumulativeAck(ctx, cumulative.stream, cumulative.group, cumulative.partition, cumulative.upTo)
	if err != nil {
		return 0, brokerError(err, cumulative.stream)
	}
	return status, nil
}

// settleOffline moves a stopped broker's broadcast group forward under the
// directory's exclusive lock (datadir.SettleGroup).
func (cumulative *cumulativeOptions) settleOffline(opts *globalOptions) (client.AckStatus, error) {
	dir, err := openExclusive(opts, cumulative.dataDir)
	if err != nil {
		return 0, err
	}
	defer func() { _ = dir.Close() }()
	id := segment.LogID{Stream: cumulative.stream, Partition: cumulative.partition}
	summary, err := dir.SettleGroup(id, cumulative.group, cumulative.upTo)
	switch {
	case errors.Is(err, datadir.ErrOutOfRange):
		return client.AckOutOfRange, nil
	case errors.Is(err, datadir.ErrGroupType):
		return 0, exitErrorf(exitDamage, "group %q is a %s group: cumulative-ack settles broadcast groups", cumulative.group, summary.Type)
	case err != nil:
		return 0, groupChangeError(cumulative.dataDir, id, cumulative.group, err)
	}
	return client.AckOK, nil
}
