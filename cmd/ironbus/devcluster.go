package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/server"
)

// devClusterOutput is what dev --cluster --json prints once it serves.
type devClusterOutput struct {
	Schema  string   `json:"schema"`
	Addrs   []string `json:"addrs"`
	Seeds   string   `json:"seeds"`
	DataDir string   `json:"data_dir"`
}

// runDevCluster starts dev.cluster brokers in this process as the nodes of
// one cluster on loopback, each on a temporary data directory, and stops
// them all on Ctrl-C.
func runDevCluster(opts *globalOptions, dev *devOptions) error {
	if dev.cluster < 2 || dev.cluster > 7 {
		return exitErrorf(exitUsage, "--cluster %d: want 2 to 7 nodes", dev.cluster)
	}
	if dev.seed > 0 {
		return exitErrorf(exitUsage, "--seed is for a single dev broker; with --cluster create a replicated stream and publish to it")
	}
	base, err := os.MkdirTemp("", "ironbus-dev-cluster-")
	if err != nil {
		return exitErrorf(exitInternal, "creating a temporary data directory: %w", err)
	}
	defer os.RemoveAll(base)
	clusterAddrs, err := freeAddrs(dev.cluster)
	if err != nil {
		return exitErrorf(exitInternal, "finding free ports: %w", err)
	}
	peers := map[uint32]string{}
	for i, addr := range clusterAddrs {
		peers[uint32(i+1)] = addr
	}
	var servers []*server.Server
	stopAll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Stop(ctx)
		}
	}
	defer stopAll()
	var addrs []string
	for i := range dev.cluster {
		cfg := server.DefaultConfig()
		cfg.DataDir, cfg.Addr, cfg.Loop, cfg.HealthAddr = filepath.Join(base, fmt.Sprintf("node-%d", i+1)), "127.0.0.1:0", dev.loop, server.HealthOff
		cfg.IOMode, cfg.SegmentBytes, cfg.LogLevel = "auto", segment.EdgeSegmentSize, "warn"
		cfg.LogOutput, cfg.LogJSON, cfg.Version, cfg.Owner = opts.stderr, opts.json, mainModuleVersion(), "ironbus dev --cluster"
		cfg.NodeID, cfg.ClusterAddr, cfg.Peers = uint32(i+1), clusterAddrs[i], peers
		srv, err := server.New(cfg)
		if err != nil {
			return serverError(err)
		}
		servers = append(servers, srv)
		if err := srv.Start(context.Background()); err != nil {
			return exitErrorf(exitInternal, "starting node %d: %w", i+1, err)
		}
		addrs = append(addrs, srv.Addr())
	}
	printDevClusterHelp(opts, addrs, base)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	<-signals
	return nil
}

func printDevClusterHelp(opts *globalOptions, addrs []string, dataDir string) {
	seeds := strings.Join(addrs, ",")
	if opts.json {
		_ = writeJSON(opts.stdout, devClusterOutput{Schema: devSchema, Addrs: addrs, Seeds: seeds, DataDir: dataDir})
		return
	}
	fmt.Fprintf(opts.stdout, `IronBus dev cluster of %d nodes on %s (data in %s, removed on exit; Ctrl-C stops it)

Try, in another terminal:

  ironbus cluster status --addr %s
  ironbus stream create orders --partitions 2 --replicas %d --addr %s
  seq 1 1000 | ironbus pub --stream orders --partition 0 --addr %s
  ironbus sub --stream orders --addr %s --group demo --max 10 --ack

`, len(addrs), strings.Join(addrs, " "), dataDir, seeds, min(len(addrs), 3), seeds, seeds, seeds)
}

// freeAddrs reserves n loopback ports and frees them for the caller.
func freeAddrs(n int) ([]string, error) {
	var out []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
