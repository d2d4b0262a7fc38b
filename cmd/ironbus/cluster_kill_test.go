//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/internal/histcheck"
	"github.com/ironbus/ironbus/internal/testbroker"
)

// The kill -9 harness of a replicated partition: three real broker
// processes on loopback hold one stream with three replicas; a writer
// produces numbered records, one awaited Produce at a time, through the
// seed list, while the partition's leader is killed with SIGKILL and
// restarted on its data directory, again and again. The writer is not
// told: it redials and carries on. A record whose Produce failed is
// indeterminate (it may have been committed before the leader died) and
// is never resent, so no value can be stored twice by the test itself.
//
// The oracle is histcheck.CheckLog on the writer's history and the
// partition read back at the end: every acknowledged record is there,
// once, at its acknowledged offset; offsets are dense; nothing appears
// that was not produced; real time orders the acks.
//
// IRONBUS_CLUSTER_CYCLES sets the number of kills (3 by default; make
// soak: 50); IRONBUS_SEED replays the kill timing.

const clusterStream = "ha"

type clusterNodes struct {
	t            *testing.T
	dirs         []string
	clientAddrs  []string
	clusterAddrs []string
	procs        []*testbroker.Process
}

func startClusterNodes(t *testing.T, n int) *clusterNodes {
	t.Helper()
	c := &clusterNodes{t: t}
	for range n {
		c.dirs = append(c.dirs, t.TempDir())
		c.clientAddrs = append(c.clientAddrs, freeLoopbackAddr(t))
		c.clusterAddrs = append(c.clusterAddrs, freeLoopbackAddr(t))
	}
	c.procs = make([]*testbroker.Process, n)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, p := range c.procs {
			for _, line := range strings.Split(p.Logs(), "\n") {
				if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
					t.Logf("node %d: %s", i+1, line)
				}
			}
		}
	})
	return c
}

func (c *clusterNodes) args(i int) []string {
	args := []string{"serve", "--data-dir", c.dirs[i], "--addr", c.clientAddrs[i], "--node-id", strconv.Itoa(i + 1),
		"--cluster-addr", c.clusterAddrs[i], "--segment-bytes", "1MiB"}
	for j, addr := range c.clusterAddrs {
		args = append(args, "--peer", fmt.Sprintf("%d=%s", j+1, addr))
	}
	return args
}

func (c *clusterNodes) start(i int) { c.procs[i] = ironbus.Serve(c.t, c.args(i)...) }

func (c *clusterNodes) seeds() string { return strings.Join(c.clientAddrs, ",") }

// dial connects through the seed list, retrying while the cluster starts.
func (c *clusterNodes) dial(ctx context.Context) (*client.Client, error) {
	for {
		conn, err := client.Dial(ctx, c.seeds(), client.Options{Idempotence: client.IdempotenceOff})
		if err == nil || ctx.Err() != nil {
			return conn, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leader returns the node leading the stream's partition 0 as a live
// member sees it (0: none known).
func (c *clusterNodes) leader(ctx context.Context) uint32 {
	conn, err := c.dial(ctx)
	if err != nil {
		return 0
	}
	defer conn.Close()
	state, err := conn.ClusterInfo(ctx, client.ClusterInfoOptions{Partitions: true, Stream: clusterStream})
	if err != nil || len(state.Partitions) == 0 {
		return 0
	}
	return state.Partitions[0].Leader
}

// leaderWithin waits up to limit for a leader to be known.
func (c *clusterNodes) leaderWithin(ctx context.Context, limit time.Duration) uint32 {
	deadline := time.Now().Add(limit)
	for {
		if leader := c.leader(ctx); leader != 0 || time.Now().After(deadline) {
			return leader
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterKill9LosesNoAcknowledgedRecord(t *testing.T) {
	seed, cycles := crashtest.Seed(t), crashtest.Count(t, "IRONBUS_CLUSTER_CYCLES", 3)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d kill cycles", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0xc1a5))
	nodes := startClusterNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createReplicatedStream(ctx, t, nodes)
	if nodes.leaderWithin(ctx, 20*time.Second) == 0 {
		t.Fatal("the replicated partition has no leader 20 s after its creation")
	}

	history := &histcheck.Recorder{}
	began := time.Now()
	now := func() int64 { return int64(time.Since(began)) }
	writing, stopWriting := context.WithCancel(ctx)
	var acked atomic.Int64
	var lastAck atomic.Int64 // now() of the latest ack
	var wg sync.WaitGroup
	wg.Go(func() { writeNumbered(writing, nodes, history, now, &acked, &lastAck) })
	var failovers []time.Duration
	var failoversMu sync.Mutex

	for cycle := range cycles {
		// Long enough between kills for the writes to resume: a failover
		// takes an election timeout (about a second) and a redial.
		time.Sleep(time.Duration(1500+random.IntN(1500)) * time.Millisecond)
		leader := nodes.leaderWithin(ctx, 10*time.Second)
		if leader == 0 {
			t.Logf("cycle %d: no leader known; no kill", cycle)
			continue
		}
		before := acked.Load()
		victim := nodes.procs[leader-1]
		if err := victim.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.Exited()
		killedAt := now()
		t.Logf("cycle %d: killed node %d (the leader) after %d acks", cycle, leader, before)
		wg.Go(func() {
			// The failover time: from the kill to the first ack after it.
			for writing.Err() == nil {
				if at := lastAck.Load(); at > killedAt {
					failoversMu.Lock()
					failovers = append(failovers, time.Duration(at-killedAt))
					failoversMu.Unlock()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
		time.Sleep(time.Duration(200+random.IntN(800)) * time.Millisecond)
		nodes.start(int(leader - 1))
		t.Logf("cycle %d: node %d restarted; %d acks since the kill", cycle, leader, acked.Load()-before)
	}
	// Writes must go on after the last restart.
	deadline := time.Now().Add(30 * time.Second)
	for settled := acked.Load(); acked.Load() < settled+20; {
		if time.Now().After(deadline) {
			t.Fatalf("no acknowledged record within 30 s of the last restart (%d acked in all)", acked.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopWriting()
	wg.Wait()
	t.Logf("failover, kill -9 of the leader to the next ack: %v", failovers)

	final := readPartition(ctx, t, nodes)
	h := histcheck.History{Operations: history.Operations(),
		Partitions: map[uint32]histcheck.Partition{0: {Final: final}}}
	if err := histcheck.CheckLog(h); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("%d records acknowledged, %d in the log", acked.Load(), len(final))
}

func createReplicatedStream(ctx context.Context, t *testing.T, nodes *clusterNodes) {
	t.Helper()
	for {
		conn, err := nodes.dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.CreateStream(ctx, clusterStream, client.StreamSettings{Partitions: 1, Replicas: 3})
		conn.Close()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("creating the replicated stream: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeNumbered produces "v0", "v1", … one at a time, redialling through
// the seeds after a failure; a failed Produce is recorded indeterminate
// and never resent.
func writeNumbered(ctx context.Context, nodes *clusterNodes, history *histcheck.Recorder, now func() int64, acked, lastAck *atomic.Int64) {
	var conn *client.Client
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for n := 0; ctx.Err() == nil; n++ {
		if conn == nil || conn.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			var err error
			if conn, err = nodes.dial(ctx); err != nil {
				return
			}
		}
		value := "v" + strconv.Itoa(n)
		id := history.Produce(0, 0, value, now())
		call, cancel := context.WithTimeout(ctx, 5*time.Second)
		ack, err := conn.ProduceTo(call, client.ToPartition(clusterStream, 0), client.Record{Payload: []byte(value)})
		cancel()
		if err != nil {
			history.Indeterminate(id, now())
			time.Sleep(20 * time.Millisecond)
			continue
		}
		at := now()
		history.Acked(id, ack.Offset, at)
		acked.Add(1)
		lastAck.Store(at)
	}
}

// readPartition reads the whole partition back through a new group, on
// one connection (closing one hands its leases back for redelivery).
func readPartition(ctx context.Context, t *testing.T, nodes *clusterNodes) []histcheck.Record {
	t.Helper()
	for attempt := 0; ; attempt++ {
		records, err := readOnce(ctx, nodes, "final-"+strconv.Itoa(attempt))
		if err == nil {
			return records
		}
		if ctx.Err() != nil {
			t.Fatalf("reading the partition back: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // a leader still being elected
	}
}

func readOnce(ctx context.Context, nodes *clusterNodes, group string) ([]histcheck.Record, error) {
	conn, err := nodes.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []histcheck.Record
	for empty := 0; empty < 3; {
		result, err := conn.Fetch(ctx, clusterStream, group, client.FetchOptions{Partition: 0, MaxRecords: 1000,
			Lease: 10 * time.Minute, Wait: 200 * time.Millisecond})
		if err != nil {
			return nil, err
		}
		if len(result.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range result.Messages {
			out = append(out, histcheck.Record{Offset: m.Offset, Value: string(m.Payload)})
		}
		// A group holds a bounded number of unacknowledged leases.
		if _, err := conn.Ack(ctx, clusterStream, group, result.Messages...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestClusterPlannedStopHandsOver: a SIGTERM of the partition's leader
// hands the leadership over before the process exits, so the writer
// loses no acknowledged record and waits about a transfer, not an
// election timeout. The longest pause between two acks is logged.
func TestClusterPlannedStopHandsOver(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createReplicatedStream(ctx, t, nodes)
	leader := nodes.leaderWithin(ctx, 20*time.Second)
	if leader == 0 {
		t.Fatal("no leader 20 s after the stream's creation")
	}
	history := &histcheck.Recorder{}
	began := time.Now()
	now := func() int64 { return int64(time.Since(began)) }
	writing, stopWriting := context.WithCancel(ctx)
	var acked, lastAck atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { writeNumbered(writing, nodes, history, now, &acked, &lastAck) })
	time.Sleep(500 * time.Millisecond)
	stoppedAt := now()
	if code := nodes.procs[leader-1].Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("node %d exited with %d after SIGTERM", leader, code)
	}
	for lastAck.Load() < stoppedAt && writing.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	pause := time.Duration(lastAck.Load() - stoppedAt)
	nodes.start(int(leader - 1))
	time.Sleep(300 * time.Millisecond)
	stopWriting()
	wg.Wait()
	final := readPartition(ctx, t, nodes)
	h := histcheck.History{Operations: history.Operations(), Partitions: map[uint32]histcheck.Partition{0: {Final: final}}}
	if err := histcheck.CheckLog(h); err != nil {
		t.Fatal(err)
	}
	t.Logf("planned stop of the leader (node %d): next ack %v after the SIGTERM; longest pause between acks after it %v; %d acks",
		leader, pause, longestPause(history.Operations(), stoppedAt), acked.Load())
}

// longestPause is the longest time between two consecutive acks returned
// after from.
func longestPause(operations []histcheck.Operation, from int64) time.Duration {
	var returns []int64
	for _, op := range operations {
		if op.Kind == histcheck.KindProduce && op.Outcome == histcheck.OutcomeOK && op.Return >= from {
			returns = append(returns, op.Return)
		}
	}
	slices.Sort(returns)
	var longest int64
	for i := 1; i < len(returns); i++ {
		longest = max(longest, returns[i]-returns[i-1])
	}
	return time.Duration(longest)
}

// TestClusterIdempotentProducerKill9: a pipelined idempotent producer
// keeps sending while the partition's leader is killed with SIGKILL and
// restarted. It redials through the seeds, follows the new leader and
// resends what was not acknowledged with the sequences it had: the
// partition's new leader, which knows the producer by the id every node
// derives from its name, stores each record once. Every Send is in the
// history; a duplicate would show as a value stored twice.
func TestClusterIdempotentProducerKill9(t *testing.T) {
	seed, cycles := crashtest.Seed(t), crashtest.Count(t, "IRONBUS_CLUSTER_CYCLES", 3)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d kill cycles", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0x1de3))
	nodes := startClusterNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createReplicatedStream(ctx, t, nodes)
	if nodes.leaderWithin(ctx, 20*time.Second) == 0 {
		t.Fatal("the replicated partition has no leader 20 s after its creation")
	}
	conn, err := client.Dial(ctx, nodes.seeds(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	producer := conn.NewProducerTo(client.ToPartition(clusterStream, 0), client.ProducerOptions{Window: 64,
		Name: "cluster-writer", ReconnectTimeout: time.Minute})

	history := &histcheck.Recorder{}
	began := time.Now()
	now := func() int64 { return int64(time.Since(began)) }
	// pending are the history ids of the records sent and not yet
	// answered, in send order: Results come in that order.
	var pending []int
	var pendingMu sync.Mutex
	var acked atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for result := range producer.Results() {
			pendingMu.Lock()
			id := pending[0]
			pending = pending[1:]
			pendingMu.Unlock()
			if result.Err != nil {
				history.Indeterminate(id, now())
				continue
			}
			history.Acked(id, result.Ack.Offset, now())
			acked.Add(1)
		}
	})
	sending, stopSending := context.WithCancel(ctx)
	var sent sync.WaitGroup
	sent.Go(func() {
		for n := 0; sending.Err() == nil; n++ {
			id := history.Produce(0, 0, "p"+strconv.Itoa(n), now())
			pendingMu.Lock()
			pending = append(pending, id)
			pendingMu.Unlock()
			if err := producer.Send(sending, client.Record{Payload: []byte("p" + strconv.Itoa(n))}); err != nil {
				// Not sent: no Result comes for it, and none after it.
				pendingMu.Lock()
				pending = pending[:len(pending)-1]
				pendingMu.Unlock()
				history.Failed(id, now())
				return
			}
			if n%32 == 31 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	for cycle := range cycles {
		time.Sleep(time.Duration(1500+random.IntN(1500)) * time.Millisecond)
		leader := nodes.leaderWithin(ctx, 10*time.Second)
		if leader == 0 {
			t.Logf("cycle %d: no leader known; no kill", cycle)
			continue
		}
		victim := nodes.procs[leader-1]
		if err := victim.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.Exited()
		t.Logf("cycle %d: killed node %d (the leader) after %d acks", cycle, leader, acked.Load())
		time.Sleep(time.Duration(200+random.IntN(800)) * time.Millisecond)
		nodes.start(int(leader - 1))
	}
	time.Sleep(2 * time.Second)
	stopSending()
	sent.Wait()
	if err := producer.Close(); err != nil {
		t.Logf("closing the producer: %v", err)
	}
	wg.Wait()
	final := readPartition(ctx, t, nodes)
	h := histcheck.History{Operations: history.Operations(), Partitions: map[uint32]histcheck.Partition{0: {Final: final}}}
	if err := histcheck.CheckLog(h); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if acked.Load() == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d records acknowledged, %d in the log", acked.Load(), len(final))
}
