//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/crashtest"
)

// The black-box crash harness: the real broker is killed with SIGKILL at
// random points while pipelined producers publish and a work group
// consumes (the workload of internal/crashtest); after every restart each
// acknowledged record must be there, in order and byte-identical, no
// offset may be reused, and the group's acknowledged progress must hold up
// to the documented redelivery (what was acked since its last checkpoint:
// CheckpointInterval plus the time its syncs take).
//
// IRONBUS_CRASH_CYCLES sets the number of kills (make test: 50, and 20
// per extra backend; make crash-test: 1,000); IRONBUS_SEED replays one run.

// checkpointSlack is how far before a kill acknowledged work may come back:
// the 200 ms checkpoint interval plus the checkpoint's own file syncs,
// which on a shared CI disk busy with the producers' fdatasyncs (and other
// test packages) were seen to take most of a second. The bound catches a
// group whose checkpoints stop being written, not a slow disk.
const checkpointSlack = 8 * time.Second

// crashGroup is the work group the harness consumes through.
const crashGroup = "crash"

func crashCycles(t *testing.T) int {
	fallback := 50
	switch {
	case testing.Short():
		fallback = 10
	case crashtest.BackendRerun():
		fallback = 20 // the per-backend reruns of make test; the main run does 50
	}
	return crashtest.Count(t, "IRONBUS_CRASH_CYCLES", fallback)
}

func TestCrashHarnessKill9(t *testing.T) {
	seed, cycles := crashtest.Seed(t), crashCycles(t)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d kill cycles", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0x5eed))
	dataDir := t.TempDir()
	ledger := crashtest.NewLedger()
	var maxRecovery time.Duration
	for cycle := range cycles {
		began := time.Now()
		broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB")
		maxRecovery = max(maxRecovery, time.Since(began))
		if cycle > 0 {
			checkCrashInvariants(t, broker.Addr(), ledger, cycle)
		}
		stopLoad := startCrashLoad(t, broker.Addr(), ledger, cycle)
		time.Sleep(time.Duration(20+random.IntN(300)) * time.Millisecond)
		_ = broker.Signal(syscall.SIGKILL)
		ledger.Killed(time.Now())
		broker.Wait()
		stopLoad()
		if t.Failed() {
			t.Fatalf("cycle %d failed; replay with IRONBUS_SEED=%d", cycle, seed)
		}
		if done := cycle + 1; done%100 == 0 && done < cycles {
			// A long run stopped early still says how far it got.
			t.Logf("%d of %d kill cycles: %d acknowledged records, 0 lost; slowest restart %v",
				done, cycles, ledger.Acknowledged(), maxRecovery.Round(time.Millisecond))
		}
	}
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB")
	checkCrashInvariants(t, broker.Addr(), ledger, cycles)
	t.Logf("%d kill -9 cycles: %d acknowledged records, 0 lost; group acknowledged through %d; slowest restart %v",
		cycles, ledger.Acknowledged(), ledger.Through(), maxRecovery.Round(time.Millisecond))
}

// startCrashLoad runs the workload of one cycle against addr: two
// pipelined producers and the crash group's consumer. The returned func
// stops it and waits until it has.
func startCrashLoad(t *testing.T, addr string, ledger *crashtest.Ledger, cycle int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for producer := range 2 {
		prefix := fmt.Sprintf("c%d-p%d-m", cycle, producer)
		load.Go(func() { crashtest.Produce(ctx, t, addr, ledger, prefix) })
	}
	load.Go(func() { crashtest.Consume(ctx, addr, ledger, crashGroup) })
	return func() {
		cancel()
		load.Wait()
	}
}

// checkCrashInvariants reads the whole log back after a restart and
// checks the crash group's first delivery.
func checkCrashInvariants(t *testing.T, addr string, ledger *crashtest.Ledger, cycle int) {
	t.Helper()
	ledger.Check(t, addr, cycle)
	ledger.CheckGroup(t, addr, crashGroup, cycle, checkpointSlack)
}
