package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

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
