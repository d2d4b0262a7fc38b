package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// freeLoopbackAddrs reserves n loopback ports and frees them for the
// caller to bind (a cluster's peer list names every address up front).
func freeLoopbackAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var held []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range held {
		l.Close()
	}
	return out
}

func clusterConfigs(t *testing.T, nodes int) []Config {
	t.Helper()
	addrs := freeLoopbackAddrs(t, nodes)
	peers := map[uint32]string{}
	for i, a := range addrs {
		peers[uint32(i+1)] = a
	}
	var out []Config
	for i := range nodes {
		cfg := testConfig(t, nil)
		cfg.HealthAddr = "off"
		cfg.NodeID, cfg.ClusterAddr, cfg.Peers = uint32(i+1), addrs[i], peers
		out = append(out, cfg)
	}
	return out
}

func TestClusterFormsAndReportsItsNodes(t *testing.T) {
	configs := clusterConfigs(t, 3)
	var servers []*Server
	for _, cfg := range configs {
		servers = append(servers, start(t, cfg))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		state, err := servers[0].cluster.ClusterState(context.Background(), false, "")
		if err != nil {
			t.Fatal(err)
		}
		up := 0
		for _, n := range state.Nodes {
			if n.State == wire.NodeUp {
				up++
			}
		}
		if state.MetaLeader != 0 && up == 3 {
			for _, n := range state.Nodes {
				want := servers[n.ID-1].Addr()
				if string(n.ClientAddr) != want {
					t.Fatalf("node %d client address %q, want %q", n.ID, n.ClientAddr, want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster after 20 s: meta leader %d, nodes %+v", state.MetaLeader, state.Nodes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterSettingsAreChecked(t *testing.T) {
	base := clusterConfigs(t, 1)[0]
	cases := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no cluster address", func(c *Config) { c.ClusterAddr = "" }, "--cluster-addr"},
		{"not in its peers", func(c *Config) { c.Peers = map[uint32]string{2: "127.0.0.1:1"} }, "--peer 1="},
		{"another address", func(c *Config) { c.Peers = map[uint32]string{1: "127.0.0.1:2"} }, "another address"},
		{"peers without an id", func(c *Config) { c.NodeID = 0 }, "need --node-id"},
		{"memory storage", func(c *Config) {
			c.Storage, c.DataDir, c.AcceptMemoryStorageLoss, c.MemoryStorageCap = StorageMemory, "", true, 1<<30
		}, "--storage disk"},
		{"plaintext beyond loopback", func(c *Config) {
			c.Peers = map[uint32]string{1: c.ClusterAddr, 2: "192.0.2.1:8000"}
		}, "--insecure-plaintext-cluster"},
	}
	for _, tc := range cases {
		cfg := base
		cfg.Peers = map[uint32]string{1: base.ClusterAddr}
		tc.change(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrInvalidSetting) && !errors.Is(err, ErrUnprotectedAddress) {
			t.Errorf("%s: %v wraps no sentinel", tc.name, err)
		}
	}
}

func TestReplicatedStreamInProcess(t *testing.T) {
	configs := clusterConfigs(t, 3)
	var servers []*Server
	var addrs []string
	for _, cfg := range configs {
		srv := start(t, cfg)
		servers = append(servers, srv)
		addrs = append(addrs, srv.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seeds := strings.Join(addrs, ",")
	var c *client.Client
	for {
		var err error
		c, err = client.Dial(ctx, seeds, client.Options{Idempotence: client.IdempotenceOff})
		if err == nil {
			if _, err = c.CreateStream(ctx, "orders", client.StreamSettings{Partitions: 2, Replicas: 3}); err == nil {
				break
			}
			c.Close()
		}
		if ctx.Err() != nil {
			t.Fatalf("creating a replicated stream: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	for p := uint32(0); p < 2; p++ {
		for i := range 50 {
			// Leadership may still settle after the create (a slow machine,
			// the race detector): a call that finds no leader is retried.
			for {
				_, err := c.ProduceTo(ctx, client.ToPartition("orders", p), client.Record{Payload: []byte(fmt.Sprint(p, "-", i))})
				if err == nil {
					break
				}
				if !errors.Is(err, client.ErrNoLeader) || ctx.Err() != nil {
					t.Fatalf("produce to partition %d: %v", p, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	// Every node reports the partitions, and the metrics say who leads.
	for _, srv := range servers {
		deadline := time.Now().Add(10 * time.Second)
		for {
			state, err := srv.cluster.ClusterState(ctx, true, "orders")
			if err != nil {
				t.Fatal(err)
			}
			if len(state.Partitions) == 2 && state.Partitions[0].Watermark == 50 && state.Partitions[1].Watermark == 50 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: partitions %+v", srv.mu.cfg.NodeID, state.Partitions)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	families, err := servers[0].engine.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"ironbus_replica_leader_node", "ironbus_replica_watermark", "ironbus_cluster_peer_connected",
		"ironbus_cluster_meta_leader_node", "ironbus_replica_leader_changes_total"} {
		if !names[want] {
			t.Errorf("metric %s missing", want)
		}
	}
}
