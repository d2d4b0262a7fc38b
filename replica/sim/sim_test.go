package sim

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"
)

const (
	// seedEnv replays one seed: IRONBUS_SIM_SEED=<n> go test ./replica/sim
	seedEnv = "IRONBUS_SIM_SEED"
	// seedsEnv sets how many seeds TestSeeds runs (make soak), and
	// firstSeedEnv the first of them (1 by default).
	seedsEnv     = "IRONBUS_SIM_SEEDS"
	firstSeedEnv = "IRONBUS_SIM_FIRST_SEED"
	defaultSeeds = 200
)

// profiles is the mix of nemeses the seeds cycle through.
var profiles = []Faults{
	FaultMessages,
	FaultMessages | FaultPartition,
	FaultMessages | FaultCrash,
	FaultPartition | FaultCrash | FaultCrashAll,
	FaultMessages | FaultSyncFailure | FaultCrash,
	FaultMessages | FaultCorruption | FaultPartition | FaultCrash,
	FaultMessages | FaultWipe | FaultCrash,
	FaultMessages | FaultTransfer | FaultPartition | FaultCrash,
	FaultAll,
}

// seedConfig is the run a seed stands for: its nemeses, five nodes for
// one seed in five, and joint membership changes for one in three.
func seedConfig(seed uint64) Config {
	config := Config{Seed: seed, Faults: profiles[seed%uint64(len(profiles))], Nodes: 3,
		JointMembership: seed%3 == 0}
	if seed%5 == 4 {
		config.Nodes = 5
	}
	if raceDetector {
		config.FaultSteps = 1000
	}
	return config
}

func runSeed(t *testing.T, config Config) (Result, error) {
	cryptotest.SetGlobalRandom(t, config.Seed)
	return Run(config)
}

func envNumber(t *testing.T, name string) (uint64, bool) {
	value, ok := os.LookupEnv(name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(value, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, value, err)
	}
	return n, true
}

func TestSeeds(t *testing.T) {
	if seed, ok := envNumber(t, seedEnv); ok {
		config := seedConfig(seed)
		config.Log = func(line string) { t.Log(line) }
		result, err := runSeed(t, config)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d passed: %+v", seed, summary(result))
		return
	}
	seeds, ok := envNumber(t, seedsEnv)
	if !ok {
		seeds = defaultSeeds
	}
	first, ok := envNumber(t, firstSeedEnv)
	if !ok {
		first = 1
	}
	start := time.Now()
	var failures []uint64
	var acked, records, steps int64
	var slowest time.Duration
	var slowestSeed uint64
	faults := map[string]int{}
	for seed := first; seed < first+seeds; seed++ {
		began := time.Now()
		config := seedConfig(seed)
		result, err := runSeed(t, config)
		if took := time.Since(began); took > slowest {
			slowest, slowestSeed = took, seed
		}
		if err != nil {
			failures = append(failures, seed)
			t.Errorf("%v\nreplay: %s=%d go test ./replica/sim -run TestSeeds -v", err, seedEnv, seed)
			if len(failures) == 5 {
				t.Fatalf("stopping after 5 failing seeds: %v", failures)
			}
			continue
		}
		acked += int64(result.Acked)
		records += int64(result.Records)
		steps += result.Steps
		for kind, count := range result.Faults {
			faults[kind] += count
		}
	}
	wall := time.Since(start)
	t.Logf("%d seeds in %v (%v per seed, slowest %v, seed %d): %d acknowledged records, %d in final logs, %d virtual seconds; failing seeds %v",
		seeds, wall.Round(time.Millisecond), (wall / time.Duration(seeds)).Round(time.Microsecond),
		slowest.Round(time.Millisecond), slowestSeed, acked, records, steps*StepMillis/1000, failures)
	t.Logf("faults: %v", faults)
}

type resultSummary struct {
	Acked, Failed, Indeterminate, Read, Records int
	Terms                                       uint64
	RecoveredAfter                              int64
}

func summary(r Result) resultSummary {
	return resultSummary{Acked: r.Acked, Failed: r.Failed, Indeterminate: r.Indeterminate, Read: r.Read,
		Records: r.Records, Terms: r.Terms, RecoveredAfter: r.RecoveredAfter}
}

// TestSeedReplaysExactly runs seeds twice: the traces (every send,
// delivery, application, outcome and nemesis event) must be identical.
func TestSeedReplaysExactly(t *testing.T) {
	for _, seed := range []uint64{7, 8, 13} {
		config := seedConfig(seed)
		first, err := runSeed(t, config)
		if err != nil {
			t.Fatal(err)
		}
		second, err := runSeed(t, config)
		if err != nil {
			t.Fatal(err)
		}
		if first.Trace != second.Trace || !slices.Equal(first.Events, second.Events) {
			t.Fatalf("seed %d: traces %016x and %016x differ", seed, first.Trace, second.Trace)
		}
		t.Logf("seed %d (%s): trace %016x twice, %+v", seed, config.Faults, first.Trace, summary(first))
	}
}

// TestLivenessAfterHeal: after power cuts of every node and partitions,
// once the network is whole and every node restarted, the group elects a
// leader and acknowledges within 10 s of virtual time (a restarted node
// waits an election timeout of 1-2 s before it campaigns), and converges.
func TestLivenessAfterHeal(t *testing.T) {
	const bound = 1000 // steps: 10 s
	var worst int64
	for seed := uint64(1); seed <= 20; seed++ {
		config := Config{Seed: 10_000 + seed, Faults: FaultCrashAll | FaultPartition | FaultCrash,
			RecoverySteps: bound, Nodes: 3 + 2*int(seed%2)}
		result, err := runSeed(t, config)
		if err != nil {
			t.Fatalf("%v\nreplay: %s=%d", err, seedEnv, config.Seed)
		}
		worst = max(worst, result.RecoveredAfter)
	}
	t.Logf("slowest first ack after the heal: %d steps (%d ms)", worst, worst*StepMillis)
}

// TestJointMembershipChange: the operator replaces each wiped incarnation
// with one joint change (promote the new identity, remove the old), which
// Raft leaves by itself with an entry of its own.
func TestJointMembershipChange(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		config := Config{Seed: 20_000 + seed, Faults: FaultMessages | FaultWipe | FaultCrash,
			Nodes: 3 + 2*int(seed%2), JointMembership: true}
		if _, err := runSeed(t, config); err != nil {
			t.Fatalf("%v\nreplay: this test, seed %d", err, config.Seed)
		}
	}
}

// TestRetention compacts journals under crashes, wipes and partitions, so
// restarted members reopen on a compacted journal and new ones join from a
// snapshot.
func TestRetention(t *testing.T) {
	var failures []uint64
	for seed := uint64(1); seed <= 100; seed++ {
		config := Config{Seed: seed, Faults: FaultMessages | FaultRetention | FaultWipe | FaultCrash | FaultPartition,
			Nodes: 3 + 2*int(seed%2), JointMembership: seed%3 == 0}
		if seed%4 == 0 {
			config.Faults = FaultAll
		}
		if _, err := runSeed(t, config); err != nil {
			failures = append(failures, seed)
			t.Errorf("seed %d: %s", seed, firstLine(err.Error()))
		}
	}
	if len(failures) > 0 {
		t.Logf("failing seeds %v", failures)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// TestReusedIdentityIsCaught breaks the rule that an empty disk comes back
// as a new incarnation: a wiped node returns as its old voter, without its
// log or its vote. Raft may then elect a leader that lacks committed
// entries, and the checks must see it.
func TestReusedIdentityIsCaught(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 40 && caught == 0; seed++ {
		config := Config{Seed: 30_000 + seed, Faults: FaultMessages | FaultWipe | FaultCrash | FaultPartition,
			reuseIdentity: true}
		if _, err := runSeed(t, config); err != nil {
			caught++
			t.Logf("seed %d: %s", config.Seed, firstLine(err.Error()))
		}
	}
	if caught == 0 {
		t.Fatal("40 seeds of wiped voters returning under their old identity, and no check noticed")
	}
}
