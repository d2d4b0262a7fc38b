package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// TestClusterTransferLeadership: on three in-process nodes, an SDK call
// through any member moves a partition's leadership to the node asked
// for (following not_leader to the leader), every member then names the
// new leader, and appends go on; the node that already leads answers at
// once; and requests no leader can serve are refused with their reasons.
func TestClusterTransferLeadership(t *testing.T) {
	configs := clusterConfigs(t, 3)
	var servers []*Server
	var addrs []string
	for _, cfg := range configs {
		srv := start(t, cfg)
		servers = append(servers, srv)
		addrs = append(addrs, srv.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialCreating(ctx, t, strings.Join(addrs, ","), "orders", client.StreamSettings{Partitions: 2, Replicas: 3})
	defer c.Close()
	produce(ctx, t, c, "orders", 0, "before")
	leader := leaderOf(ctx, t, servers[0], "orders", 0)
	target := leader%3 + 1

	// Asked through the node that neither leads nor is to lead, so the
	// request follows not_leader to the leader.
	bystander := 6 - leader - target
	via, err := client.Dial(ctx, servers[bystander-1].Addr(), client.Options{Idempotence: client.IdempotenceOff})
	if err != nil {
		t.Fatal(err)
	}
	defer via.Close()
	result, err := via.TransferLeadership(ctx, "orders", 0, target)
	if err != nil {
		t.Fatalf("transfer of orders/0 from node %d to node %d: %v", leader, target, err)
	}
	if result.From != leader || result.Leader != target || result.Elapsed <= 0 || result.Stream != "orders" {
		t.Fatalf("transfer from node %d to node %d answered %+v", leader, target, result)
	}
	t.Logf("orders/0 moved from node %d to node %d in %v (term %d)", result.From, result.Leader, result.Elapsed, result.Term)
	for _, srv := range servers {
		// A follower learns of the new leader from its first message.
		deadline := time.Now().Add(5 * time.Second)
		for got := leaderOf(ctx, t, srv, "orders", 0); got != target; got = leaderOf(ctx, t, srv, "orders", 0) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d names node %d as the leader, want %d", srv.mu.cfg.NodeID, got, target)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	produce(ctx, t, c, "orders", 0, "after")

	again, err := c.TransferLeadership(ctx, "orders", 0, target)
	if err != nil || again.From != target || again.Leader != target || again.Elapsed != 0 {
		t.Fatalf("a transfer to the node that leads: %+v, %v", again, err)
	}

	// A stream without replicas lives on the one member that created it.
	single, err := client.Dial(ctx, servers[0].Addr(), client.Options{Idempotence: client.IdempotenceOff})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if _, err := single.CreateStream(ctx, "local", client.StreamSettings{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		stream    string
		partition uint32
		to        uint32
		code      wire.Code
		says      string
	}{
		{"orders", 0, 9, wire.CodeInvalidRequest, "holds no replica"},
		{"orders", 5, 1, wire.CodeInvalidRequest, "has 2 partitions"},
		{"local", 0, 1, wire.CodeInvalidRequest, "not replicated"},
		{"missing", 0, 1, wire.CodeNotFound, "no such stream"},
	}
	for _, tc := range refusals {
		_, err := single.TransferLeadership(ctx, tc.stream, tc.partition, tc.to)
		var werr *wire.Error
		if !errors.As(err, &werr) || werr.Code != tc.code || !strings.Contains(werr.Message, tc.says) {
			t.Errorf("transfer of %s/%d to node %d: %v, want %v saying %q", tc.stream, tc.partition, tc.to, err, tc.code, tc.says)
		}
	}
}

// dialCreating dials the seeds and creates the stream, retrying while the
// cluster forms.
func dialCreating(ctx context.Context, t *testing.T, seeds, stream string, settings client.StreamSettings) *client.Client {
	t.Helper()
	for {
		c, err := client.Dial(ctx, seeds, client.Options{Idempotence: client.IdempotenceOff})
		if err == nil {
			if _, err = c.CreateStream(ctx, stream, settings); err == nil {
				return c
			}
			c.Close()
		}
		if ctx.Err() != nil {
			t.Fatalf("creating stream %q: %v", stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produce appends one record, retrying while the partition has no leader.
func produce(ctx context.Context, t *testing.T, c *client.Client, stream string, partition uint32, payload string) {
	t.Helper()
	for {
		_, err := c.ProduceTo(ctx, client.ToPartition(stream, partition), client.Record{Payload: []byte(payload)})
		if err == nil {
			return
		}
		if !errors.Is(err, client.ErrNoLeader) || ctx.Err() != nil {
			t.Fatalf("produce to %s/%d: %v", stream, partition, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderOf waits until srv knows the partition's leader and returns it.
func leaderOf(ctx context.Context, t *testing.T, srv *Server, stream string, partition uint32) uint32 {
	t.Helper()
	for {
		state, err := srv.cluster.ClusterState(ctx, true, stream)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range state.Partitions {
			if p.Partition == partition && p.Leader != 0 {
				return p.Leader
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d knows no leader of %s/%d", srv.mu.cfg.NodeID, stream, partition)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
