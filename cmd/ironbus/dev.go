package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/server"
)

type devOptions struct {
	seed    int
	addr    string
	loop    string
	cluster int
}

func newDevCmd(opts *globalOptions) *cobra.Command {
	dev := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev [--seed N]",
		Short: "Run a throwaway broker on a temporary data directory, for trying IronBus",
		Long: `Run a broker for experiments: it keeps its data in a temporary directory that
is removed when it stops (Ctrl-C), and prints the commands to try against it.

Everything else is the real broker: records are acknowledged after fdatasync,
exactly as with ironbus serve. --seed publishes N demo records first, so sub
has something to read. --cluster N starts N brokers in this process, a cluster
on loopback with free ports, for trying replicated streams.`,
		Example: `  ironbus dev
  ironbus dev --seed 100
  ironbus dev --cluster 3`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().IntVar(&dev.seed, "seed", 0, "publish this many demo records to the default stream first")
	cmd.Flags().StringVar(&dev.loop, "loop", loop.BackendAuto, "network backend: auto, uring, epoll or std")
	cmd.Flags().BoolVar(&opts.json, "json", false, "log one JSON object per line to stderr, and print where it serves as one JSON object (schema "+devSchema+")")
	cmd.Flags().StringVar(&dev.addr, "addr", server.DefaultAddr, "address to listen on; a busy port falls back to a free one")
	cmd.Flags().IntVar(&dev.cluster, "cluster", 0, "start a cluster of this many nodes (2 to 7) on loopback instead of one broker")
	cmd.RunE = classified(func() error {
		if dev.cluster != 0 {
			return runDevCluster(opts, dev)
		}
		return runDev(opts, dev)
	})
	return cmd
}

func runDev(opts *globalOptions, dev *devOptions) error {
	dataDir, err := os.MkdirTemp("", "ironbus-dev-")
	if err != nil {
		return exitErrorf(exitInternal, "creating a temporary data directory: %w", err)
	}
	defer os.RemoveAll(dataDir)
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Addr, cfg.Loop, cfg.HealthAddr = dataDir, dev.addr, dev.loop, server.HealthOff
	cfg.IOMode, cfg.SegmentBytes = "auto", segment.EdgeSegmentSize
	cfg.LogOutput, cfg.LogJSON, cfg.Version, cfg.Owner = opts.stderr, opts.json, mainModuleVersion(), "ironbus dev"
	if !portFree(dev.addr) {
		cfg.Addr = "127.0.0.1:0"
	}
	return runBroker(opts, &serveOptions{cfg: cfg}, cfg, func(addr string) {
		if dev.seed > 0 {
			if err := seedRecords(addr, dev.seed); err != nil {
				fmt.Fprintf(opts.stderr, "ironbus dev: seeding: %v\n", err)
			}
		}
		printDevHelp(opts, addr, dataDir, dev.seed)
	})
}

// devSchema names the object dev --json prints once it serves: a script
// that starts a throwaway broker reads where it listens from stdout, while
// the JSON log goes to stderr.
const devSchema = "ironbus.cli.dev.v1"

type devOutput struct {
	Schema  string `json:"schema"`
	Addr    string `json:"addr"`
	DataDir string `json:"data_dir"`
	Seeded  int    `json:"seeded"`
}

func printDevHelp(opts *globalOptions, addr, dataDir string, seeded int) {
	if opts.json {
		_ = writeJSON(opts.stdout, devOutput{Schema: devSchema, Addr: addr, DataDir: dataDir, Seeded: seeded})
		return
	}
	fmt.Fprintf(opts.stdout, `IronBus dev broker on %s (data in %s, removed on exit; Ctrl-C stops it)
%s
Try, in another terminal:

  ironbus pub --addr %s "hello, durable world"
  printf 'one\ntwo\nthree\n' | ironbus pub --addr %s
  ironbus sub --addr %s --group demo --max 10 --ack

`, addr, dataDir, seededLine(seeded), addr, addr, addr)
}

func seededLine(seeded int) string {
	if seeded == 0 {
		return ""
	}
	return fmt.Sprintf("Seeded %d demo records into the default stream.\n", seeded)
}

// seedRecords publishes n demo records through the SDK, as a user would.
func seedRecords(addr string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"demo":%d}`, i)
	}
	return publishLines(ctx, addr, segment.DefaultStream, lines, 256)
}

// portFree reports whether addr can be listened on right now.
func portFree(addr string) bool {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = listener.Close()
	return true
}
