package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"runtime/debug"
	"strings"

	"github.com/ironbus/ironbus/internal/histcheck"
	"github.com/ironbus/ironbus/replica"
)

// Faults selects the nemeses of a run.
type Faults uint16

const (
	// FaultMessages drops, duplicates, delays and so reorders messages.
	FaultMessages Faults = 1 << iota
	// FaultPartition cuts links for a while: a symmetric split, one-way
	// cuts, or the leader isolated.
	FaultPartition
	// FaultCrash cuts one node's power (its unsynced writes are lost, a
	// torn tail may survive) and restarts it later.
	FaultCrash
	// FaultCrashAll cuts every node's power at once.
	FaultCrashAll
	// FaultSyncFailure makes one node's fsync fail: it must latch, and its
	// operator restarts it later.
	FaultSyncFailure
	// FaultCorruption flips a bit in a committed entry on a minority node:
	// once it reads the entry it must stop voting, and it is rebuilt.
	FaultCorruption
	// FaultWipe brings a node back with an empty disk: a new incarnation,
	// added as a learner and promoted, its old identity removed.
	FaultWipe
	// FaultRetention compacts journals below their applied index, one
	// node's or every node's, so a lagging or new member needs a snapshot.
	FaultRetention
	// FaultTransfer has the leader hand over to a random member, as a
	// planned stop does; the new leader campaigns at once, without a
	// pre-vote.
	FaultTransfer

	FaultAll = FaultMessages | FaultPartition | FaultCrash | FaultCrashAll | FaultSyncFailure |
		FaultCorruption | FaultWipe | FaultRetention | FaultTransfer
)

var faultNames = []string{"messages", "partition", "crash", "crash-all", "sync-failure", "corruption", "wipe",
	"retention", "transfer"}

func (f Faults) String() string {
	var names []string
	for i, name := range faultNames {
		if f&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Virtual time: a step is 10 ms, Raft ticks every 10 steps (100 ms), and a
// follower campaigns after 10 ticks without a leader.
const (
	StepMillis    = 10
	stepsPerTick  = 10
	electionTicks = 10
	// clientTimeout is how long a client waits for an answer before it
	// records the produce as indeterminate.
	clientTimeout = 300
)

// Config describes one run.
type Config struct {
	Seed   uint64
	Nodes  int // 3 when zero
	Faults Faults
	// FaultSteps is how long nemeses run (2,000 steps, 20 s, when zero).
	FaultSteps int64
	// RecoverySteps bounds the steps from the heal (network whole, every
	// node restarted) to the first acknowledgement (1,500 when zero).
	RecoverySteps int64
	// ConvergeSteps bounds the steps from the heal until every node is a
	// voter of the current incarnation and has applied the whole log
	// (6,000 when zero).
	ConvergeSteps int64
	Clients       int // producers (3 when zero)
	// JointMembership: the operator replaces an incarnation with one
	// joint change (promote the new, remove the old) instead of two
	// simple ones.
	JointMembership bool

	// reuseIdentity breaks the incarnation rule on purpose: a wiped node
	// comes back under its old identity. Its tests show what the checks
	// then find.
	reuseIdentity bool
	// Log, when set, receives the nemesis events as they happen.
	Log func(string)
}

// Result describes a run that passed its checks.
type Result struct {
	Trace                              uint64 // hash of every send, delivery, outcome and event
	Steps                              int64
	Acked, Failed, Indeterminate, Read int
	Records                            int    // records in the final log
	Terms                              uint64 // the last leader's term
	RecoveredAfter                     int64  // steps from the heal to the first ack
	Events                             []string
	// Faults counts what happened, by kind: crashes, power cuts in the
	// middle of a write, partitions, latches, damage found, rebuilds.
	Faults map[string]int
}

// ErrViolation: a run broke an invariant. The error names the seed.
var ErrViolation = errors.New("sim: invariant violated")

// Run runs one seeded simulation and checks it. Two runs of one Config
// give the same Result, provided crypto/rand is seeded the same way
// (testing/cryptotest.SetGlobalRandom), which etcd-raft draws its election
// jitter from.
func Run(config Config) (result Result, err error) {
	withDefaults(&config)
	c := newCluster(config)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: seed %d: panic at step %d: %v\n%s\nlast events:\n%s", ErrViolation,
				config.Seed, c.now, p, debug.Stack(), c.lastEvents())
		}
	}()
	c.run()
	if c.failure != "" {
		return c.result(), fmt.Errorf("%w: seed %d, faults %s, %d nodes: %s\nlast events:\n%s", ErrViolation,
			config.Seed, config.Faults, config.Nodes, c.failure, c.lastEvents())
	}
	return c.result(), nil
}

func withDefaults(config *Config) {
	if config.Nodes == 0 {
		config.Nodes = 3
	}
	if config.FaultSteps == 0 {
		config.FaultSteps = 2000
	}
	if config.RecoverySteps == 0 {
		config.RecoverySteps = 1500
	}
	if config.ConvergeSteps == 0 {
		config.ConvergeSteps = 6000
	}
	if config.Clients == 0 {
		config.Clients = 3
	}
}

// cluster is one run: the nodes, the network, the clients and the checks,
// all driven from one goroutine and one random source.
type cluster struct {
	config  Config
	rng     *rand.Rand
	now     int64
	nodes   []*node
	net     network
	clients []*client
	history histcheck.Recorder
	values  int

	// committed is the group's committed log as first applied anywhere
	// (index i at [i-1]); every other application and every journal is
	// held against it. records is its data, decoded.
	committed  []replica.Entry
	records    []histcheck.Record
	nextOffset uint64
	leaders    map[uint64]replica.ReplicaID // term → the replica that led it
	retired    map[replica.ReplicaID]*disk  // the disks of wiped incarnations
	// leaderConfig is the last configuration a leader was seen with, and
	// previousConfig the one before it.
	leaderConfig, previousConfig replica.Membership

	change         *replica.Proposal // the membership change in flight
	changeDeadline int64

	healed         int64 // the step the nemeses stopped (0: still running)
	firstAckHealed int64
	clientsStopped bool

	acked, failed, indeterminate, reads int

	trace    hash.Hash64
	events   []string
	faults   map[string]int
	failure  string
	faultGap int // a nemesis acts on one step in faultGap on average
}

func newCluster(config Config) *cluster {
	c := &cluster{config: config, rng: rand.New(rand.NewPCG(config.Seed, 0x1e0b05)),
		net: newNetwork(config.Nodes), leaders: map[uint64]replica.ReplicaID{},
		retired: map[replica.ReplicaID]*disk{}, trace: fnv.New64a(),
		faultGap: 100, faults: map[string]int{}}
	for i := range config.Nodes {
		n := &node{number: uint32(i + 1), incarnation: 1}
		n.id = replica.NewReplicaID(n.number, n.incarnation)
		n.disk = newDisk(c.violation)
		c.nodes = append(c.nodes, n)
	}
	for i := range config.Clients {
		c.clients = append(c.clients, &client{number: i})
	}
	return c
}

func (c *cluster) result() Result {
	r := Result{Trace: c.trace.Sum64(), Steps: c.now, Acked: c.acked, Failed: c.failed,
		Indeterminate: c.indeterminate, Read: c.reads, Records: len(c.records), Events: c.events,
		Faults: c.faults}
	if c.firstAckHealed > 0 {
		r.RecoveredAfter = c.firstAckHealed - c.healed
	}
	for term := range c.leaders {
		r.Terms = max(r.Terms, term)
	}
	return r
}

// violation records the first broken invariant; the run stops at the end
// of the step.
func (c *cluster) violation(format string, args ...any) {
	if c.failure == "" {
		c.failure = fmt.Sprintf("step %d: ", c.now) + fmt.Sprintf(format, args...)
	}
}

func (c *cluster) event(format string, args ...any) {
	e := fmt.Sprintf("step %d: ", c.now) + fmt.Sprintf(format, args...)
	c.events = append(c.events, e)
	c.traceEvent(traceNemesis, hashBytes([]byte(e)), 0, 0)
	if c.config.Log != nil {
		c.config.Log(e)
	}
}

// fault records a fault of kind and describes it as an event.
func (c *cluster) fault(kind, format string, args ...any) {
	c.faults[kind]++
	c.event(format, args...)
}

func (c *cluster) lastEvents() string {
	from := max(0, len(c.events)-25)
	return strings.Join(c.events[from:], "\n")
}

const (
	traceSend uint64 = iota + 1
	traceDeliver
	traceApply
	traceOutcome
	traceNemesis
)

func (c *cluster) traceEvent(kind, a, b, d uint64) {
	var buf [40]byte
	binary.LittleEndian.PutUint64(buf[0:], uint64(c.now))
	binary.LittleEndian.PutUint64(buf[8:], kind)
	binary.LittleEndian.PutUint64(buf[16:], a)
	binary.LittleEndian.PutUint64(buf[24:], b)
	binary.LittleEndian.PutUint64(buf[32:], d)
	c.trace.Write(buf[:])
}

func hashBytes(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// run is the whole simulation: nemeses for FaultSteps, then the heal, the
// recovery and convergence bounds, a drain, and the final checks.
func (c *cluster) run() {
	c.bootstrap()
	c.chooseNetwork()
	for c.now < c.config.FaultSteps && c.failure == "" {
		c.step(true)
	}
	if c.failure != "" {
		return
	}
	c.heal()
	for c.failure == "" && c.firstAckHealed == 0 {
		if c.now-c.healed > c.config.RecoverySteps {
			c.violation("liveness: no acknowledgement within %d steps of the heal (%s)",
				c.config.RecoverySteps, c.describeNodes())
			return
		}
		c.step(false)
	}
	for c.failure == "" && !c.converged() {
		if c.now-c.healed > c.config.ConvergeSteps {
			c.violation("liveness: the group did not converge within %d steps of the heal (%s)",
				c.config.ConvergeSteps, c.describeNodes())
			return
		}
		c.step(false)
	}
	c.clientsStopped = true
	for c.failure == "" && (c.clientsBusy() || !c.converged()) {
		if c.now-c.healed > c.config.ConvergeSteps+2*clientTimeout {
			c.violation("liveness: the group did not settle after the clients stopped (%s)", c.describeNodes())
			return
		}
		c.step(false)
	}
	if c.failure == "" {
		c.finalChecks()
	}
}

// step advances virtual time by one step.
func (c *cluster) step(faulty bool) {
	c.now++
	if faulty && c.rng.IntN(c.faultGap) == 0 {
		c.nemesis()
	}
	c.recover()
	c.deliver()
	if c.now%stepsPerTick == 0 {
		for _, n := range c.nodes {
			if n.replica != nil {
				n.replica.Tick()
			}
		}
		c.processAll()
		c.checkNodes()
		c.operate()
	}
	c.clientsStep()
	c.readStep()
}

// deliver hands every message due by now to its replica, then lets the
// replicas that received any process them.
func (c *cluster) deliver() {
	touched := make([]bool, len(c.nodes))
	for {
		e, ok := c.net.due(c.now)
		if !ok {
			break
		}
		if c.net.isCut(e.from, e.to) {
			c.net.cutOff++
			continue
		}
		n := c.nodes[e.to.Node()-1]
		if n.replica == nil || n.id != e.to {
			continue // down, or an incarnation that is gone
		}
		c.traceEvent(traceDeliver, uint64(e.from), uint64(e.to), hashBytes(e.message))
		if err := n.replica.Step(e.message); err != nil {
			c.stopped(n, err) // a damaged entry found while stepping; anything else is a violation
		}
		touched[n.number-1] = true
	}
	for i, n := range c.nodes {
		if touched[i] {
			c.process(n)
		}
	}
}

func (c *cluster) processAll() {
	for _, n := range c.nodes {
		c.process(n)
	}
}

// process runs a node's Readys until it has none.
func (c *cluster) process(n *node) {
	for i := 0; n.replica != nil && n.replica.HasReady(); i++ {
		if i == 1000 {
			c.violation("node %d always has a Ready", n.number)
			return
		}
		var err error
		if c.call(n, func() { err = n.replica.Process() }) {
			return
		}
		c.pollClients(n)
		if n.disk.voted {
			c.crash(n, 1+c.rng.Int64N(10))
			c.fault("crash after a vote", "node %d crashed after it voted, down until %d", n.number, n.restartAt)
			return
		}
		if err != nil {
			c.stopped(n, err)
			return
		}
	}
}

func (c *cluster) describeNodes() string {
	var parts []string
	for _, n := range c.nodes {
		if n.replica == nil {
			parts = append(parts, fmt.Sprintf("node %d.%d down", n.number, n.incarnation))
			continue
		}
		s := n.replica.Status()
		parts = append(parts, fmt.Sprintf("node %d.%d %s term %d commit %d applied %d last %d voters %v learners %v%s",
			n.number, n.incarnation, s.Role, s.Term, s.Commit, s.Applied, s.LastIndex, nodeNames(s.Config.Voters),
			nodeNames(s.Config.Learners), stopNote(s)))
	}
	return strings.Join(parts, "; ")
}

func stopNote(s replica.Status) string {
	switch {
	case s.Latched != nil:
		return " LATCHED"
	case s.Damaged != nil:
		return " DAMAGED"
	}
	return ""
}

func nodeNames(ids []replica.ReplicaID) []string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = fmt.Sprintf("%d.%d", id.Node(), id.Incarnation())
	}
	return names
}
