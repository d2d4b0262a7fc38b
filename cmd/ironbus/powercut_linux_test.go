//go:build linux && !arm && !386

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/internal/testbroker"
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
	fallback := 30
	if testing.Short() || crashtest.BackendRerun() {
		fallback = 5 // the per-backend reruns of make test: the disk is the subject here
	}
	return crashtest.Count(t, "IRONBUS_POWERCUT_CYCLES", fallback)
}

// powercutTally is what the run found, for the results table.
type powercutTally struct {
	modes   map[lazyfs.CutMode]int
	exposed vfs.UnsyncedStats // summed over the cuts: what they could take
	torn    crashtest.Torn
	slowest time.Duration
}

func TestPowerCutHarness(t *testing.T) {
	disk, mount := mountLazyDisk(t)
	disk.SetSyncLatency(powercutSyncLatency)
	seed, cycles := crashtest.Seed(t), powercutCycles(t)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d power cuts", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0xc07))
	dataDir := filepath.Join(mount, "data")
	serveArgs := []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB", "--io-mode", "buffered"}
	ledger := crashtest.NewLedger()
	tally := powercutTally{modes: map[lazyfs.CutMode]int{}}
	var lastCut lazyfs.Cut
	for cycle := range cycles {
		broker := startPowercutBroker(t, serveArgs, &tally)
		if cycle > 0 {
			checkCutReport(t, dataDir, cycle, lastCut, &tally)
			checkCrashInvariants(t, broker.Addr(), ledger, cycle)
		}
		stopLoad := startCrashLoad(t, broker.Addr(), ledger, cycle)
		waitToKill(ledger, random)
		// The power goes: syncs in flight persist nothing, and the
		// broker dies before it can act on their failure.
		disk.SetFault(lazyfs.FailSync)
		_ = broker.Signal(syscall.SIGKILL)
		ledger.Killed(time.Now())
		broker.Wait()
		stopLoad()
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
				cycle+1, ledger.Acknowledged(), tally.exposed.Writes, tally.torn.Logs, tally.slowest.Round(time.Millisecond))
		}
	}
	broker := startPowercutBroker(t, serveArgs, &tally)
	checkCutReport(t, dataDir, cycles, lastCut, &tally)
	checkCrashInvariants(t, broker.Addr(), ledger, cycles)
	broker.Kill() // its files on the mount are closed before the cleanup unmounts it
	t.Logf("%d power cuts (%d drop all unsynced, %d subset, %d reordered, %d torn): %d acknowledged records, 0 lost; "+
		"group acknowledged through %d; the cuts hit %d unsynced writes (%d B) and %d unsynced directory changes; "+
		"torn tails truncated in %d recoveries (%d B); slowest restart %v",
		cycles, tally.modes[lazyfs.DropUnsynced], tally.modes[lazyfs.KeepSubset], tally.modes[lazyfs.ReorderSubset],
		tally.modes[lazyfs.TearSubset], ledger.Acknowledged(), ledger.Through(), tally.exposed.Writes, tally.exposed.Bytes, tally.exposed.DirChanges, tally.torn.Logs, tally.torn.Bytes,
		tally.slowest.Round(time.Millisecond))
}

// waitToKill picks the moment of the kill. A timer alone mostly lands
// after the producers' share is sent, when everything is synced and a cut
// has nothing to take; so seven kills in eight come after a random number
// of new acknowledgements, while writes and syncs are in flight.
func waitToKill(ledger *crashtest.Ledger, random *rand.Rand) {
	if random.IntN(8) == 0 {
		time.Sleep(time.Duration(20+random.IntN(300)) * time.Millisecond)
		return
	}
	target := ledger.Acknowledged() + random.IntN(2*crashtest.RecordsPerProducer)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		if ledger.Acknowledged() >= target {
			return
		}
	}
}

func startPowercutBroker(t *testing.T, args []string, tally *powercutTally) *testbroker.Process {
	t.Helper()
	began := time.Now()
	broker := ironbus.Serve(t, args...)
	tally.slowest = max(tally.slowest, time.Since(began))
	return broker
}

// checkCutReport reads the recovery report the restarted broker wrote: a
// power cut may cost unacknowledged bytes past the last commit frame
// (reported as a torn tail), never data loss, and never a frozen log.
func checkCutReport(t *testing.T, dataDir string, cycle int, cut lazyfs.Cut, tally *powercutTally) {
	t.Helper()
	torn := crashtest.CheckReport(t, crashtest.ReadReport(t, dataDir), fmt.Sprintf("cycle %d (after cut %v, seed %d)", cycle, cut, cut.Seed))
	tally.torn.Logs += torn.Logs
	tally.torn.Bytes += torn.Bytes
}
