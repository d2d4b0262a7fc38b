package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/wire"
)

// TestPowerCutBrokerSeeded is the in-process twin of cmd/ironbus's
// TestPowerCutHarness: the same workload (two pipelined producers, a work
// group acknowledging in batches, 1 MiB segments) against a broker on the
// crashable MemFS, cut at a seeded moment with seeded survival of unsynced
// writes (drop all, subset, reordered, torn), reopened on what survived,
// three cuts per seed. Every acknowledged record must come back at its
// offset, byte-identical, in order, and recovery must report no data loss.
//
// The seed fixes the cut (its moment, counted in acknowledgements, and what
// survives); goroutine scheduling still varies, so a replay repeats the
// cut, not every interleaving. The workload and the checks are
// internal/crashtest's, shared with the FUSE harness. IRONBUS_SEED replays one seed;
// IRONBUS_BROKER_POWERCUT_SEEDS sets how many seeds run (8; -short and
// the per-backend reruns 2).
func TestPowerCutBrokerSeeded(t *testing.T) {
	seeds, base := powercutSeeds(t)
	for i := range seeds {
		seed := base + uint64(i)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay with IRONBUS_SEED=%d", seed)
			runPowercutSeed(t, seed)
		})
	}
}

func powercutSeeds(t *testing.T) (int, uint64) {
	fallback := 8
	if testing.Short() || crashtest.BackendRerun() {
		fallback = 2 // the per-backend reruns of make test: the disk is the subject here
	}
	seeds := crashtest.Count(t, "IRONBUS_BROKER_POWERCUT_SEEDS", fallback)
	if crashtest.Replaying() {
		seeds = 1
	}
	return seeds, crashtest.Seed(t)
}

func runPowercutSeed(t *testing.T, seed uint64) {
	random := rand.New(rand.NewPCG(seed, seed^0xc07))
	image := vfs.NewMemFS()
	ledger := crashtest.NewLedger()
	unsyncedWrites := 0
	for cut := range 3 {
		addr, stop := servePowercut(t, image)
		ledger.Resume()
		if cut > 0 {
			ledger.Check(t, addr, cut)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var load sync.WaitGroup
		for producer := range 2 {
			prefix := fmt.Sprintf("c%d-p%d-", cut, producer)
			load.Go(func() { crashtest.Produce(ctx, t, addr, ledger, prefix) })
		}
		load.Go(func() { crashtest.Consume(ctx, addr, ledger, "work") })
		target := ledger.Acknowledged() + random.IntN(3000)
		for deadline := time.Now().Add(5 * time.Second); ledger.Acknowledged() < target && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		options := vfs.CrashOptions{Seed: random.Uint64(), SectorSize: 512}
		if mode := random.IntN(4); mode > 0 {
			options.KeepUnsynced = 0.1 + 0.8*random.Float64()
			options.Reorder, options.Tear = mode >= 2, mode == 3
		}
		ledger.Cut(func() {
			unsyncedWrites += image.Unsynced().Writes
			image = image.CrashClone(options)
		})
		cancel()
		load.Wait()
		stop() // the old broker lives on its old image; the cut one is next
	}
	addr, stop := servePowercut(t, image)
	defer stop()
	ledger.Check(t, addr, 3)
	t.Logf("3 cuts: %d acknowledged records, 0 lost; the cuts hit %d unsynced writes", ledger.Acknowledged(), unsyncedWrites)
}

// powercutSyncLatency mirrors the FUSE harness: syncs of MemFS take no
// time, which leaves a cut almost nothing unsynced to take.
const powercutSyncLatency = 2 * time.Millisecond

func slowSyncs(op vfs.Op) error {
	switch op.Kind {
	case vfs.OpSyncData, vfs.OpSync, vfs.OpSyncDir:
		time.Sleep(powercutSyncLatency)
	}
	return nil
}

// servePowercut runs a broker on image over loopback TCP, with slow syncs,
// after checking that recovering the image found no data loss. It serves
// the wire handler over an engine of its own rather than a server: the
// engine runs on the crashable MemFS.
func servePowercut(t *testing.T, image *vfs.MemFS) (string, func()) {
	t.Helper()
	fsys := vfs.Inject(image, vfs.InjectorFunc(slowSyncs))
	b, err := broker.Open(broker.Config{DataDir: "/data", FS: fsys, Storage: segment.Options{SegmentSize: 1 << 20}})
	if err != nil {
		t.Fatalf("a cut image did not open: %v", err)
	}
	crashtest.CheckReport(t, b.Dir().Report(), "after a power cut")
	server, _, err := loop.New(testBackend(), loop.Config{}, testHandler(t, b, Config{}))
	if err != nil {
		t.Fatal(err)
	}
	bound, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve() }()
	return bound.String(), func() {
		server.CloseAll()
		_ = b.Close()
	}
}

// TestGroupCreationSurvivesACut: a group is created in the background
// (the checkpoint flusher writes it, off the reactor), yet nothing answers
// for it before its creation is on disk. A group opened at the latest
// offset and cut right after the answer comes back at that offset, not at
// a later "latest" that would skip what was stored in between.
func TestGroupCreationSurvivesACut(t *testing.T) {
	image := vfs.NewMemFS()
	addr, stop := servePowercut(t, image)
	c := connect(t, addr)
	for i := range 3 {
		produceAt(t, c, "orders", 0, "k", "", fmt.Sprint("before-", i))
	}
	open := wire.OpenGroup{Stream: []byte("orders"), Group: []byte("tail"), Mode: wire.ModeStreaming, StartKind: wire.StartLatest}
	if info, e := c.openGroup(1, open); e != nil || info.Committed != 3 {
		t.Fatalf("open: %+v, %+v; want the group at offset 3", info, e)
	}
	// Groups a Consume creates (at the earliest offset) answer only once
	// they are on disk too, on the work and the streaming path.
	for i, mode := range []uint8{wire.ModeWork, wire.ModeStreaming} {
		name := fmt.Sprint("reader-", mode)
		a := c.consume(uint32(10+i), wire.Consume{Stream: []byte("orders"), Group: []byte(name), Mode: mode, MaxRecords: 10})
		if a.err != nil || len(a.deliveries) != 3 {
			t.Fatalf("%s: %d records, error %+v", name, len(a.deliveries), a.err)
		}
	}
	image = image.CrashClone(vfs.CrashOptions{Seed: 1}) // only what was synced survives
	_ = c.conn.Close()
	stop()

	addr, stop = servePowercut(t, image)
	defer stop()
	c = connect(t, addr)
	produceAt(t, c, "orders", 0, "k", "", "after")
	a := c.consume(2, wire.Consume{Stream: []byte("orders"), Group: []byte("tail"), Mode: wire.ModeStreaming, MaxRecords: 10})
	if a.err != nil || !slices.Equal(offsetsOf(a.deliveries), []uint64{3}) {
		t.Fatalf("after the cut the group read %v (error %+v); want offset 3 only: its creation at offset 3 survived",
			offsetsOf(a.deliveries), a.err)
	}
	for i, mode := range []uint8{wire.ModeWork, wire.ModeStreaming} {
		// Opened at "latest", a group the cut had lost would be created
		// anew at offset 4; one that survived is found at 0.
		name := fmt.Sprint("reader-", mode)
		info, e := c.openGroup(uint32(20+i), wire.OpenGroup{Stream: []byte("orders"), Group: []byte(name), Mode: mode, StartKind: wire.StartLatest})
		if e != nil || info.Committed != 0 {
			t.Fatalf("%s after the cut: %+v, %+v; want the group its Consume created at offset 0", name, info, e)
		}
	}
}
