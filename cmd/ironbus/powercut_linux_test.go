//go:build linux && !arm && !386

package main

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/segment/vfs/lazyfs"
)

// The power-cut variant of the kill -9 harness: the broker's data
// directory lives on a lazyfs FUSE mount hosted by this test process, so
// after each SIGKILL the harness can also take away every write no
// fdatasync or directory fsync covered (all of it, a random subset, the
// subset reordered, or with one write torn at a sector), as a power cut
// would. kill -9 alone leaves the page cache intact; this proves the
// broker's sync discipline on the real binary.
//
// IRONBUS_POWERCUT_CYCLES sets the number of cuts (make test: 30, about
// 40 s alone on 2 cores with the race detector, which slows the FUSE server
// in this process too; 5 per extra backend; make powercut-test: 1,000); IRONBUS_SEED replays one run: the seed of
// each cut is derived from it and printed with a failure.

// mountLazyDisk serves a fresh lazyfs disk in a temporary directory, or
// skips the test where FUSE cannot be mounted.
func mountLazyDisk(t *testing.T) (*lazyfs.Disk, string) {
	t.Helper()
	disk, mount := lazyfs.New(nil), t.TempDir()
	if err := disk.Mount(mount); err != nil {
		if errors.Is(err, lazyfs.ErrUnavailable) {
			t.Skipf("the power-cut harness needs a FUSE mount (Linux, /dev/fuse, root): %v", err)
		}
		t.Fatal(err)
	}
	// Registered after TempDir, so it runs first: unmount, then remove.
	t.Cleanup(func() {
		if err := disk.Unmount(); err != nil {
			t.Errorf("lazyfs: %v", err)
		}
	})
	return disk, mount
}

// powercutSyncLatency is how long each sync of the mount takes: about an
// SD card's or a small SSD's flush, so a kill finds the batches written
// while a sync was in flight still unsynced.
const powercutSyncLatency = 2 * time.Millisecond

func powercutCycles(t *testing.T) int {
	if text := os.Getenv("IRONBUS_POWERCUT_CYCLES"); text != "" {
		cycles, err := strconv.Atoi(text)
		if err != nil || cycles < 1 {
			t.Fatalf("IRONBUS_POWERCUT_CYCLES=%q", text)
		}
		return cycles
	}
	if testing.Short() || os.Getenv("IRONBUS_TEST_LOOP") != "" {
		return 5 // the per-backend reruns of make test: the disk is the subject here
	}
	return 30
}

// powercutTally is what the run found, for the results table.
type powercutTally struct {
	modes     map[lazyfs.CutMode]int
	exposed   vfs.UnsyncedStats // summed over the cuts: what they could take
	tornBytes int64
	tornLogs  int
	slowest   time.Duration
}

func TestPowerCutHarness(t *testing.T) {
	disk, mount := mountLazyDisk(t)
	disk.SetSyncLatency(powercutSyncLatency)
	seed, cycles := crashSeed(t), powercutCycles(t)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d power cuts", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0xc07))
	dataDir := filepath.Join(mount, "data")
	serveArgs := []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB", "--io-mode", "buffered"}
	ledger := &crashLedger{acked: map[uint64]string{}, payload: map[string]uint64{}}
	tally := powercutTally{modes: map[lazyfs.CutMode]int{}}
	sequence := 0
	var lastCut lazyfs.Cut
	for cycle := range cycles {
		broker := startPowercutBroker(t, serveArgs, &tally)
		if cycle > 0 {
			checkCutReport(t, dataDir, cycle, lastCut, &tally)
			checkCrashInvariants(t, broker.addr, ledger, cycle)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var load sync.WaitGroup
		for producer := range 2 {
			start := sequence + producer*1_000_000
			load.Go(func() { crashProducer(ctx, t, broker.addr, ledger, cycle, start) })
		}
		load.Go(func() { crashConsumer(ctx, broker.addr, ledger) })
		waitToKill(ledger, random)
		// The power goes: syncs in flight persist nothing, and the
		// broker dies before it can act on their failure.
		disk.SetFault(lazyfs.FailSync)
		_ = broker.cmd.Process.Signal(syscall.SIGKILL)
		killedAt := time.Now()
		<-broker.exited
		cancel()
		load.Wait()
		ledger.mu.Lock()
		ledger.kills = append(ledger.kills, killedAt)
		ledger.mu.Unlock()
		sequence += 2_000_000
		lastCut = lazyfs.PlanCut(random.Uint64())
		tally.modes[lastCut.Mode]++
		exposed, err := disk.CutPower(lastCut)
		if err != nil {
			t.Fatalf("cycle %d: cutting power (%v): %v", cycle, lastCut, err)
		}
		disk.SetFault(lazyfs.Healthy)
		tally.exposed.Writes += exposed.Writes
		tally.exposed.Bytes += exposed.Bytes
		tally.exposed.DirChanges += exposed.DirChanges
		if t.Failed() {
			t.Fatalf("cycle %d failed; replay with IRONBUS_SEED=%d", cycle, seed)
		}
		if (cycle+1)%100 == 0 {
			// Long runs report as they go, so a run stopped early
			// still says how far it got.
			t.Logf("%d cuts passed: %d acknowledged records, %d unsynced writes hit, %d torn tails, slowest restart %v",
				cycle+1, len(ledger.acked), tally.exposed.Writes, tally.tornLogs, tally.slowest.Round(time.Millisecond))
		}
	}
	broker := startPowercutBroker(t, serveArgs, &tally)
	checkCutReport(t, dataDir, cycles, lastCut, &tally)
	checkCrashInvariants(t, broker.addr, ledger, cycles)
	stopBeforeUnmount(broker)
	t.Logf("%d power cuts (%d drop all unsynced, %d subset, %d reordered, %d torn): %d acknowledged records, 0 lost; "+
		"group acknowledged through %d; the cuts hit %d unsynced writes (%d B) and %d unsynced directory changes; "+
		"torn tails truncated in %d recoveries (%d B); slowest restart %v",
		cycles, tally.modes[lazyfs.DropUnsynced], tally.modes[lazyfs.KeepSubset], tally.modes[lazyfs.ReorderSubset],
		tally.modes[lazyfs.TearSubset], len(ledger.acked), ledger.consumedThrough, tally.exposed.Writes, tally.exposed.Bytes, tally.exposed.DirChanges, tally.tornLogs, tally.tornBytes,
		tally.slowest.Round(time.Millisecond))
}

// waitToKill picks the moment of the kill. A timer alone mostly lands
// after the producers' share is sent, when everything is synced and a cut
// has nothing to take; so seven kills in eight come after a random number
// of new acknowledgements, while writes and syncs are in flight.
func waitToKill(ledger *crashLedger, random *rand.Rand) {
	if random.IntN(8) == 0 {
		time.Sleep(time.Duration(20+random.IntN(300)) * time.Millisecond)
		return
	}
	ledger.mu.Lock()
	target := len(ledger.acked) + random.IntN(2*crashRecordsPerCycle)
	ledger.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		ledger.mu.Lock()
		reached := len(ledger.acked) >= target
		ledger.mu.Unlock()
		if reached {
			return
		}
	}
}

// stopBeforeUnmount kills a broker and waits until it has exited, so its
// files on the mount are closed when the test's cleanup unmounts it.
func stopBeforeUnmount(broker *brokerProcess) {
	_ = broker.cmd.Process.Signal(syscall.SIGKILL)
	<-broker.exited
}

func startPowercutBroker(t *testing.T, args []string, tally *powercutTally) *brokerProcess {
	t.Helper()
	began := time.Now()
	broker := startBroker(t, args...)
	tally.slowest = max(tally.slowest, time.Since(began))
	return broker
}

// checkCutReport reads the recovery report the restarted broker wrote: a
// power cut may cost unacknowledged bytes past the last commit frame
// (reported as a torn tail), never data loss, and never a frozen log.
func checkCutReport(t *testing.T, dataDir string, cycle int, cut lazyfs.Cut, tally *powercutTally) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "recovery-report.json"))
	if err != nil {
		t.Fatalf("cycle %d (after cut %v, seed %d): %v", cycle, cut, cut.Seed, err)
	}
	var report segment.RecoveryReport
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("cycle %d: recovery-report.json: %v\n%s", cycle, err, data)
	}
	for _, log := range report.Logs {
		if log.HasDataLoss() || log.Outcome == segment.OutcomeFrozen {
			t.Fatalf("cycle %d: a power cut (%v, seed %d) was reported as %s for %s/%d:\n%s",
				cycle, cut, cut.Seed, log.Outcome, log.Stream, log.Partition, data)
		}
		if log.TornTailBytes > 0 {
			accounted := int64(0)
			for _, event := range log.Events {
				accounted += event.Bytes
			}
			if accounted != log.TornTailBytes {
				t.Fatalf("cycle %d: %d torn bytes reported, events account for %d:\n%s", cycle, log.TornTailBytes, accounted, data)
			}
			tally.tornLogs++
			tally.tornBytes += log.TornTailBytes
		}
	}
}
