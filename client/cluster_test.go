package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestParseSeeds(t *testing.T) {
	seeds, err := client.ParseSeeds(" a:1, b:2 ,,a:1,c:3")
	if err != nil || strings.Join(seeds, " ") != "a:1 b:2 c:3" {
		t.Fatalf("ParseSeeds = %q, %v", seeds, err)
	}
	if _, err := client.ParseSeeds(" , "); !errors.Is(err, client.ErrNoSeeds) {
		t.Fatalf("empty list: %v", err)
	}
	if _, err := client.ParseSeeds("a:1,nohost"); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("address without a port: %v", err)
	}
}

func TestDialSeedListSkipsDeadSeeds(t *testing.T) {
	b := startFake(t, nil)
	dead1, dead2 := deadAddr(t), deadAddr(t)
	c, err := client.Dial(testContext(t), dead1+","+dead2+","+b.addr(), client.Options{})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Produce(testContext(t), "s", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("Produce: %v", err)
	}

	_, err = client.Dial(testContext(t), dead1+","+dead2, client.Options{})
	if err == nil || !strings.Contains(err.Error(), dead1) || !strings.Contains(err.Error(), dead2) {
		t.Fatalf("Dial of dead seeds: %v, want an error naming both", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Fatalf("Dial of dead seeds: %v does not wrap the dial errors", err)
	}
}

func TestDialSeedListStopsAtRefusal(t *testing.T) {
	refusing := startFake(t, func(b *fakeBroker) { b.reject = wire.NewError(wire.CodeNotAuthorized, "no") })
	other := startFake(t, nil)
	_, err := client.Dial(testContext(t), refusing.addr()+","+other.addr(), client.Options{})
	if !errors.Is(err, &wire.Error{Code: wire.CodeNotAuthorized}) {
		t.Fatalf("Dial: %v, want not_authorized", err)
	}
	other.locked(func() {
		if len(other.hellos) != 0 {
			t.Fatalf("Dial went on to the next seed after a refusal every member would repeat")
		}
	})
}

func TestClusterCapabilityAnnounced(t *testing.T) {
	single := startFake(t, nil)
	c := dial(t, single, client.Options{})
	if _, err := c.ClusterInfo(testContext(t), client.ClusterInfoOptions{}); !errors.Is(err, client.ErrNotClustered) {
		t.Fatalf("ClusterInfo of a single broker: %v", err)
	}
	single.locked(func() {
		if single.hellos[0].Capabilities&wire.CapCluster == 0 {
			t.Fatalf("Hello does not announce the cluster capability")
		}
	})
}

func TestClusterInfo(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 2, "audit": 1} })
	cluster.move("orders", 1, 2)
	cluster.kill(1)
	c := dial(t, b, client.Options{})
	state, err := c.ClusterInfo(testContext(t), client.ClusterInfoOptions{Partitions: true, Stream: "orders"})
	if err != nil {
		t.Fatalf("ClusterInfo: %v", err)
	}
	if state.ClusterID != "fake" || state.Node != 1 || state.MetaLeader != 1 || len(state.Nodes) != 3 {
		t.Fatalf("ClusterInfo: %+v", state)
	}
	n := state.Nodes[1]
	if n.ID != 2 || n.Incarnation != 41 || n.ClientAddr != cluster.addr(1) || n.ClusterAddr != "peer-"+cluster.addr(1) ||
		n.State != client.NodeDown || n.Seen || n.State.String() != "down" {
		t.Fatalf("dead node: %+v", n)
	}
	if up := state.Nodes[2]; up.State != client.NodeUp || !up.Seen || up.LastSeen != 12*time.Millisecond {
		t.Fatalf("live node: %+v", up)
	}
	if len(state.Partitions) != 2 {
		t.Fatalf("partitions of orders: %+v", state.Partitions)
	}
	p := state.Partitions[1]
	if p.Stream != "orders" || p.Partition != 1 || p.Leader != 3 || p.Group != 101 || p.Term != 3 || p.Commit != 9 ||
		p.Watermark != 7 || len(p.Replicas) != 3 || state.LeaderAddr(p) != cluster.addr(2) {
		t.Fatalf("partition: %+v", p)
	}
	if r := p.Replicas[2]; r.Node != 3 || r.Incarnation != 42 || r.Role != client.RoleVoter || r.Match != 7 || r.Damaged || r.Latched {
		t.Fatalf("replica: %+v", r)
	}
	nodesOnly, err := c.ClusterInfo(testContext(t), client.ClusterInfoOptions{})
	if err != nil || len(nodesOnly.Partitions) != 0 || len(nodesOnly.Nodes) != 3 {
		t.Fatalf("ClusterInfo without partitions: %+v, %v", nodesOnly, err)
	}
}

func (c *fakeCluster) redirectCount() (redirects, noLeaders int) {
	c.b.locked(func() { redirects, noLeaders = c.redirects, c.noLeaders })
	return redirects, noLeaders
}

func TestProduceFollowsLeader(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		t.Run(fmt.Sprintf("anonymous=%v", anonymous), func(t *testing.T) {
			b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 2} })
			b.locked(func() { cluster.anonymous = anonymous })
			cluster.move("orders", 1, 2)
			c := dial(t, b, client.Options{})
			ctx := testContext(t)
			for i := range 3 {
				ack, err := c.ProduceTo(ctx, client.ToPartition("orders", 1), client.Record{Payload: []byte(strconv.Itoa(i))})
				if err != nil || ack.Partition != 1 || ack.Offset != uint64(i) {
					t.Fatalf("ProduceTo %d: %+v, %v", i, ack, err)
				}
			}
			if redirects, _ := cluster.redirectCount(); redirects != 1 {
				t.Fatalf("%d not_leader answers, want 1: the leader hint is cached", redirects)
			}
			// Partition 0 stays on the connection dialled.
			if _, err := c.ProduceTo(ctx, client.ToPartition("orders", 0), client.Record{Payload: []byte("p0")}); err != nil {
				t.Fatalf("ProduceTo partition 0: %v", err)
			}
			cluster.move("orders", 1, 1)
			if ack, err := c.ProduceTo(ctx, client.ToPartition("orders", 1), client.Record{Payload: []byte("3")}); err != nil || ack.Offset != 3 {
				t.Fatalf("ProduceTo after a move: %+v, %v", ack, err)
			}
			if redirects, _ := cluster.redirectCount(); redirects != 2 {
				t.Fatalf("%d not_leader answers, want 2", redirects)
			}
			// Back on the connection dialled: its identity's first record
			// for partition 1 was refused by a follower, so that sequence
			// is free again.
			cluster.move("orders", 1, 0)
			if ack, err := c.ProduceTo(ctx, client.ToPartition("orders", 1), client.Record{Payload: []byte("4")}); err != nil || ack.Offset != 4 {
				t.Fatalf("ProduceTo back on the first node: %+v, %v", ack, err)
			}
			if got := storedPayloads(t, b, "orders#1"); strings.Join(got, ",") != "0,1,2,3,4" {
				t.Fatalf("partition 1 holds %q", got)
			}
		})
	}
}

func TestOtherCallsFollowLeader(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 2} })
	cluster.move("orders", 0, 1)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	if _, err := c.ProduceTo(ctx, client.ToPartition("orders", 0), client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if _, err := c.OpenGroup(ctx, "orders", "g", client.GroupOptions{}); err != nil {
		t.Fatalf("OpenGroup: %v", err)
	}
	result, err := c.Fetch(ctx, "orders", "g", client.FetchOptions{})
	if err != nil || len(result.Messages) != 1 {
		t.Fatalf("Fetch: %+v, %v", result, err)
	}
	if statuses, err := c.Ack(ctx, "orders", "g", result.Messages...); err != nil || statuses[0] != client.AckOK {
		t.Fatalf("Ack: %v, %v", statuses, err)
	}
	batch := []client.Record{{Payload: []byte("b1")}, {Payload: []byte("b2")}}
	if acks, err := c.PublishBatch(ctx, client.ToPartition("orders", 0), batch); err != nil || len(acks) != 2 || acks[1].Offset != 2 {
		t.Fatalf("PublishBatch: %+v, %v", acks, err)
	}
	if redirects, _ := cluster.redirectCount(); redirects != 1 {
		t.Fatalf("%d not_leader answers, want 1: every call found the leader hint", redirects)
	}
	// A batch meeting a move is refused whole and sent whole again.
	cluster.move("orders", 0, 2)
	if acks, err := c.PublishBatch(ctx, client.ToPartition("orders", 0), batch); err != nil || len(acks) != 2 || acks[1].Offset != 4 {
		t.Fatalf("PublishBatch after a move: %+v, %v", acks, err)
	}
	if got := storedPayloads(t, b, "orders"); strings.Join(got, ",") != "x,b1,b2,b1,b2" {
		t.Fatalf("partition 0 holds %q", got)
	}
}

func TestRedirectsAreBounded(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, nil)
	c := dial(t, b, client.Options{})
	b.locked(func() { cluster.noLeader = true })
	start := time.Now()
	_, err := c.Produce(testContext(t), "s", client.Record{Payload: []byte("x")})
	if !errors.Is(err, client.ErrNoLeader) || !errors.Is(err, &wire.Error{Code: wire.CodeNoLeader}) {
		t.Fatalf("Produce during an endless election: %v, want ErrNoLeader wrapping no_leader", err)
	}
	if _, noLeaders := cluster.redirectCount(); noLeaders != 6 {
		t.Fatalf("%d no_leader answers, want 6 (5 redirects)", noLeaders)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("giving up took %v", elapsed)
	}

	// A loop: each node names the next one as the leader.
	loop := startLoopCluster(t)
	lc := dial(t, loop, client.Options{})
	_, err = lc.Produce(testContext(t), "s", client.Record{Payload: []byte("x")})
	if !errors.Is(err, client.ErrNoLeader) || !errors.Is(err, &wire.Error{Code: wire.CodeNotLeader}) {
		t.Fatalf("Produce in a redirect loop: %v", err)
	}
	if redirects, _ := loop.cluster.redirectCount(); redirects != 6 {
		t.Fatalf("%d not_leader answers in a loop, want 6", redirects)
	}
}

// startLoopCluster starts a cluster whose nodes each name the next one
// as the leader of every partition.
func startLoopCluster(t *testing.T) *fakeBroker {
	b, cluster := startFakeCluster(t, 3, nil)
	b.locked(func() { cluster.loop = true })
	return b
}

func TestProduceWaitsOutAnElection(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, nil)
	c := dial(t, b, client.Options{})
	cluster.setNoLeader(true)
	time.AfterFunc(150*time.Millisecond, func() { cluster.setNoLeader(false) })
	if _, err := c.Produce(testContext(t), "s", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("Produce across an election: %v", err)
	}
	if _, noLeaders := cluster.redirectCount(); noLeaders == 0 {
		t.Fatalf("no no_leader answer: the election did not happen")
	}
}

// storedSequences returns the sequence of every stamped record of a fake
// log, in offset order.
func storedSequences(t *testing.T, b *fakeBroker, log string) (sequences []uint64, payloads []string) {
	t.Helper()
	for i, body := range b.bodies(log) {
		view, err := record.Parse(body)
		if err != nil || !view.HasProducer {
			t.Fatalf("stored record %d: %v (stamped %v)", i, err, view.HasProducer)
		}
		sequences, payloads = append(sequences, view.Sequence), append(payloads, string(view.Payload))
	}
	return sequences, payloads
}

func TestProducerFollowsLeadersAcrossMovesAndDeaths(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		t.Run(fmt.Sprintf("anonymous=%v", anonymous), func(t *testing.T) { testProducerFollowsLeaders(t, anonymous) })
	}
}

// testProducerFollowsLeaders runs a producer over two partitions led by
// different nodes through a planned move, the death of a leader with
// records it stored unacknowledged, an election and a move back; with
// anonymous, followers name no leader and the producer asks ClusterInfo.
func testProducerFollowsLeaders(t *testing.T, anonymous bool) {
	before := runtime.NumGoroutine()
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) {
		b.partitions = map[string]uint32{"orders": 2}
		b.reverseAcks = true // answers out of order, within each read batch
	})
	b.locked(func() { cluster.anonymous, cluster.lagRefusals = anonymous, true })
	cluster.move("orders", 1, 1) // partition 0 on node 1, partition 1 on node 2
	seeds := cluster.addr(0) + "," + cluster.addr(1) + "," + cluster.addr(2)
	c, err := client.Dial(testContext(t), seeds, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer("orders", client.ProducerOptions{Window: 64, ReconnectTimeout: 5 * time.Second})
	results := collect(p)
	ctx := testContext(t)
	const n = 4000
	keys := [2][]byte{}
	for i := 0; keys[0] == nil || keys[1] == nil; i++ {
		k := []byte(strconv.Itoa(i))
		keys[wire.PartitionForKey(k, 2)] = k
	}
	var want [2][]string
	for i := range n {
		switch i {
		case 1000: // a planned move of partition 0 to node 3
			cluster.move("orders", 0, 2)
		case 2000:
			// Node 2, leader of partition 1, dies after storing records it
			// never acknowledged; an election follows.
			b.hold()
			go func() {
				time.Sleep(20 * time.Millisecond)
				cluster.setNoLeader(true)
				cluster.kill(1)
				b.release()
				time.Sleep(100 * time.Millisecond)
				cluster.move("orders", 1, 0)
				cluster.setNoLeader(false)
			}()
		case 3000: // partition 0 moves back to node 1
			cluster.move("orders", 0, 0)
		}
		partition := i % 2
		payload := strconv.Itoa(i)
		want[partition] = append(want[partition], payload)
		if err := p.Send(ctx, client.Record{Key: keys[partition], Payload: []byte(payload)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := <-results
	if len(got) != n {
		t.Fatalf("%d results for %d records", len(got), n)
	}
	for i, r := range got {
		if r.Err != nil || r.Sequence != uint64(i) || r.Ack.Partition != uint32(i%2) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	for partition, log := range []string{"orders", "orders#1"} {
		sequences, payloads := storedSequences(t, b, log)
		if len(sequences) != n/2 {
			t.Fatalf("partition %d stores %d records, want %d", partition, len(sequences), n/2)
		}
		for i, s := range sequences {
			if s != uint64(i) || payloads[i] != want[partition][i] {
				t.Fatalf("partition %d offset %d: sequence %d payload %s, want %d %s", partition, i, s, payloads[i], i, want[partition][i])
			}
		}
	}
	redirects, noLeaders := cluster.redirectCount()
	if redirects == 0 || noLeaders == 0 {
		t.Fatalf("%d not_leader and %d no_leader answers: the moves did not happen", redirects, noLeaders)
	}
	var gaps, dups int
	b.locked(func() { gaps, dups = b.producers.gaps, b.producers.dups })
	if gaps != 0 {
		// Only a record sent to a new leader ahead of an earlier one of
		// its partition makes a gap here: the ordering rule was broken.
		t.Fatalf("%d sequence gaps", gaps)
	}
	if dups == 0 {
		t.Fatalf("no duplicate answered: no record stored by the dead leader was resent")
	}
	t.Logf("%d not_leader, %d no_leader answers, %d duplicates", redirects, noLeaders, dups)
	c.Close()
	b.stop()
	eventually(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestRoutedClientClosesItsPool(t *testing.T) {
	before := runtime.NumGoroutine()
	b, cluster := startFakeCluster(t, 3, nil)
	cluster.move("s", 0, 2)
	c, err := client.Dial(context.Background(), b.addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(testContext(t), "s", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	c.Close()
	b.stop()
	eventually(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestProducerSurvivesItsHomeNode(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) { b.partitions = map[string]uint32{"s": 1} })
	seeds := cluster.addr(0) + "," + cluster.addr(1) + "," + cluster.addr(2)
	c, err := client.Dial(testContext(t), seeds, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducerTo(client.ToPartition("s", 0), client.ProducerOptions{Window: 32, ReconnectTimeout: 5 * time.Second})
	results := collect(p)
	ctx := testContext(t)
	const n = 2000
	for i := range n {
		if i == 1000 {
			// Node 1, the connection dialled and the leader, dies with
			// records stored and unacknowledged; node 3 takes over.
			b.hold()
			go func() {
				time.Sleep(20 * time.Millisecond)
				cluster.setNoLeader(true)
				cluster.kill(0)
				b.release()
				time.Sleep(50 * time.Millisecond)
				cluster.move("s", 0, 2)
				cluster.setNoLeader(false)
			}()
		}
		if err := p.Send(ctx, client.Record{Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, r := range <-results {
		if r.Err != nil || r.Sequence != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	sequences, payloads := storedSequences(t, b, "s")
	if len(sequences) != n {
		t.Fatalf("%d records stored, want %d", len(sequences), n)
	}
	for i := range sequences {
		if sequences[i] != uint64(i) || payloads[i] != strconv.Itoa(i) {
			t.Fatalf("offset %d: sequence %d payload %s", i, sequences[i], payloads[i])
		}
	}
	if !errors.Is(c.Err(), client.ErrConnectionLost) {
		t.Fatalf("the Client's own connection: %v, want it lost with its node", c.Err())
	}
}

func TestProduceTriesTheSeedsWhenNoLeaderIsNamed(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) {
		b.welcome.Capabilities &^= wire.CapCluster // no ClusterInfo to ask
	})
	b.locked(func() { cluster.anonymous = true })
	cluster.move("s", 0, 2)
	seeds := cluster.addr(0) + "," + cluster.addr(1) + "," + cluster.addr(2)
	c, err := client.Dial(testContext(t), seeds, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Produce(testContext(t), "s", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if redirects, _ := cluster.redirectCount(); redirects != 2 {
		t.Fatalf("%d not_leader answers, want 2 (the seeds in turn)", redirects)
	}
}

func TestAdminCallsFollowTheMetadataLeader(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 3} })
	b.locked(func() { cluster.adminNode = 2 })
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	for range 2 {
		state, err := c.StreamInfo(ctx, "orders")
		if err != nil || len(state.Partitions) != 3 {
			t.Fatalf("StreamInfo: %+v, %v", state, err)
		}
	}
	if redirects, _ := cluster.redirectCount(); redirects != 1 {
		t.Fatalf("%d not_leader answers, want 1: the metadata leader is remembered", redirects)
	}
}
