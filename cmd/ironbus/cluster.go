package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
)

const clusterSchema = "ironbus.cli.cluster.v1"

func newClusterCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect a cluster of brokers and move partition leaders",
		Long: `A cluster is brokers started with --node-id, --cluster-addr and the same
--peer list; a stream created with --replicas keeps that many copies of each
partition on distinct nodes. These verbs ask any member at --addr (a seed list
is accepted) over the client protocol.`,
	}
	cmd.AddCommand(newClusterStatusCmd(opts), newClusterTransferCmd(opts))
	return cmd
}

type clusterOutput struct {
	Schema     string             `json:"schema"`
	Cluster    string             `json:"cluster"`
	Node       uint32             `json:"answered_by"`
	MetaLeader uint32             `json:"meta_leader"`
	Nodes      []clusterNodeRow   `json:"nodes"`
	Partitions []clusterPartition `json:"partitions"`
}

type clusterNodeRow struct {
	ID          uint32 `json:"id"`
	Incarnation uint32 `json:"incarnation"`
	ClientAddr  string `json:"client_addr"`
	ClusterAddr string `json:"cluster_addr"`
	State       string `json:"state"`
	// LastSeenMs is how long ago the answering node heard from it; absent
	// when it never did.
	LastSeenMs *int64 `json:"last_seen_ms,omitempty"`
}

type clusterPartition struct {
	Stream    string              `json:"stream"`
	Partition uint32              `json:"partition"`
	Group     uint64              `json:"group"`
	Leader    uint32              `json:"leader"`
	Term      uint64              `json:"term"`
	Commit    uint64              `json:"commit"`
	Watermark uint64              `json:"watermark"`
	Replicas  []clusterReplicaRow `json:"replicas"`
}

type clusterReplicaRow struct {
	Node    uint32 `json:"node"`
	Role    string `json:"role"`
	Match   uint64 `json:"match"`
	Lag     uint64 `json:"lag"`
	Damaged bool   `json:"damaged,omitempty"`
	Latched bool   `json:"latched,omitempty"`
}

func newClusterStatusCmd(opts *globalOptions) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Nodes, the metadata leader, and each replicated partition's leader, replicas and lag",
		Long: `Ask a cluster member for the cluster as it sees it: every node with its
addresses and whether it is reachable, the node leading the metadata group, and
for each replicated partition its leader, term, commit index, the offset after
its last committed record (watermark) and each replica's lag behind the leader's
commit (known when the member asked leads the partition).`,
		Example: `  ironbus cluster status --addr 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
  ironbus cluster status --json`,
		Args: cobra.NoArgs,
	}
	addAddrFlag(cmd, &addr)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+clusterSchema+")")
	cmd.RunE = classified(func() error { return runClusterStatus(cmd.Context(), opts, addr) })
	return cmd
}

func runClusterStatus(ctx context.Context, opts *globalOptions, addr string) error {
	c, err := dialBroker(ctx, opts, addr, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	state, err := c.ClusterInfo(ctx, client.ClusterInfoOptions{Partitions: true})
	if err != nil {
		return clusterError(err, addr, "")
	}
	out := clusterRows(state)
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	printCluster(opts, out)
	return nil
}

// clusterError classifies a cluster verb's failure: a single node exits
// 3 with how to start a cluster, the rest as other admin verbs.
func clusterError(err error, addr, stream string) error {
	if errors.Is(err, client.ErrNotClustered) {
		return exitErrorf(exitRefused, "the broker at %s is a single node, not a cluster member: start brokers with --node-id, --cluster-addr and --peer (docs/CLUSTER.md), or try `ironbus dev --cluster 3`", addr)
	}
	return adminError(err, stream)
}

func clusterRows(state client.ClusterState) clusterOutput {
	out := clusterOutput{Schema: clusterSchema, Cluster: state.ClusterID, Node: state.Node, MetaLeader: state.MetaLeader,
		Nodes: []clusterNodeRow{}, Partitions: []clusterPartition{}}
	for _, n := range state.Nodes {
		row := clusterNodeRow{ID: n.ID, Incarnation: n.Incarnation, ClientAddr: n.ClientAddr, ClusterAddr: n.ClusterAddr,
			State: n.State.String()}
		if n.Seen {
			ms := n.LastSeen.Milliseconds()
			row.LastSeenMs = &ms
		}
		out.Nodes = append(out.Nodes, row)
	}
	for _, p := range state.Partitions {
		row := clusterPartition{Stream: p.Stream, Partition: p.Partition, Group: p.Group, Leader: p.Leader, Term: p.Term,
			Commit: p.Commit, Watermark: p.Watermark, Replicas: []clusterReplicaRow{}}
		for _, r := range p.Replicas {
			replicaRow := clusterReplicaRow{Node: r.Node, Role: r.Role.String(), Match: r.Match, Damaged: r.Damaged, Latched: r.Latched}
			if r.Match > 0 && p.Commit > r.Match {
				replicaRow.Lag = p.Commit - r.Match
			}
			row.Replicas = append(row.Replicas, replicaRow)
		}
		out.Partitions = append(out.Partitions, row)
	}
	return out
}

func printCluster(opts *globalOptions, out clusterOutput) {
	w := opts.stdout
	leader := "none"
	if out.MetaLeader != 0 {
		leader = fmt.Sprintf("node %d", out.MetaLeader)
	}
	fmt.Fprintf(w, "cluster %s, as node %d sees it; metadata leader: %s\n\n", out.Cluster, out.Node, leader)
	fmt.Fprintf(w, "%-6s %-10s %-22s %-22s %s\n", "NODE", "STATE", "CLIENT", "CLUSTER", "LAST SEEN")
	for _, n := range out.Nodes {
		seen := "never"
		if n.LastSeenMs != nil {
			seen = (time.Duration(*n.LastSeenMs) * time.Millisecond).String() + " ago"
			if *n.LastSeenMs == 0 {
				seen = "now"
			}
		}
		fmt.Fprintf(w, "%-6d %-10s %-22s %-22s %s\n", n.ID, n.State, n.ClientAddr, n.ClusterAddr, seen)
	}
	if len(out.Partitions) == 0 {
		fmt.Fprintln(w, "\nno replicated streams (create one with `ironbus stream create NAME --replicas 3`)")
		return
	}
	fmt.Fprintf(w, "\n%-24s %-9s %-7s %-6s %-10s %-10s %s\n", "STREAM", "PARTITION", "LEADER", "TERM", "COMMIT", "WATERMARK", "REPLICAS (node:role lag)")
	for _, p := range out.Partitions {
		leaderText := "-"
		if p.Leader != 0 {
			leaderText = fmt.Sprint(p.Leader)
		}
		replicas := ""
		for i, r := range p.Replicas {
			if i > 0 {
				replicas += " "
			}
			replicas += fmt.Sprintf("%d:%s", r.Node, r.Role)
			if r.Match > 0 {
				replicas += fmt.Sprintf(" %d", r.Lag)
			}
			if r.Damaged {
				replicas += " DAMAGED"
			}
			if r.Latched {
				replicas += " LATCHED"
			}
		}
		fmt.Fprintf(w, "%-24s %-9d %-7s %-6d %-10d %-10d %s\n", p.Stream, p.Partition, leaderText, p.Term, p.Commit, p.Watermark, replicas)
	}
}
