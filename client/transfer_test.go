package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// leaderTransfer answers LeaderTransfer as a cluster member would: a node
// that does not lead the partition refuses it like a produce; the leader
// moves the partition to the node asked for.
func (fc *fakeConn) leaderTransfer(f wire.Frame) {
	b := fc.b
	m, err := wire.DecodeLeaderTransfer(f.Body)
	if err != nil {
		b.problem("LeaderTransfer: %v", err)
		return
	}
	var answer wire.Message
	b.locked(func() {
		if werr := b.cluster.leads(fc, m.Stream, m.Partition); werr != nil {
			answer = werr
			return
		}
		b.cluster.leaders[logKey(m.Stream, m.Partition)] = int(m.To) - 1
		answer = &wire.LeaderTransferred{Stream: m.Stream, Partition: m.Partition, From: uint32(fc.node + 1), Leader: m.To,
			Term: 4, ElapsedUs: 2500}
	})
	fc.out = wire.Append(fc.out, f.RequestID, answer)
}

func TestTransferLeadershipFollowsTheLeader(t *testing.T) {
	b, cluster := startFakeCluster(t, 3, func(b *fakeBroker) { b.partitions = map[string]uint32{"orders": 2} })
	cluster.move("orders", 1, 2)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	result, err := c.TransferLeadership(ctx, "orders", 1, 2)
	if err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	want := client.TransferResult{Stream: "orders", Partition: 1, From: 3, Leader: 2, Term: 4, Elapsed: 2500 * time.Microsecond}
	if result != want {
		t.Fatalf("TransferLeadership answered %+v, want %+v", result, want)
	}
	if redirects, _ := cluster.redirectCount(); redirects != 1 {
		t.Fatalf("%d not_leader answers, want 1: the request went to node 1, then to the leader", redirects)
	}
	// Records for the partition then follow it to its new leader.
	if _, err := c.ProduceTo(ctx, client.ToPartition("orders", 1), client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("Produce after the transfer: %v", err)
	}
	if _, err := c.TransferLeadership(ctx, "orders", 1, 0); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a transfer to node 0: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.TransferLeadership(ctx, "", 0, 1); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a transfer naming no stream: %v, want ErrInvalidArgument", err)
	}

	single := dial(t, startFake(t, nil), client.Options{})
	if _, err := single.TransferLeadership(ctx, "orders", 0, 1); !errors.Is(err, client.ErrNotClustered) {
		t.Fatalf("TransferLeadership on a single broker: %v, want ErrNotClustered", err)
	}
}
