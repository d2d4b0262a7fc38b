// Command encryptbench measures what encryption at rest costs: P2b (8
// pipelined producers, window 512 each, fsynced acks) and C1 (consuming
// stored records: the streaming tier and a work group acked per fetch)
// against a broker started with and without --encryption-key-file, the
// two alternating in one run so both see the same machine. It reports the
// median of each and the ratio encrypted / plain.
//
//	go run ./benchrig/cmd/encryptbench -dir /var/tmp -runs 5
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ironbus/ironbus/benchrig/consumebench"
	"github.com/ironbus/ironbus/benchrig/netbench"
	"github.com/ironbus/ironbus/keyring"
	"github.com/ironbus/ironbus/server"
)

type options struct {
	dir                 string
	runs, records, size int
	producers, window   int
	consumers, fetch    int
	produceFor          time.Duration
}

// shapes are the measurements of one run, records per second.
var shapes = []string{"P2b", "C1-stream", "C1-work"}

func main() {
	var opts options
	flag.StringVar(&opts.dir, "dir", os.TempDir(), "directory on the disk to measure")
	flag.IntVar(&opts.runs, "runs", 5, "runs per mode (plain, encrypted), alternating; medians are reported")
	flag.IntVar(&opts.records, "records", 200_000, "records stored, then consumed, per C1 run")
	flag.IntVar(&opts.size, "size", 256, "record payload bytes")
	flag.IntVar(&opts.producers, "producers", 8, "P2b connections")
	flag.IntVar(&opts.window, "window", 512, "P2b records in flight per connection")
	flag.IntVar(&opts.consumers, "consumers", 4, "C1 work-group consumers")
	flag.IntVar(&opts.fetch, "fetch", 1000, "C1 work-group records per Fetch")
	flag.DurationVar(&opts.produceFor, "duration", 5*time.Second, "P2b run length")
	flag.Parse()
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "encryptbench:", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	work, err := os.MkdirTemp(opts.dir, "encryptbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ringFile := filepath.Join(work, "bench.keys")
	if _, err := keyring.Create(ringFile, time.Now()); err != nil {
		return err
	}
	results := map[string]map[string][]float64{"plain": {}, "encrypted": {}}
	for run := range opts.runs {
		for _, mode := range []string{"plain", "encrypted"} {
			keyFile := ""
			if mode == "encrypted" {
				keyFile = ringFile
			}
			rates, err := measure(opts, work, keyFile)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", mode, run+1, err)
			}
			for i, shape := range shapes {
				results[mode][shape] = append(results[mode][shape], rates[i])
			}
			fmt.Printf("run %d %-9s  P2b %10.0f msg/s  C1-stream %10.0f msg/s  C1-work %10.0f msg/s\n",
				run+1, mode, rates[0], rates[1], rates[2])
		}
	}
	fmt.Printf("\nmedians of %d runs, %d B payloads\n%-10s %14s %14s %9s\n", opts.runs, opts.size, "shape", "plain msg/s", "encrypted", "cost")
	for _, shape := range shapes {
		plain, encrypted := median(results["plain"][shape]), median(results["encrypted"][shape])
		fmt.Printf("%-10s %14.0f %14.0f %8.1f%%\n", shape, plain, encrypted, 100*(1-encrypted/plain))
	}
	return nil
}

// measure starts a broker on a fresh directory (encrypted when keyFile
// is set) and runs P2b, then C1 on records stored for it.
func measure(opts options, work, keyFile string) ([]float64, error) {
	dataDir, err := os.MkdirTemp(work, "data-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Addr, cfg.HealthAddr, cfg.Owner = dataDir, "127.0.0.1:0", server.HealthOff, "encryptbench"
	cfg.EncryptionKeyFile = keyFile
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	}()
	if err := srv.Start(context.Background()); err != nil {
		return nil, err
	}
	addr := srv.Addr()
	produced, err := netbench.Produce(addr, "p2b", opts.producers, opts.window, opts.size, opts.produceFor, 0)
	if err != nil {
		return nil, err
	}
	if _, err := consumebench.Fill(addr, "c1", opts.records, opts.size, 4); err != nil {
		return nil, err
	}
	streamed, err := consumebench.Stream(addr, "c1", "streaming", opts.records, opts.size)
	if err != nil {
		return nil, err
	}
	worked, err := consumebench.WorkGroup(addr, "c1", "work", opts.records, opts.size, opts.consumers, opts.fetch)
	if err != nil {
		return nil, err
	}
	return []float64{produced.PerSecond, streamed.PerSecond, worked.PerSecond}, nil
}

func median(values []float64) float64 {
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}
