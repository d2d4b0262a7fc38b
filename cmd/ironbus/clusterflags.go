package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/server"
)

// addClusterFlags adds the flags that make serve a cluster member.
func addClusterFlags(cmd *cobra.Command, cfg *server.Config) {
	flags := cmd.Flags()
	flags.Uint32Var(&cfg.NodeID, "node-id", 0,
		"make this broker node N of a cluster (0: a single node); needs --cluster-addr and --peer")
	flags.StringVar(&cfg.ClusterAddr, "cluster-addr", "",
		"host:port the other nodes reach this one at (the peer link and the metadata group share it)")
	flags.Var(peersValue{&cfg.Peers}, "peer",
		"a founding node as id=host:port (repeatable, or comma-separated); list every node, this one included, the same on every node")
	flags.StringVar(&cfg.ClusterName, "cluster-name", cfg.ClusterName,
		"the cluster's name: nodes refuse peers of another cluster")
	flags.BoolVar(&cfg.InsecurePlaintextCluster, "insecure-plaintext-cluster", false,
		"allow non-loopback cluster addresses: the peer link has no TLS yet, so records cross the network in plaintext")
}

// peersValue is the --peer list: id=host:port entries, one per flag or
// comma-separated, so a config file key sets it like the command line.
type peersValue struct{ peers *map[uint32]string }

func (v peersValue) String() string {
	if v.peers == nil || len(*v.peers) == 0 {
		return ""
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(*v.peers)) {
		parts = append(parts, fmt.Sprintf("%d=%s", id, (*v.peers)[id]))
	}
	return strings.Join(parts, ",")
}

func (v peersValue) Set(text string) error {
	if *v.peers == nil {
		*v.peers = map[uint32]string{}
	}
	for _, entry := range strings.Split(text, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		idText, address, ok := strings.Cut(entry, "=")
		id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 32)
		if !ok || err != nil || id == 0 || strings.TrimSpace(address) == "" {
			return fmt.Errorf("%q: want id=host:port with a nonzero node id, for example 2=127.0.0.1:8002", entry)
		}
		if old, seen := (*v.peers)[uint32(id)]; seen && old != strings.TrimSpace(address) {
			return fmt.Errorf("node %d is given twice, at %s and at %s", id, old, strings.TrimSpace(address))
		}
		(*v.peers)[uint32(id)] = strings.TrimSpace(address)
	}
	return nil
}

func (peersValue) Type() string { return "id=addr" }
