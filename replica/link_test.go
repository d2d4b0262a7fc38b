package replica_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/peerlink"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/replica"
)

// linkedNode is one node of a cluster on real loopback TCP: a Host whose
// messages travel over a peerlink.Link.
type linkedNode struct {
	id   uint32
	host *replica.Host
	link *peerlink.Link
}

func startLinkedCluster(t *testing.T, nodes, groups int) []*linkedNode {
	t.Helper()
	listeners := make([]net.Listener, nodes)
	peers := map[peerlink.NodeID]string{}
	for i := range listeners {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[i] = l
		peers[peerlink.NodeID(i+1)] = l.Addr().String()
	}
	var ids []replica.ReplicaID
	for i := range nodes {
		ids = append(ids, replica.NewReplicaID(uint32(i+1), 1))
	}
	out := make([]*linkedNode, nodes)
	for i := range nodes {
		n := &linkedNode{id: uint32(i + 1)}
		var linkReady sync.WaitGroup
		linkReady.Add(1)
		n.host = replica.NewHost(replica.HostConfig{TickInterval: 10 * time.Millisecond,
			Send: func(node uint32, group replica.GroupID, message []byte) {
				linkReady.Wait()
				n.link.Send(peerlink.NodeID(node), uint64(group), message)
			}})
		others := map[peerlink.NodeID]string{}
		for id, address := range peers {
			if id != peerlink.NodeID(n.id) {
				others[id] = address
			}
		}
		link, err := peerlink.New(peerlink.Config{Cluster: "test", Node: peerlink.NodeID(n.id), Listener: listeners[i],
			Peers: others, HeartbeatInterval: 50 * time.Millisecond, IdleTimeout: 500 * time.Millisecond,
			Handler: func(_ peerlink.NodeID, channel uint64, payload []byte) {
				n.host.Deliver(replica.GroupID(channel), append([]byte(nil), payload...))
			},
			Unreachable: func(node peerlink.NodeID) { n.host.NodeUnreachable(uint32(node)) }})
		if err != nil {
			t.Fatal(err)
		}
		n.link = link
		linkReady.Done()
		out[i] = n
	}
	ctx := context.Background()
	for i, n := range out {
		for g := 1; g <= groups; g++ {
			err := n.host.Add(ctx, replica.Config{ID: ids[i], Group: replica.GroupID(g),
				Journal: replica.NewMemoryJournal(), Apply: func([]replica.Entry) error { return nil }}, ids)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, n := range out {
			n.stop()
		}
	})
	return out
}

func (n *linkedNode) stop() {
	if n.host != nil {
		n.host.Close()
		n.link.Close()
		n.host = nil
	}
}

func linkedRecord(value string) []replica.Record {
	body := []byte(value)
	return []replica.Record{{Body: body, BodyCRC: record.Checksum(body)}}
}

// proposeAnywhere proposes to the group's leader among the running nodes,
// following NotLeaderError, until the proposal commits.
func proposeAnywhere(ctx context.Context, nodes []*linkedNode, group replica.GroupID, value string) (*replica.Proposal, error) {
	target := 0
	for ctx.Err() == nil {
		n := nodes[target%len(nodes)]
		if n.host == nil {
			target++
			continue
		}
		p, err := n.host.Propose(ctx, group, linkedRecord(value))
		var notLeader *replica.NotLeaderError
		switch {
		case errors.As(err, &notLeader) && notLeader.Leader != 0 && nodes[notLeader.Leader.Node()-1].host != nil:
			target = int(notLeader.Leader.Node()) - 1
			continue
		case err != nil:
			target++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		select {
		case <-p.Done():
			if p.Err() == nil {
				return p, nil
			}
		case <-ctx.Done():
		}
	}
	return nil, ctx.Err()
}

func TestLinkedClusterSurvivesLeaderLoss(t *testing.T) {
	nodes := startLinkedCluster(t, 3, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked := map[replica.GroupID]uint64{}
	for g := replica.GroupID(1); g <= 8; g++ {
		for i := range 5 {
			p, err := proposeAnywhere(ctx, nodes, g, fmt.Sprint(g, "-", i))
			if err != nil {
				t.Fatal(err)
			}
			acked[g] = p.BaseOffset + 1
		}
	}
	// Stop the node that leads group 1, then keep writing every group.
	for _, n := range nodes {
		if s, err := n.host.Status(ctx, 1); err == nil && s.Role == replica.RoleLeader {
			n.stop()
			break
		}
	}
	for g := replica.GroupID(1); g <= 8; g++ {
		p, err := proposeAnywhere(ctx, nodes, g, fmt.Sprint(g, "-after"))
		if err != nil {
			t.Fatal(err)
		}
		if p.BaseOffset != acked[g] {
			t.Fatalf("group %d: after losing a node the next offset is %d, want %d", g, p.BaseOffset, acked[g])
		}
	}
}
