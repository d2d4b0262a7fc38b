package session

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/wire"
)

// transferView is a ClusterView whose TransferLeadership answers by the
// node asked for: 2 moves, 3 is led elsewhere, 4 has no leader, 5 is no
// voter.
type transferView struct {
	mu    sync.Mutex
	calls []string
}

func (*transferView) ClusterState(context.Context, bool, string) (*wire.ClusterState, error) {
	return &wire.ClusterState{}, nil
}

func (*transferView) CreateStream(context.Context, string, uint32, int) error { return nil }

func (v *transferView) TransferLeadership(_ context.Context, stream string, partition uint32, to uint32) (*wire.LeaderTransferred, error) {
	v.mu.Lock()
	v.calls = append(v.calls, fmt.Sprintf("%s/%d→%d", stream, partition, to))
	v.mu.Unlock()
	switch to {
	case 2:
		return &wire.LeaderTransferred{Stream: []byte(stream), Partition: partition, From: 1, Leader: 2, Term: 7, ElapsedUs: 3000}, nil
	case 3:
		return nil, &broker.NotLeaderError{Stream: stream, Partition: partition, Node: 3, ClientAddr: "127.0.0.1:7003"}
	case 4:
		return nil, broker.NoLeader(stream, partition, "an election")
	}
	return nil, fmt.Errorf("%w: node %d is not a voter", broker.ErrInvalidArgument, to)
}

func clusterHello(c *rawClient, capabilities uint64) wire.Welcome {
	c.t.Helper()
	c.send(0, &wire.Hello{MinVersion: 1, MaxVersion: 1, Capabilities: capabilities, MaxFrame: wire.DefaultMaxFrame,
		Window: 64, ClientName: "test"})
	frame := c.read()
	welcome, err := wire.DecodeWelcome(frame.Body)
	if frame.Type != wire.TypeWelcome || err != nil {
		c.t.Fatalf("handshake answered %v: %v", frame.Type, err)
	}
	return welcome
}

// TestLeaderTransferRequests: a cluster member hands LeaderTransfer to its
// ClusterView and answers with the outcome, its refusals mapped to wire
// codes (not_leader with the leader's id and address for the SDK to
// follow, no_leader retryable, invalid_request); node 0, a connection
// without the cluster capability and a single node are refused before
// the view is asked.
func TestLeaderTransferRequests(t *testing.T) {
	view := &transferView{}
	addr, _ := testBroker(t, testConfig{session: Config{Cluster: view}})
	c := dialRaw(t, addr)
	if welcome := clusterHello(c, wire.Capabilities|wire.CapCluster); welcome.Capabilities&wire.CapCluster == 0 {
		t.Fatal("a cluster member does not announce the cluster capability")
	}

	c.send(1, &wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 2})
	frame := c.read()
	moved, err := wire.DecodeLeaderTransferred(frame.Body)
	if frame.Type != wire.TypeLeaderTransferred || frame.RequestID != 1 || err != nil ||
		string(moved.Stream) != "orders" || moved.Partition != 2 || moved.From != 1 || moved.Leader != 2 || moved.ElapsedUs != 3000 {
		t.Fatalf("a transfer answered %v %+v (%v)", frame.Type, moved, err)
	}
	c.send(2, &wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 3})
	if e := expectError(t, c.read(), 2, wire.CodeNotLeader); !e.Retryable || !e.HasValue || e.Value != 3 || e.Leader != "127.0.0.1:7003" {
		t.Fatalf("not_leader: %+v", e)
	}
	c.send(3, &wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 4})
	if e := expectError(t, c.read(), 3, wire.CodeNoLeader); !e.Retryable || e.RetryAfter == 0 {
		t.Fatalf("no_leader: %+v", e)
	}
	c.send(4, &wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 5})
	expectError(t, c.read(), 4, wire.CodeInvalidRequest)
	c.send(5, &wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 0})
	expectError(t, c.read(), 5, wire.CodeInvalidRequest)

	plain := dialRaw(t, addr)
	clusterHello(plain, wire.Capabilities)
	plain.send(1, &wire.LeaderTransfer{Stream: []byte("orders"), To: 2})
	expectError(t, plain.read(), 1, wire.CodeInvalidRequest)

	view.mu.Lock()
	calls := fmt.Sprint(view.calls)
	view.mu.Unlock()
	if calls != "[orders/2→2 orders/2→3 orders/2→4 orders/2→5]" {
		t.Fatalf("the view was asked %s", calls)
	}

	singleAddr, _ := testBroker(t, testConfig{})
	single := dialRaw(t, singleAddr)
	clusterHello(single, wire.Capabilities|wire.CapCluster)
	single.send(1, &wire.LeaderTransfer{Stream: []byte("orders"), To: 2})
	if e := expectError(t, single.read(), 1, wire.CodeInvalidRequest); e.Closes {
		t.Fatalf("a single node closes the connection: %+v", e)
	}
}
