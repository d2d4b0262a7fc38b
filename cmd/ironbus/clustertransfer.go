package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

const clusterTransferSchema = "ironbus.cli.cluster-transfer.v1"

type clusterTransferOptions struct {
	addr      string
	stream    string
	partition uint32
	to        uint32
}

type clusterTransferOutput struct {
	Schema    string `json:"schema"`
	Stream    string `json:"stream"`
	Partition uint32 `json:"partition"`
	From      uint32 `json:"from"`
	Leader    uint32 `json:"leader"`
	Term      uint64 `json:"term"`
	// ElapsedUs is how long the move took (appends paused about as
	// long); 0 when the node asked for already led.
	ElapsedUs int64 `json:"elapsed_us"`
	Moved     bool  `json:"moved"`
}

func newClusterTransferCmd(opts *globalOptions) *cobra.Command {
	transfer := &clusterTransferOptions{}
	cmd := &cobra.Command{
		Use:   "transfer --stream S --partition P --to NODE",
		Short: "Move one replicated partition's leadership to another node",
		Long: `Move the leadership of one partition of a replicated stream to node NODE, one
of the partition's voters. Use it to spread leaders evenly across the nodes
(each leader does the partition's writes), or to move leaders off a node before
maintenance; ` + "`ironbus cluster status`" + ` shows who leads what.

The leader hands over directly: the new leader takes appends after about one
round trip between the two nodes and its first commit, not after an election
timeout. Meanwhile producers are told not_leader and follow the new leader (the
SDK and ` + "`ironbus pub`" + ` do this on their own); nothing acknowledged is lost. The
command returns once NODE leads and takes appends, and reports how long the move
took. Naming the node that already leads changes nothing.

The request goes to whichever member --addr reaches, and is sent on to the
partition's leader. Exit 3 when the broker refuses: a single node (no leaders to
move), a stream that is not replicated, a partition the stream does not have, a
node that holds no voter of it, or a NODE that did not take over within 5 s (it
may be down or behind: check its lag with ` + "`ironbus cluster status`" + `).`,
		Example: `  ironbus cluster transfer --stream orders --partition 2 --to 3
  ironbus cluster transfer --stream orders --to 1 --addr 127.0.0.1:7001,127.0.0.1:7002 --json`,
		Args: cobra.NoArgs,
	}
	addAddrFlag(cmd, &transfer.addr)
	cmd.Flags().StringVar(&transfer.stream, "stream", "", "the replicated stream (required)")
	cmd.Flags().Uint32Var(&transfer.partition, "partition", 0, "the partition whose leader moves")
	cmd.Flags().Uint32Var(&transfer.to, "to", 0, "the node id that is to lead (required; ironbus cluster status lists each partition's replicas)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+clusterTransferSchema+")")
	_ = cmd.MarkFlagRequired("stream")
	_ = cmd.MarkFlagRequired("to")
	cmd.RunE = classified(func() error { return runClusterTransfer(cmd.Context(), opts, transfer) })
	return cmd
}

func runClusterTransfer(ctx context.Context, opts *globalOptions, transfer *clusterTransferOptions) error {
	if transfer.to == 0 {
		return exitErrorf(exitUsage, "--to names a node id; node ids start at 1")
	}
	if err := validateStream(transfer.stream); err != nil {
		return err
	}
	c, err := dialBroker(ctx, opts, transfer.addr, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	result, err := c.TransferLeadership(ctx, transfer.stream, transfer.partition, transfer.to)
	if err != nil {
		return clusterError(err, transfer.addr, transfer.stream)
	}
	out := clusterTransferOutput{Schema: clusterTransferSchema, Stream: result.Stream, Partition: result.Partition,
		From: result.From, Leader: result.Leader, Term: result.Term, ElapsedUs: result.Elapsed.Microseconds(),
		Moved: result.From != result.Leader}
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	if !out.Moved {
		fmt.Fprintf(opts.stdout, "partition %s/%d: node %d already leads (term %d); nothing moved\n", out.Stream, out.Partition, out.Leader, out.Term)
		return nil
	}
	fmt.Fprintf(opts.stdout, "partition %s/%d: leader moved from node %d to node %d in %s (term %d)\n", out.Stream, out.Partition,
		out.From, out.Leader, formatPause(result.Elapsed.Microseconds()), out.Term)
	return nil
}

// formatPause prints a pause in milliseconds, with a decimal below 10 ms.
func formatPause(us int64) string {
	if us < 10_000 {
		return fmt.Sprintf("%.1f ms", float64(us)/1000)
	}
	return fmt.Sprintf("%d ms", us/1000)
}
